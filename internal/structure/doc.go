// Package structure holds no code: its tests hold the repository to the
// shape a newcomer can read (docs/development.md, "Layout"): packages of a
// size one can read in an afternoon, types with a surface one can hold in
// mind, and the control plane's packages importing one way only.
package structure
