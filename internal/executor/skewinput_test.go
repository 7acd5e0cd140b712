package executor

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"testing"

	"github.com/batchwork/batchwork/internal/testdouble"
	"github.com/batchwork/batchwork/shared/blob"
	"github.com/batchwork/batchwork/shared/control"
	"github.com/batchwork/batchwork/shared/domain"
	"github.com/batchwork/batchwork/shared/skew"
)

// skewJoinSpec joins shuffles a and b (3 partitions) with skew.
const skewJoinSpec = `{"name":"j","stages":[
 {"name":"a","task":"m","partitions":{"count":3},"shuffle":{"partitions":3}},
 {"name":"b","task":"m","partitions":{"count":2},"shuffle":{"partitions":3}},
 {"name":"join","task":"r","after":["a","b"],"skew":{"join":true}}]}`

// putShuffle writes stage's map outputs (one indexed object each; map
// task m's partition p holds "<stage>m<m>p<p>\t1\n") and its manifest.
func putShuffle(t *testing.T, b *testdouble.Blob, stage string, maps, parts int) {
	t.Helper()
	ctx := context.Background()
	w := blob.NewManifestWriter(b, blob.StageManifestKey("j1", stage), domain.Manifest{Job: "j1", Stage: stage}, 100)
	w.IndexedShuffle()
	for m := range maps {
		slices := make([][]byte, parts)
		for p := range parts {
			slices[p] = fmt.Appendf(nil, "%sm%dp%d\t1\n", stage, m, p)
		}
		body, size := blob.ShuffleBody(slices)
		raw := make([]byte, size)
		if _, err := body.ReadAt(raw, 0); err != nil {
			t.Fatal(err)
		}
		key := blob.OutputKey("j1", stage, m, 1, 0)
		if err := b.PutIfAbsent(ctx, key, raw); err != nil {
			t.Fatal(err)
		}
		if err := w.Add(ctx, domain.Output{Stage: stage, Partition: m, Attempt: 1, Key: key}); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(ctx); err != nil {
		t.Fatal(err)
	}
}

// What each task of a skewed stage reads: a piece, its map tasks' slices
// of the side it splits and all of the other side's partition; a task
// with no piece, its whole partition; a combine task, the outputs its
// claim lists.
func TestSkewInput(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := rangedBlob(&testdouble.Journal{})
	putShuffle(t, b, "a", 3, 3)
	putShuffle(t, b, "b", 2, 3)
	plan := skew.Plan{Partitions: 3, Pieces: []skew.Piece{
		{Partition: 1, Task: 1, Source: 0, From: 0, To: 2},
		{Partition: 1, Task: 3, Source: 0, From: 2, To: 1 << 30},
	}}
	raw, _ := json.Marshal(plan)
	if err := b.PutIfAbsent(ctx, skew.Key("j1", "join"), raw); err != nil {
		t.Fatal(err)
	}
	sp := mustSpec(t, skewJoinSpec)
	r := &Runner{Blob: b, Log: discard()}
	read := func(c control.Claim, part, src int) string {
		t.Helper()
		in, err := reduceInput(ctx, r, c, domain.TaskRef{Job: "j1", Stage: 2, Partition: part}, src)
		if err != nil {
			t.Fatal(err)
		}
		defer in.Close()
		got, err := io.ReadAll(in)
		if err != nil {
			t.Fatal(err)
		}
		return string(got)
	}
	c := control.Claim{Spec: sp}
	for _, tc := range []struct {
		task, src int
		want      string
	}{
		{1, 0, "am0p1\t1\nam1p1\t1\n"},           // piece 0: map tasks 0 and 1 of a
		{3, 0, "am2p1\t1\n"},                     // piece 1: map task 2 of a
		{1, 1, "bm0p1\t1\nbm1p1\t1\n"},           // b, replicated: all of partition 1
		{3, 1, "bm0p1\t1\nbm1p1\t1\n"},           // to both pieces
		{0, 0, "am0p0\t1\nam1p0\t1\nam2p0\t1\n"}, // not hot: all of it
	} {
		if got := read(c, tc.task, tc.src); got != tc.want {
			t.Errorf("task %d, source %d read %q, want %q", tc.task, tc.src, got, tc.want)
		}
	}

	// A combinable plan: task 1 reduces its pieces' outputs.
	plan.Combinable = true
	plan.Pieces[0].Task = 4
	raw, _ = json.Marshal(plan)
	b.Put(testdouble.DefaultBucket, skew.Key("j2", "join"), raw)
	for i, body := range []string{"x\t2\n", "x\t3\n"} {
		b.Put(testdouble.DefaultBucket, fmt.Sprintf("piece-%d", i), []byte(body))
	}
	c.Combine = []domain.Output{{Key: "piece-0"}, {Key: "piece-1"}}
	in, err := reduceInput(ctx, r, c, domain.TaskRef{Job: "j2", Stage: 2, Partition: 1}, 0)
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(in)
	if string(got) != "x\t2\nx\t3\n" {
		t.Errorf("combine task read %q, want its pieces' outputs", got)
	}
}
