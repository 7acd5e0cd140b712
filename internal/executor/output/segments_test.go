package output

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/batchwork/batchwork/internal/testdouble"
	"github.com/batchwork/batchwork/shared/domain"
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
			b := streamBlob()
			const parts = 3
			newOut := func(attempt int) *Output {
				o := New(parts, 0)
				o.SetPartSizes(tc.partSize, 1)
				o.Bind(ctx, b, func(r int) string { return fmt.Sprintf("a%d/part-%d", attempt, r) })
				o.AllowSegments(func(seq, r int) string { return fmt.Sprintf("a%d/seg-%d/%d", attempt, seq, r) })
				return o
			}
			write := func(o *Output, from, to int) {
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
			if err := o2.EnterSegments(&domain.Checkpoint{Outputs: ck}); err != nil {
				t.Fatal(err)
			}
			write(o2, 60, 90)
			if err := o2.Publish(ctx, b); err != nil {
				t.Fatal(err)
			}
			for r := range parts {
				if got := object(b, fmt.Sprintf("a2/part-%d", r)); !bytes.Equal(got, want[r]) {
					t.Fatalf("partition %d: %q, want %q", r, got, want[r])
				}
			}
			if got := o2.Records(); got != 90 {
				t.Fatalf("resumed attempt counts %d records, want 90 (its checkpoint's and its own)", got)
			}
			if open := b.OpenUploads(); open != 0 {
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
	b := streamBlob()
	o := New(1, 0)
	o.SetPartSizes(10, 1)
	o.Bind(ctx, b, func(int) string { return "out" })
	o.AllowSegments(func(seq, r int) string { return fmt.Sprintf("seg-%d/%d", seq, r) })
	fmt.Fprintf(o, "more than a part's worth\n")
	if err := o.EnterSegments(nil); !errors.Is(err, domain.ErrCheckpoint) {
		t.Fatalf("entering segments after streaming: %v, want a refused checkpoint", err)
	}
}

// failPutBlob is a blob whose PutIfAbsent of one key fails once (a
// transient S3 error).
type failPutBlob struct {
	*testdouble.Blob
	mu     sync.Mutex
	failAt string
	failed bool
}

var _ Blob = (*failPutBlob)(nil)

func (b *failPutBlob) PutIfAbsent(ctx context.Context, key string, body []byte) error {
	b.mu.Lock()
	fail := key == b.failAt && !b.failed
	if fail {
		b.failed = true
	}
	b.mu.Unlock()
	if fail {
		return errors.New("injected: S3 503 SlowDown")
	}
	return b.Blob.PutIfAbsent(ctx, key, body)
}

// A seal that fails part way (partition 0's segment sealed, partition
// 1's put failed) must not let the attempt publish wrong bytes. The
// failed seal's seq is used again by the next seal: partition 0's new
// bytes would go to the key its sealed segment already holds, where the
// write-once put finds the old segment and the new bytes are lost while
// the old segment is listed twice. Whatever the function does after the
// failed checkpoint (it may ignore the error and go on), either the
// outputs are refused (the attempt fails, and its retry resumes from the
// last checkpoint that was recorded) or they are exactly what was
// written.
func TestPartlyFailedSealNeverPublishesWrongBytes(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name     string
		partSize int // 10: partition 0 streams; 1 MiB: nothing does
	}{{"buffered", 1 << 20}, {"streamed", 10}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			b := &failPutBlob{Blob: streamBlob(), failAt: "a1/seg-1/1"}
			o := New(2, 0)
			o.SetPartSizes(tc.partSize, 1)
			o.Bind(ctx, b, func(r int) string { return fmt.Sprintf("a1/part-%d", r) })
			o.AllowSegments(func(seq, r int) string { return fmt.Sprintf("a1/seg-%d/%d", seq, r) })
			if err := o.EnterSegments(nil); err != nil {
				t.Fatal(err)
			}
			want := [][]byte{nil, nil}
			write := func(r int, s string) {
				// A refused write is allowed (the outputs are poisoned);
				// what was accepted must be published as written.
				if _, err := o.Part(r).Write([]byte(s)); err == nil {
					want[r] = append(want[r], s...)
				}
			}
			write(0, "before the failed checkpoint, partition 0\n")
			write(1, "p1 early\n") // buffered: put at the seal, which fails
			if _, _, err := o.Seal(ctx, b); err == nil {
				t.Fatal("the seal succeeded: the injected failure did not happen")
			}
			// The function ignores the failed checkpoint and goes on.
			write(0, "after the failed checkpoint, partition 0\n")
			write(1, "p1 late\n")
			if err := o.Refused(); err != nil {
				return // the attempt fails: nothing is published
			}
			if err := o.Publish(ctx, b); err != nil {
				return // not published: the attempt does not commit
			}
			for r := range 2 {
				got := object(b.Blob, fmt.Sprintf("a1/part-%d", r))
				if !bytes.Equal(got, want[r]) {
					t.Fatalf("partition %d published %q, want what was written: %q", r, got, want[r])
				}
			}
		})
	}
}
