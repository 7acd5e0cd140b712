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

// A PartiQL statement's text is the same for every write of one kind (its
// keys and values are parameters), so its shape is parsed once too.
type stmtShape struct {
	matched bool // the statement is of the kind parsed
	ok      bool // every value is a parameter
	table   string
	sets    []string // attributes assigned parameters, in their order
	removed []string
	where   []string // the WHERE's leading equalities, after sets' parameters
}

// shapeKey is a statement read as one kind (an INSERT's reading of an
// UPDATE does not match, and is remembered apart from its UPDATE's).
type shapeKey struct {
	insert bool
	stmt   string
}

var shapes struct {
	mu sync.Mutex
	m  map[shapeKey]stmtShape
}

// shapeOnce is parse(stmt), remembered by the statement and its kind
// (insert: parse is insertShape); its result is shared and read only.
func shapeOnce(stmt string, insert bool, parse func(string) stmtShape) stmtShape {
	k := shapeKey{insert, stmt}
	shapes.mu.Lock()
	sh, ok := shapes.m[k]
	shapes.mu.Unlock()
	if ok {
		return sh
	}
	sh = parse(stmt)
	shapes.mu.Lock()
	if shapes.m == nil || len(shapes.m) >= maxParsed {
		shapes.m = map[shapeKey]stmtShape{}
	}
	shapes.m[k] = sh
	shapes.mu.Unlock()
	return sh
}
