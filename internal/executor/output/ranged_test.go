package output

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/batchwork/batchwork/internal/testdouble"
	"github.com/batchwork/batchwork/shared/blob"
	"github.com/batchwork/batchwork/shared/domain"
)

// A range shuffle's map output is one sorted run, put once, whatever the
// part sizes: records sorted by key, equal keys in the order written, a
// last line without its newline given one.
func TestRangedOutputPutsOneSortedRun(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for _, b := range []*testdouble.Blob{streamBlob(), testdouble.NewBlob(nil)} {
		o := New(1, 1<<20)
		o.SetPartSizes(10, 1) // would stream, were it not ranged
		o.Range()
		o.Bind(ctx, b, func(r int) string { return fmt.Sprintf("k%d", r) })
		for i, k := range []string{"m", "c", "x", "c", "a"} {
			if err := o.Emit(k, fmt.Sprint(i)); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := o.Write([]byte("b\tw\nc\tlast")); err != nil {
			t.Fatal(err)
		}
		if err := o.Publish(ctx, b); err != nil {
			t.Fatal(err)
		}
		if o.UploadedParts() != 0 || o.Objects() != 1 || o.Records() != 7 {
			t.Errorf("%d parts uploaded, %d objects, %d records; want none, 1 and 7", o.UploadedParts(), o.Objects(), o.Records())
		}
		raw := object(b, "k0")
		h, err := blob.DecodeRunHeader(raw)
		if err != nil {
			t.Fatal(err)
		}
		if got, want := string(raw[h.Head:]), "a\t4\nb\tw\nc\t1\nc\t3\nc\tlast\nm\t0\nx\t2\n"; got != want {
			t.Errorf("run's records %q, want %q", got, want)
		}
		// Published again (a retry after a lost response): the object
		// exists, which is this attempt's own; put afresh, it is the same
		// run, with as many records.
		if err := o.Publish(ctx, b); err != nil {
			t.Errorf("publish again: %v", err)
		}
		again := testdouble.NewBlob(nil)
		if err := o.Publish(ctx, again); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(object(again, "k0"), raw) || o.Records() != 7 {
			t.Errorf("published again: %q, %d records; want the same run, 7 records", object(again, "k0"), o.Records())
		}
	}
}

func TestRangedOutputRefuses(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := streamBlob()
	o := New(1, 64)
	o.Range()
	o.Bind(ctx, b, func(int) string { return "k" })
	if _, err := o.Part(1).Write([]byte("a\tb\n")); err == nil || !strings.Contains(err.Error(), "range shuffle") {
		t.Errorf("a write to partition 1: %v, want the range shuffle's refusal", err)
	}
	o = New(1, 64)
	o.Range()
	o.Bind(ctx, b, func(int) string { return "k" })
	err := o.Emit("key", strings.Repeat("v", 100))
	if !errors.Is(err, ErrOutputTooLarge) || !strings.Contains(err.Error(), "sorts its records in memory") {
		t.Errorf("past the cap: %v, want ErrOutputTooLarge saying the records are sorted in memory", err)
	}
	if o.Refused() == nil {
		t.Error("the attempt may commit after a refused write")
	}
	o = New(1, 0)
	o.Range()
	o.segments = &segments{}
	if err := o.EnterSegments(nil); !errors.Is(err, domain.ErrCheckpoint) {
		t.Errorf("checkpoint: %v, want ErrCheckpoint", err)
	}
}
