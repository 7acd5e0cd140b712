package loadmodel

import (
	"maps"
	"reflect"
	"testing"
)

// The remembered parse is ParseUpdate's, and names take part in the key:
// one expression under other names parses apart.
func TestParseUpdateOnce(t *testing.T) {
	cases := []struct {
		expr  string
		names map[string]string
	}{
		{"SET #st = :to, tok = :tok ADD att :one", map[string]string{"#st": "st"}},
		{"SET #st = :to, tok = :tok ADD att :one", map[string]string{"#st": "gsi1pk"}},
		{"SET a = :a REMOVE due, #x", map[string]string{"#x": "lease"}},
		{"SET a = :a REMOVE due, #x", map[string]string{"#x": "tok"}},
		{"REMOVE due", nil},
		// The same names in another map, and a name more.
		{"SET #st = :to, tok = :tok ADD att :one", map[string]string{"#st": "gsi1pk", "#x": "lease"}},
	}
	for round := 0; round < 2; round++ { // the second from the cache
		for _, c := range cases {
			wantSet, wantRemoved := ParseUpdate(c.expr, c.names)
			p := parseUpdateOnce(c.expr, maps.Clone(c.names))
			if !reflect.DeepEqual(p.set, wantSet) || !reflect.DeepEqual(p.removed, wantRemoved) {
				t.Fatalf("round %d, %q %v: got %v %v, want %v %v", round, c.expr, c.names, p.set, p.removed, wantSet, wantRemoved)
			}
			assigned := map[string]string{}
			for _, a := range p.assigns {
				assigned[a.attr] = a.ph
			}
			if len(p.assigns) != len(wantSet) || !maps.Equal(assigned, wantSet) {
				t.Fatalf("round %d, %q: assigns %v, want the entries of %v", round, c.expr, p.assigns, wantSet)
			}
		}
	}
}

func BenchmarkParseUpdate(b *testing.B) {
	expr, names := "SET mx = if_not_exists(mx, :mx), #st = :to, tok = :tok, lease = :lease, upd = :now, cl = :now REMOVE due ADD att :one", map[string]string{"#st": "st"}
	b.Run("parse", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			ParseUpdate(expr, names)
		}
	})
	b.Run("remembered", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			parseUpdateOnce(expr, names)
		}
	})
}
