package wordcount

import (
	"bytes"
	"context"
	"testing"

	"github.com/batchwork/batchwork/shared/batchwork"
)

// Map emits one (word, count) record per distinct word of its split, each
// in its key's partition, and Reduce sums one partition's records into
// sorted "word\tcount" lines: run in process with batchwork.RunTask.
func TestMapThenReduce(t *testing.T) {
	ctx := context.Background()
	const reducers = 2
	m, err := batchwork.RunTask(ctx, Map, batchwork.TaskInput{
		Stage: "map", Input: bytes.NewReader([]byte("The cat; the HAT.\nA cat!\n")), Parts: reducers,
	})
	if err != nil {
		t.Fatalf("map: %v", err)
	}
	want := map[string]string{"a": "1", "cat": "2", "hat": "1", "the": "2"}
	got := map[string]string{}
	for p, part := range m.Parts {
		err := batchwork.Records(bytes.NewReader(part), func(k, v string) error {
			if batchwork.PartitionOf(k, reducers) != p {
				t.Errorf("word %q in partition %d, want %d", k, p, batchwork.PartitionOf(k, reducers))
			}
			got[k] = v
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if len(got) != len(want) {
		t.Fatalf("map emitted %v, want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("map emitted %s=%q, want %q", k, got[k], v)
		}
	}
	// A reducer reads every map task's records for its partition.
	in := append(append([]byte{}, m.Parts[1]...), m.Parts[1]...)
	r, err := batchwork.RunTask(ctx, Reduce, batchwork.TaskInput{Stage: "reduce", Partition: 1, Input: bytes.NewReader(in)})
	if err != nil {
		t.Fatalf("reduce: %v", err)
	}
	var wantOut bytes.Buffer
	for _, w := range []string{"a", "cat", "hat", "the"} {
		if batchwork.PartitionOf(w, reducers) == 1 {
			wantOut.WriteString(w + "\t" + map[string]string{"a": "2", "cat": "4", "hat": "2", "the": "4"}[w] + "\n")
		}
	}
	if string(r.Parts[0]) != wantOut.String() {
		t.Fatalf("reduce wrote %q, want %q", r.Parts[0], wantOut.String())
	}
	if wantOut.Len() == 0 {
		t.Fatal("partition 1 holds no word: the test proves nothing")
	}
}
