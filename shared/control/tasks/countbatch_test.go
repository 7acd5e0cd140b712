package tasks

import (
	"context"
	"testing"
	"time"

	"github.com/batchwork/batchwork/shared/domain"
	"github.com/batchwork/batchwork/shared/dynamo"
)

// A count write that fails in a batch the linger's timer flushed is
// reported by the next FlushCounts, even when nothing is pending then:
// its caller is about to delete the messages of those tasks, which must
// stay (their claims count the tasks when they come back). Reported once.
func TestFlushCountsReportsATimersFailedWrite(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	// The stub store refuses every batched count.
	s := newStubLifecycle(Config{CountLinger: time.Hour}, stubStore{})
	s.counts.add(dynamo.CommitParams{HolderParams: dynamo.HolderParams{Ref: domain.TaskRef{Job: "j1", Partition: 3}}, Shards: 1})
	s.counts.flushBackground() // the timer's flush, as if it fired now
	if err := s.FlushCounts(ctx); err == nil {
		t.Fatal("FlushCounts after the timer's failed write: nil, want its error")
	}
	if err := s.FlushCounts(ctx); err != nil {
		t.Fatalf("FlushCounts again: %v, want nil (reported once)", err)
	}
}
