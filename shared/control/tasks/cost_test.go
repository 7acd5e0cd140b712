package tasks

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/batchwork/batchwork/shared/control/kernel"
	"github.com/batchwork/batchwork/shared/cost"
	"github.com/batchwork/batchwork/shared/cost/meter"
	"github.com/batchwork/batchwork/shared/domain"
	"github.com/batchwork/batchwork/shared/dynamo"
)

func commitOf(job string, partition int) dynamo.CommitParams {
	return dynamo.CommitParams{HolderParams: dynamo.HolderParams{Ref: domain.TaskRef{Job: job, Partition: partition}}, Shards: 1}
}

// A batch of counts carries each job's pending counts once, on the job's
// first count, and the batch's own write is its job's when it holds one.
func TestAttachCost(t *testing.T) {
	for _, tc := range []struct {
		name    string
		batch   []dynamo.CommitParams
		carried map[int]float64 // index in the batch -> S3 requests carried
		ctxJob  string
	}{
		{"one job", []dynamo.CommitParams{commitOf("j1", 0), commitOf("j1", 1)}, map[int]float64{0: 2}, "j1"},
		{"two jobs", []dynamo.CommitParams{commitOf("j1", 0), commitOf("j2", 0), commitOf("j1", 1)}, map[int]float64{0: 2, 1: 5}, ""},
		{"a job with nothing pending", []dynamo.CommitParams{commitOf("j3", 0)}, map[int]float64{}, "j3"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := meter.New(nil)
			m.Put("j1", cost.Counts{S3Tier1: 2})
			m.Put("j2", cost.Counts{S3Tier1: 5})
			s := newStubLifecycle(Config{Meter: m}, stubStore{})
			ctx := s.attachCost(context.Background(), tc.batch)
			for i, p := range tc.batch {
				if got := p.Cost.S3Tier1; got != tc.carried[i] {
					t.Errorf("count %d carries %v S3 requests, want %v", i, got, tc.carried[i])
				}
				if left := m.Pending(p.Ref.Job); !left.IsZero() {
					t.Errorf("job %s still has %+v pending", p.Ref.Job, left)
				}
			}
			if got := meter.JobOf(ctx); got != tc.ctxJob {
				t.Errorf("the batch's write is job %q's, want %q", got, tc.ctxJob)
			}
		})
	}
}

// A commit's counts go back to the meter when the commit was refused (it
// wrote nothing), and are dropped after any other error (it may have).
func TestGiveBackOnlyWhatWasNotWritten(t *testing.T) {
	for _, tc := range []struct {
		err  error
		back bool
	}{
		{fmt.Errorf("commit: %w", domain.ErrStaleClaim), true},
		{fmt.Errorf("commit: %w", domain.ErrAlreadyDone), true},
		{errors.New("connection reset"), false},
	} {
		m := meter.New(nil)
		m.Put("j1", cost.Counts{DynamoRequests: 4})
		s := newStubLifecycle(Config{Meter: m}, stubStore{})
		p := commitOf("j1", 0)
		s.takeCost(&p)
		if p.Cost.DynamoRequests != 4 {
			t.Fatalf("the commit took %+v", p.Cost)
		}
		s.giveBack(p, tc.err)
		if got := m.Pending("j1").DynamoRequests; (got == 4) != tc.back {
			t.Errorf("after %v: %v pending, given back %v", tc.err, got, tc.back)
		}
	}
}

// An attempt's run time is its job's compute, by its executor size.
func TestSpendAttempt(t *testing.T) {
	m := meter.New(nil)
	s := newStubLifecycle(Config{Meter: m}, stubStore{})
	now := time.Unix(1000, 0)
	sp := parseSpec(t, `{"name":"x","stages":[{"name":"s","task":"t","partitions":{"count":1},"resources":{"memory":"2GiB"}}]}`)
	c := kernel.Claim{Task: domain.Task{Ref: domain.TaskRef{Job: "j1"}, Claimed: now.Add(-3 * time.Second)}, Spec: sp}
	s.spendAttempt(c, now)
	if got := m.Pending("j1"); got.ComputeSeconds != 3 || got.GBSeconds != 6 {
		t.Fatalf("spent %+v, want 3 s and 6 GB-s", got)
	}
}
