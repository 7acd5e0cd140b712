package loadmodel

import (
	"maps"
	"slices"
	"strings"
	"sync"
)

// The control plane writes with a few dozen distinct update expressions,
// so the recorder parses each once (ParseUpdate's regular expression was
// most of the recording middleware's CPU). Its results are shared and
// read only.
type parsedUpdate struct {
	set     map[string]string
	removed []string
}

// maxParsed bounds the cache; past it, it starts again.
const maxParsed = 4096

var parsed struct {
	mu sync.Mutex
	m  map[string]parsedUpdate
}

// parseUpdateOnce is ParseUpdate, remembered by expression and names.
func parseUpdateOnce(expr string, names map[string]string) (set map[string]string, removed []string) {
	k := updateKey(expr, names)
	parsed.mu.Lock()
	p, ok := parsed.m[k]
	parsed.mu.Unlock()
	if ok {
		return p.set, p.removed
	}
	set, removed = ParseUpdate(expr, names)
	parsed.mu.Lock()
	if parsed.m == nil || len(parsed.m) >= maxParsed {
		parsed.m = map[string]parsedUpdate{}
	}
	parsed.m[k] = parsedUpdate{set: set, removed: removed}
	parsed.mu.Unlock()
	return set, removed
}

// updateKey is the expression and its names, which decide its parse.
func updateKey(expr string, names map[string]string) string {
	var b strings.Builder
	b.WriteString(expr)
	for _, k := range slices.Sorted(maps.Keys(names)) {
		b.WriteByte(0)
		b.WriteString(k)
		b.WriteByte(0)
		b.WriteString(names[k])
	}
	return b.String()
}
