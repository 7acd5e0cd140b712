package executor

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/batchwork/batchwork/internal/executor/output"
)

// failPutBlob is mpBlob whose PutIfAbsent of one key fails once (a
// transient S3 error).
type failPutBlob struct {
	*mpBlob
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
	return b.mpBlob.PutIfAbsent(ctx, key, body)
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
			b := &failPutBlob{mpBlob: &mpBlob{minPart: 1}, failAt: "a1/seg-1/1"}
			o := output.New(2, 0)
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
				got := b.objs[fmt.Sprintf("a1/part-%d", r)]
				if !bytes.Equal(got, want[r]) {
					t.Fatalf("partition %d published %q, want what was written: %q", r, got, want[r])
				}
			}
		})
	}
}
