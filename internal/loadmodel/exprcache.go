package loadmodel

import (
	"maps"
	"sync"
)

// The control plane writes with a few dozen distinct update expressions,
// so the recorder parses each once (ParseUpdate's regular expression was
// most of the recording middleware's CPU). Its results are shared and
// read only. They are found by the expression, then by names equal to
// those it was parsed under: a key rendered from both (the names sorted)
// cost more per request than the lookup.
type parsedUpdate struct {
	names   map[string]string // a copy of those it was parsed under
	set     map[string]string
	assigns []assign // set's entries, for iterating without a map iterator
	removed []string
}

// assign is one attribute a SET clause assigns a value placeholder.
type assign struct{ attr, ph string }

// maxParsed bounds the cache; past it, it starts again.
const maxParsed = 4096

var parsed struct {
	mu sync.Mutex
	m  map[string][]parsedUpdate // by expression
	n  int                       // entries in m
}

// parseUpdateOnce is ParseUpdate, remembered by expression and names.
func parseUpdateOnce(expr string, names map[string]string) parsedUpdate {
	parsed.mu.Lock()
	for _, p := range parsed.m[expr] {
		if maps.Equal(p.names, names) {
			parsed.mu.Unlock()
			return p
		}
	}
	parsed.mu.Unlock()
	set, removed := ParseUpdate(expr, names)
	p := parsedUpdate{names: maps.Clone(names), set: set, removed: removed}
	for attr, ph := range set {
		p.assigns = append(p.assigns, assign{attr, ph})
	}
	parsed.mu.Lock()
	if parsed.m == nil || parsed.n >= maxParsed {
		parsed.m, parsed.n = map[string][]parsedUpdate{}, 0
	}
	parsed.m[expr] = append(parsed.m[expr], p)
	parsed.n++
	parsed.mu.Unlock()
	return p
}
