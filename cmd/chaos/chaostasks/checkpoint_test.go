package chaostasks

import "testing"

func TestCheckNumbered(t *testing.T) {
	for _, tc := range []struct {
		name, out string
		ok        bool
	}{
		{"empty", "", true},
		{"in order", "1\ta\n2\tb\n3\tc\n", true},
		{"no final newline", "1\ta\n2\tb", true},
		{"a record skipped", "1\ta\n3\tc\n", false},
		{"a record repeated", "1\ta\n2\tb\n2\tb\n3\tc\n", false},
		{"starts over", "1\ta\n2\tb\n1\ta\n", false},
		{"no number", "a\n", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := CheckNumbered([]byte(tc.out)); (err == nil) != tc.ok {
				t.Fatalf("CheckNumbered(%q) = %v, want ok %v", tc.out, err, tc.ok)
			}
		})
	}
}
