package check

import (
	"testing"

	"github.com/batchwork/batchwork/shared/blob"
)

// TestOutputLayoutAgreesWithBlob checks the checker's re-declared output
// layout against the one the executors write, and that it reads its keys
// back.
func TestOutputLayoutAgreesWithBlob(t *testing.T) {
	t.Parallel()
	for p := 0; p < 2000; p += 7 {
		for a := 1; a <= 2; a++ {
			want := blob.OutputKey("j1", "map", p, a, 3)
			if got := outputKey("j1", "map", p, a, 3); got != want {
				t.Fatalf("outputKey(%d, %d) = %q, want %q (shared/blob)", p, a, got, want)
			}
			st, gp, ga, part, err := parseOutputKey("j1", want)
			if err != nil || st != "map" || gp != p || ga != a || part != 3 {
				t.Fatalf("parseOutputKey(%q) = %q %d %d %d %v", want, st, gp, ga, part, err)
			}
		}
	}
}
