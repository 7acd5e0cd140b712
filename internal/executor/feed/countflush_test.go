package feed

import (
	"context"
	"io"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/batchwork/batchwork/shared/queue"
)

// Finished messages are deleted only once their tasks' batched counts are
// written: when the counts fail, the messages stay (they come back, and
// the refused claims they make count the tasks).
func TestDeleterKeepsMessagesWhoseCountsFailed(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name        string
		countsOK    bool
		n           int // messages handed to the deleter
		wantDeleted int
	}{
		{"counts written, a full batch", true, 10, 10},
		{"counts written, a partial batch at close", true, 3, 3},
		{"counts failed, a full batch", false, 10, 0},
		{"counts failed, a partial batch at close", false, 3, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			q := &deleteQueue{}
			flushes := 0
			d := newDeleter(q, discard(), func() bool { flushes++; return tc.countsOK })
			for i := range tc.n {
				d.add("q", string(rune('a'+i)))
			}
			d.close()
			deleted := q.state()
			if len(deleted) != tc.wantDeleted {
				t.Fatalf("deleted %v, want %d messages", deleted, tc.wantDeleted)
			}
			if flushes == 0 {
				t.Fatal("the counts were not flushed before the deletes")
			}
			if tc.countsOK && !slices.Contains(deleted, "a") {
				t.Fatalf("deleted %v, want message a among them", deleted)
			}
		})
	}
}

// deleteQueue records the receipts deleted; the deleter calls nothing else.
type deleteQueue struct {
	mu      sync.Mutex
	deleted []string
}

func (q *deleteQueue) Receive(context.Context, string, int, time.Duration, time.Duration) ([]queue.Message, error) {
	return nil, nil
}

func (q *deleteQueue) ChangeVisibility(context.Context, string, string, time.Duration) error {
	return nil
}

func (q *deleteQueue) ChangeVisibilityBatch(context.Context, string, []string, time.Duration) ([]string, error) {
	return nil, nil
}

func (q *deleteQueue) DeleteBatch(ctx context.Context, url string, receipts []string) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.deleted = append(q.deleted, receipts...)
	return nil
}

func (q *deleteQueue) state() []string {
	q.mu.Lock()
	defer q.mu.Unlock()
	return append([]string(nil), q.deleted...)
}

func discard() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }
