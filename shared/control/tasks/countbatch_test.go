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

// A batch flushes before its linger or its delete round only when it is
// far larger than a round's counts (a few dozen to a few hundred at a
// process's rates): a round's counts fall on two or three counter shards
// whatever their number, so a flush at every 64 counts wrote those shards
// twice a round instead of once.
func TestCountBatchWaitsForItsRound(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		pending int
		want    bool
	}{
		{1, false},
		{64, false},  // a round's counts at about 200 tasks a second
		{300, false}, // a round's at 1,000 a second
		{countBatchMax - 1, false},
		{countBatchMax, true},
		{countBatchMax + 1, false}, // flushed at countBatchMax already
	} {
		if got := flushFull(tc.pending); got != tc.want {
			t.Errorf("flushFull(%d) = %v, want %v", tc.pending, got, tc.want)
		}
	}
}

// countingStore counts the batched count writes it is handed, by the
// counter shards they touch.
type countingStore struct {
	Store
	writes chan int
}

func (c countingStore) ShardCountCommits(_ context.Context, ps []dynamo.CommitParams) ([]dynamo.ShardRef, error) {
	c.writes <- len(ps)
	return nil, nil
}

// A batch that reaches countBatchMax is written at once, without waiting
// for its linger.
func TestCountBatchFlushesWhenFull(t *testing.T) {
	t.Parallel()
	store := countingStore{writes: make(chan int, 1)}
	s := newStubLifecycle(Config{CountLinger: time.Hour}, store)
	for i := range countBatchMax {
		s.counts.add(dynamo.CommitParams{HolderParams: dynamo.HolderParams{Ref: domain.TaskRef{Job: "j1", Partition: i}}, Shards: 1})
	}
	if n := <-store.writes; n != countBatchMax {
		t.Fatalf("the full batch's write counted %d tasks, want %d", n, countBatchMax)
	}
}
