package executor

import (
	"io"
	"strings"
	"testing"
	"testing/iotest"
)

func TestLineCounter(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, in string
		want     int64
	}{
		{"empty", "", 0},
		{"lines", "a\nb\nc\n", 3},
		{"last line without newline", "a\nb", 2},
		{"blank lines count", "\n\n", 2},
		{"one partial line", "abc", 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			// One byte per Read, so a line spans reads.
			task := &Task{Input: iotest.OneByteReader(strings.NewReader(tc.in))}
			lc := countInput(task)
			if _, err := io.Copy(io.Discard, task.Input); err != nil {
				t.Fatal(err)
			}
			if got := lc.Records(); got != tc.want {
				t.Fatalf("records %d, want %d", got, tc.want)
			}
		})
	}
	if countInput(&Task{}) != nil {
		t.Fatal("a task without input has no counter")
	}
}
