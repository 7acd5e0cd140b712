package integration

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/batchwork/batchwork/internal/faults"
	"github.com/batchwork/batchwork/shared/batchwork"
	"github.com/batchwork/batchwork/shared/control"
	"github.com/batchwork/batchwork/shared/domain"
	"github.com/batchwork/batchwork/shared/dynamo"
	sm "github.com/batchwork/batchwork/statemachine"
)

// The sweep's one read of a small index (DueScan) finds what its walk of
// every shard finds, and says the index is not small once it holds the
// limit's entries, on DynamoDB Local. A read expands ready markers and
// moves them on (ready.go), so a second read of one table would not see
// what the first did: the walk and the scan each read a table of their
// own, in the same state.
func TestDueScanFindsWhatTheWalkFinds(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	// Far enough ahead that every entry is due, the leases' too.
	at := time.Now().Add(24 * time.Hour)
	// state submits three jobs of four tasks and claims two of each: the
	// index holds their stages and ready markers, which expand into the
	// waiting tasks and the claimed ones whose lease has lapsed at at.
	state := func() (*env, map[string]int) {
		e := newEnv(t, batchwork.NewRegistry(), envOptions{controlOnly: true})
		jobs := map[string]int{}
		for i := range 3 {
			job := e.submit(fmt.Sprintf("scan-%d", i), []byte(`{"name":"scan","stages":[{"name":"s","task":"x","partitions":{"count":4}}]}`))
			jobs[job] = i
			for p := range 2 {
				mustClaim(t, e.r.Service, domain.TaskRef{Job: job, Stage: 0, Partition: p})
			}
		}
		return e, jobs
	}
	// name says what an item is, with its job as the order of submission.
	name := func(jobs map[string]int, it dynamo.DueItem) string {
		return fmt.Sprintf("%s of job %d: stage %d task %d", it.Kind, jobs[it.Job], it.Stage, it.Task.Partition)
	}
	walkEnv, walkJobs := state()
	var walked []string
	for shard := range dynamo.DueShards {
		items, err := walkEnv.r.Store.DueList(ctx, shard, at, 1000)
		if err != nil {
			t.Fatalf("shard %d: %v", shard, err)
		}
		for _, it := range items {
			walked = append(walked, name(walkJobs, it))
		}
	}
	scanEnv, scanJobs := state()
	items, whole, err := scanEnv.r.Store.DueScan(ctx, at, 1000)
	if err != nil || !whole {
		t.Fatalf("scan of a small index: whole %v, %v", whole, err)
	}
	var scanned []string
	for _, it := range items {
		scanned = append(scanned, name(scanJobs, it))
	}
	slices.Sort(walked)
	slices.Sort(scanned)
	if !slices.Equal(scanned, walked) {
		t.Fatalf("the scan found %q\nthe walk found %q", scanned, walked)
	}
	for i := range 3 {
		if n := len(slices.DeleteFunc(slices.Clone(items), func(it dynamo.DueItem) bool { return scanJobs[it.Job] != i || it.Kind != dynamo.DueTask })); n != 4 {
			t.Errorf("%d tasks of job %d due, want 4 (two waiting, two past their lease)", n, i)
		}
	}
	// An index of as many entries as the limit, or more, is walked.
	items, whole, err = scanEnv.r.Store.DueScan(ctx, at, 2)
	if err != nil || whole || items != nil {
		t.Fatalf("scan with a limit below the index: whole %v, %d items, %v; want not whole, none", whole, len(items), err)
	}
}

// A sweep run that finds the index at SweepLimit entries or more walks
// its shards: with a limit of one, a running stage's own entry makes the
// index large, and the job's task runs until the sweep has queried every
// shard, then the job ends as any other.
func TestSweepWalksALargeIndex(t *testing.T) {
	t.Parallel()
	walked := make(chan struct{})
	var mu sync.Mutex
	queries := 0
	inj := faults.New(1)
	// The injector's rule injects nothing: it counts the sweep's
	// queries of its index.
	inj.Add(faults.Rule{Service: "DynamoDB", Operation: "Query", Kind: faults.Throttle, Match: func(_ string, in any) bool {
		if q, ok := in.(*dynamodb.QueryInput); ok && aws.ToString(q.IndexName) == dynamo.DueIndex {
			mu.Lock()
			if queries++; queries == dynamo.DueShards {
				close(walked)
			}
			mu.Unlock()
		}
		return false
	}})
	reg := batchwork.NewRegistry()
	reg.Register("wait", func(ctx context.Context, _ *batchwork.Task) error {
		select {
		case <-walked:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	})
	e := newEnv(t, reg, envOptions{faults: inj, control: &control.Config{StartGrace: time.Second, CheckEvery: time.Second, StuckAfter: 5 * time.Second, SweepLimit: 1}})
	id := e.submit("walk-1", []byte(`{"name":"walk","stages":[{"name":"s","task":"wait","partitions":{"count":2}}]}`))
	if st := e.waitJob(id, time.Minute); st.State != string(sm.JobSucceeded) {
		t.Fatalf("job %s (%s), want SUCCEEDED after the sweep's walk", st.State, st.Error)
	}
}
