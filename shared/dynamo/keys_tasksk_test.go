package dynamo

import (
	"fmt"
	"testing"
)

// taskSK renders every partition as "%06d" does: the keys of records
// written before it must still be found.
func TestTaskSKAsFormatted(t *testing.T) {
	for _, p := range []int{0, 1, 9, 10, 99, 123, 4096, 99999, 100000, 999999, 1000000, 1234567, -1, -42} {
		if got, want := taskSK(p), fmt.Sprintf("%06d", p); got != want {
			t.Errorf("taskSK(%d) = %q, want %q", p, got, want)
		}
	}
}

func BenchmarkTaskSK(b *testing.B) {
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		_ = taskSK(i % 1000)
	}
}
