package domain

import "testing"

func TestProgressComplete(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		p    Progress
		want bool
	}{
		{"all committed", Progress{Total: 3, Committed: 3}, true},
		{"one left", Progress{Total: 3, Committed: 2, Left: 1}, false},
		{"a counter not created yet", Progress{Total: 3, Missing: 1}, false},
		{"no tasks: an empty input", Progress{}, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.p.Complete(); got != tc.want {
				t.Errorf("%+v.Complete() = %v, want %v", tc.p, got, tc.want)
			}
		})
	}
}
