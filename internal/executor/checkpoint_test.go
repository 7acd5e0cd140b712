package executor

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/batchwork/batchwork/internal/executor/output"
	"github.com/batchwork/batchwork/shared/batch"
)

// Outputs written as checkpoint segments, streamed or buffered, publish
// the same objects as an uninterrupted attempt's, and an attempt resumed
// from a checkpoint's segments publishes them too, having written only
// what came after the checkpoint. Writes after the resumed checkpoint by
// the attempt that stopped are not in them.
func TestSegmentedOutputsPublishWhatWasWritten(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name     string
		partSize int // 10: every partition streams; 1 MiB: none does
	}{{"streamed", 10}, {"buffered", 1 << 20}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			b := &mpBlob{minPart: 1}
			const parts = 3
			newOut := func(attempt int) *output.Output {
				o := output.New(parts, 0)
				o.SetPartSizes(tc.partSize, 1)
				o.Bind(ctx, b, func(r int) string { return fmt.Sprintf("a%d/part-%d", attempt, r) })
				o.AllowSegments(func(seq, r int) string { return fmt.Sprintf("a%d/seg-%d/%d", attempt, seq, r) })
				return o
			}
			write := func(o *output.Output, from, to int) {
				for i := from; i < to; i++ {
					if _, err := fmt.Fprintf(o.Part(i%parts), "record %03d\n", i); err != nil {
						t.Fatal(err)
					}
				}
			}
			want := make([][]byte, parts)
			for i := range 90 {
				want[i%parts] = append(want[i%parts], fmt.Sprintf("record %03d\n", i)...)
			}

			// Attempt 1 checkpoints twice, writes on, and stops.
			o1 := newOut(1)
			if err := o1.EnterSegments(nil); err != nil {
				t.Fatal(err)
			}
			write(o1, 0, 30)
			if _, _, err := o1.Seal(ctx, b); err != nil {
				t.Fatal(err)
			}
			write(o1, 30, 60)
			_, ck, err := o1.Seal(ctx, b)
			if err != nil {
				t.Fatal(err)
			}
			fmt.Fprintf(o1.Part(0), "lost after the checkpoint\n")
			o1.Abort(ctx, discard()) // as the runner does when an attempt fails

			// Attempt 2 resumes from the second checkpoint.
			o2 := newOut(2)
			if err := o2.EnterSegments(&batch.Checkpoint{Outputs: ck}); err != nil {
				t.Fatal(err)
			}
			write(o2, 60, 90)
			if err := o2.Publish(ctx, b); err != nil {
				t.Fatal(err)
			}
			for r := range parts {
				if got := b.objs[fmt.Sprintf("a2/part-%d", r)]; !bytes.Equal(got, want[r]) {
					t.Fatalf("partition %d: %q, want %q", r, got, want[r])
				}
			}
			if got := o2.Records(); got != 90 {
				t.Fatalf("resumed attempt counts %d records, want 90 (its checkpoint's and its own)", got)
			}
			if _, open := b.state(); open != 0 {
				t.Fatalf("%d uploads left open", open)
			}
			if streamed := o1.UploadedParts() > 0; streamed != (tc.partSize == 10) {
				t.Fatalf("uploaded %d parts: streaming is not what the case tests", o1.UploadedParts())
			}
		})
	}
}

// Outputs that streamed to their object before the first checkpoint
// cannot be checkpointed: the error says to call Resume first.
func TestSegmentsRefusedAfterStreaming(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := &mpBlob{minPart: 1}
	o := output.New(1, 0)
	o.SetPartSizes(10, 1)
	o.Bind(ctx, b, func(int) string { return "out" })
	o.AllowSegments(func(seq, r int) string { return fmt.Sprintf("seg-%d/%d", seq, r) })
	fmt.Fprintf(o, "more than a part's worth\n")
	if err := o.EnterSegments(nil); !errors.Is(err, batch.ErrCheckpoint) {
		t.Fatalf("entering segments after streaming: %v, want a refused checkpoint", err)
	}
}

// A checkpoint's arguments are checked before anything is written.
func TestCheckpointArgs(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name         string
		offset, prev int64
		state        int
		want         string
	}{
		{"fine", 10, 5, 100, ""},
		{"same offset", 5, 5, 0, ""},
		{"negative", -1, 0, 0, "offset -1 is negative"},
		{"backward", 4, 5, 0, "offset 4 is behind the last checkpoint's 5"},
		{"state too large", 10, 0, batch.MaxCheckpointState + 1, "over the 65536-byte limit"},
	} {
		err := batch.CheckArgs(tc.offset, tc.prev, make([]byte, tc.state))
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: %v", tc.name, err)
		case tc.want != "" && (!errors.Is(err, batch.ErrCheckpoint) || !bytes.Contains([]byte(err.Error()), []byte(tc.want))):
			t.Errorf("%s: %v, want a refused checkpoint saying %q", tc.name, err, tc.want)
		}
	}
}
