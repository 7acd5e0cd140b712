//go:build !unix

package execstage

import "os/exec"

// killGroup: without process groups, cancelling kills the program alone
// (exec.CommandContext's default).
func killGroup(*exec.Cmd) {}
