package feed

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"testing"
	"time"

	"github.com/batchwork/batchwork/internal/testdouble"
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
			q := testdouble.NewQueue()
			flushes := 0
			d := newDeleter(q, discard(), func() bool { flushes++; return tc.countsOK }, time.Hour)
			for i := range tc.n {
				d.add("q", string(rune('a'+i)))
			}
			d.close()
			deleted := q.Deleted()
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

func discard() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// The messages of a round go after one flush of the counts, however many
// batches of ten they fill: a flush per ten deletes would cost a count
// write per ten tasks.
func TestDeleterFlushesCountsOncePerRound(t *testing.T) {
	t.Parallel()
	q := &deleteCountingQueue{Queue: testdouble.NewQueue()}
	flushes := 0
	d := newDeleter(q, discard(), func() bool { flushes++; return true }, time.Hour)
	for i := range 25 {
		d.add("q", string(rune('a'+i)))
	}
	d.close()
	if len(q.Deleted()) != 25 {
		t.Fatalf("deleted %d messages, want 25", len(q.Deleted()))
	}
	if flushes != 1 || q.batches != 3 {
		t.Fatalf("%d count flushes and %d delete requests for 25 messages; want 1 and 3", flushes, q.batches)
	}
}

// deleteCountingQueue counts delete requests of up to ten, as SQS takes
// them.
type deleteCountingQueue struct {
	*testdouble.Queue
	batches int
}

func (q *deleteCountingQueue) DeleteBatch(ctx context.Context, url string, receipts []string) error {
	q.batches += (len(receipts) + 9) / 10
	return q.Queue.DeleteBatch(ctx, url, receipts)
}

// A round's last part batch waits one round to fill its ten, and no
// longer: at a few dozen tasks a round, part batches would otherwise be
// a fifth of the delete requests.
func TestDeleteRoundsCarryAPartBatchOneRound(t *testing.T) {
	t.Parallel()
	q := &deleteCountingQueue{Queue: testdouble.NewQueue()}
	flushes := 0
	d := &deleter{q: q, log: discard(), before: func() bool { flushes++; return true }}
	r := &deleteRounds{d: d, pending: map[string][]string{}, carried: map[string][]string{}}
	add := func(n int) {
		for range n {
			r.pending["q"] = append(r.pending["q"], fmt.Sprint(len(q.Deleted())+len(r.pending["q"])+len(r.carried["q"])))
		}
	}
	for _, step := range []struct {
		add          int
		wantDeleted  int // in all, after the round
		wantRequests int
	}{
		{15, 10, 1}, // five carried
		{7, 20, 2},  // twelve: ten go, the two left are new
		{3, 25, 3},  // five, two of them carried: all go
		{0, 25, 3},
	} {
		add(step.add)
		r.round(false)
		if got := len(q.Deleted()); got != step.wantDeleted || q.batches != step.wantRequests {
			t.Fatalf("after adding %d: %d deleted in %d requests; want %d in %d", step.add, got, q.batches, step.wantDeleted, step.wantRequests)
		}
	}
	add(4)
	r.round(true)
	if len(q.Deleted()) != 29 || q.batches != 4 {
		t.Fatalf("final round: %d deleted in %d requests; want 29 in 4", len(q.Deleted()), q.batches)
	}
}
