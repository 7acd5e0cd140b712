package check

import (
	"bytes"
	"io"
	"testing"

	"github.com/batchwork/batchwork/shared/blob"
)

// The checker's re-declared layout of an indexed shuffle object reads
// what shared/blob writes; any other object is one partition.
func TestShuffleParts(t *testing.T) {
	parts := [][]byte{[]byte("b\t1\na\t2\n"), nil, []byte("c\t3\n")}
	body, _ := blob.ShuffleBody(parts)
	raw, err := io.ReadAll(body)
	if err != nil {
		t.Fatal(err)
	}
	got := shuffleParts(raw)
	if len(got) != len(parts) {
		t.Fatalf("%d partitions, want %d", len(got), len(parts))
	}
	for r := range parts {
		if !bytes.Equal(got[r], parts[r]) {
			t.Errorf("partition %d = %q, want %q", r, got[r], parts[r])
		}
	}
	plain := []byte("a\t1\n")
	if got := shuffleParts(plain); len(got) != 1 || !bytes.Equal(got[0], plain) {
		t.Errorf("a plain object reads as %q", got)
	}
}
