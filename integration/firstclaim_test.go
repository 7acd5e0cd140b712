package integration

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/batchwork/batchwork/internal/faults"
	"github.com/batchwork/batchwork/shared/batchwork"
	"github.com/batchwork/batchwork/shared/domain"
	"github.com/batchwork/batchwork/shared/dynamo"
	sm "github.com/batchwork/batchwork/statemachine"
)

// noPartiQLDB is an endpoint that cannot run PartiQL: its batches fail
// whole, so its store's claims are UpdateItems.
type noPartiQLDB struct{ dynamo.API }

func (noPartiQLDB) BatchExecuteStatement(context.Context, *dynamodb.BatchExecuteStatementInput, ...func(*dynamodb.Options)) (*dynamodb.BatchExecuteStatementOutput, error) {
	return nil, errors.New("unsupported operation")
}

// The first claim of an unwritten task, written as a batched INSERT
// (dynamo/firstclaim.go), makes the record that the claim's UpdateItem
// makes of a missing item, attribute for attribute, for every kind of
// claim: so a record does not depend on which write made it.
func TestFirstClaimInsertEqualsUpdate(t *testing.T) {
	t.Parallel()
	const job = "jfirstclaimeq001"
	ctx := context.Background()
	e, counted, batched, updates, now := batchedAndUpdates(t, job)
	cases := []struct {
		name string
		p    dynamo.ClaimParams
	}{
		{"bare", dynamo.ClaimParams{Lease: time.Minute, Grace: time.Minute, MaxAttempts: 3}},
		{"an executor", dynamo.ClaimParams{Lease: 30 * time.Second, Grace: time.Minute, MaxAttempts: 1, Executor: "ex-1"}},
		{"a slot stamp", dynamo.ClaimParams{Lease: time.Minute, Grace: 2 * time.Minute, MaxAttempts: 5, SlotAt: now.Add(-time.Second)}},
		{"a trace span", dynamo.ClaimParams{Lease: time.Minute, Grace: time.Minute, MaxAttempts: 3, Executor: "ex-2", TraceSpan: "00f067aa0ba902b7"}},
	}
	for i, tc := range cases {
		var recs [2]map[string]any
		for w, s := range []*dynamo.Store{batched, updates} {
			p := tc.p
			p.Ref = domain.TaskRef{Job: job, Partition: 2*i + w}
			p.Token, p.Now = fmt.Sprintf("tok%d", w), now
			before := counted.count("BatchExecuteStatement")
			got, err := s.TaskClaim(ctx, p)
			if err != nil {
				t.Fatalf("%s: claim %d: %v", tc.name, w, err)
			}
			if inserted := counted.count("BatchExecuteStatement") - before; inserted != 1-w {
				t.Fatalf("%s: claim %d made %d batches, want %d", tc.name, w, inserted, 1-w)
			}
			read, err := s.TaskGet(ctx, p.Ref)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, read) {
				t.Errorf("%s: claim %d answered %+v, its record reads %+v", tc.name, w, got, read)
			}
			recs[w] = rawTask(t, e, p.Ref)
		}
		for _, r := range recs {
			delete(r, "sk")
			delete(r, "tok")
		}
		if !reflect.DeepEqual(recs[0], recs[1]) {
			t.Errorf("%s: the insert wrote %v, the update %v", tc.name, recs[0], recs[1])
		}
	}
}

// Concurrent first claims in one process go in batches, and a batch that
// holds one task twice is no different from two claims racing: exactly
// one claim of each task wins.
func TestFirstClaimsGoInBatches(t *testing.T) {
	t.Parallel()
	e := newEnv(t, batchwork.NewRegistry(), envOptions{noRun: true})
	ctx := context.Background()
	counted := newCountingDB(e)
	store := dynamo.New(counted, e.r.Resources.Table)
	const job, tasks, claimsEach = "jfirstclaimbat01", 40, 2
	now := time.Now()
	if err := store.TaskPutMany(ctx, readyTasks(job, tasks), now.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	won := map[int]int{}
	for c := range tasks * claimsEach {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p := c % tasks
			_, err := store.TaskClaim(ctx, dynamo.ClaimParams{Ref: domain.TaskRef{Job: job, Partition: p}, Token: fmt.Sprintf("c%d", c),
				Now: now, Lease: time.Minute, Grace: time.Minute, MaxAttempts: 3})
			var held *domain.ClaimHeldError
			switch {
			case err == nil:
				mu.Lock()
				won[p]++
				mu.Unlock()
			case !errors.As(err, &held):
				t.Errorf("claim %d of task %d: %v, want a win or ClaimHeldError", c, p, err)
			}
		}()
	}
	wg.Wait()
	for p := range tasks {
		if won[p] != 1 {
			t.Errorf("task %d: %d claims won, want 1", p, won[p])
		}
	}
	if batches := counted.count("BatchExecuteStatement"); batches >= tasks*claimsEach {
		t.Errorf("%d batches for %d claims: none held more than one", batches, tasks*claimsEach)
	}
}

// rawTask reads a task's record as plain values.
func rawTask(t *testing.T, e *env, ref domain.TaskRef) map[string]any {
	t.Helper()
	out, err := dynamodb.NewFromConfig(e.cfg).GetItem(context.Background(), &dynamodb.GetItemInput{
		TableName: &e.r.Resources.Table, ConsistentRead: aws.Bool(true), Key: map[string]types.AttributeValue{
			"pk": &types.AttributeValueMemberS{Value: fmt.Sprintf("TASK#%s#%d#%d", ref.Job, ref.Stage, ref.Partition/dynamo.TaskBucket)},
			"sk": &types.AttributeValueMemberS{Value: fmt.Sprintf("%06d", ref.Partition)},
		},
	})
	if err != nil || out.Item == nil {
		t.Fatalf("read task %s: %v (found %v)", ref, err, out != nil && out.Item != nil)
	}
	m := map[string]any{}
	for k, v := range out.Item {
		switch v := v.(type) {
		case *types.AttributeValueMemberS:
			m[k] = "S " + v.Value
		case *types.AttributeValueMemberN:
			m[k] = "N " + v.Value
		case *types.AttributeValueMemberB:
			m[k] = fmt.Sprintf("B %x", v.Value)
		default:
			m[k] = fmt.Sprintf("%T %v", v, v)
		}
	}
	return m
}

// A commit written as a batched PartiQL UPDATE (dynamo/commitbatch.go)
// has the outcome and leaves the record that its UpdateItem does, for a
// commit of the current attempt and for each that must be refused: a
// stale token, another attempt, a task never claimed; and a retry of a
// commit that applied recognises its own success either way.
func TestBatchedCommitEqualsUpdate(t *testing.T) {
	t.Parallel()
	const job = "jbatchcommiteq01"
	ctx := context.Background()
	e, counted, batched, updates, now := batchedAndUpdates(t, job)
	cases := []struct {
		name          string
		claim         bool
		token         string
		attempt       int
		commitTwice   bool
		stale, gone   bool // the outcome: ErrStaleClaim, ErrNotFound
		refused       bool // refused otherwise
		wantBatchOnly bool // the batch's answer was the outcome (no UpdateItem after it)
	}{
		{name: "the current attempt", claim: true, token: "tok", attempt: 1, wantBatchOnly: true},
		{name: "a stale token", claim: true, token: "old", attempt: 1, stale: true},
		{name: "another attempt", claim: true, token: "tok", attempt: 2, refused: true},
		{name: "a task never claimed", token: "tok", attempt: 1, gone: true},
		{name: "a retry of an applied commit", claim: true, token: "tok", attempt: 1, commitTwice: true},
	}
	for i, tc := range cases {
		var recs [2]map[string]any
		for w, s := range []*dynamo.Store{batched, updates} {
			ref := domain.TaskRef{Job: job, Partition: 2*i + w}
			if tc.claim {
				if _, err := batched.TaskClaim(ctx, dynamo.ClaimParams{Ref: ref, Token: "tok", Now: now, Lease: time.Minute, Grace: time.Minute, MaxAttempts: 3}); err != nil {
					t.Fatal(err)
				}
			}
			p := dynamo.CommitParams{HolderParams: dynamo.HolderParams{Ref: ref, Token: tc.token, Now: now}, Attempt: tc.attempt, Outputs: 2, RecordsIn: 7, RecordsOut: 5, Shards: 1, DeferCount: true}
			if tc.commitTwice {
				if _, err := s.TaskCommit(ctx, p); err != nil {
					t.Fatalf("%s: first commit %d: %v", tc.name, w, err)
				}
			}
			batches, updates, reads := counted.count("BatchExecuteStatement"), counted.count("UpdateItem"), counted.count("GetItem")
			_, err := s.TaskCommit(ctx, p)
			switch {
			case tc.stale && !errors.Is(err, domain.ErrStaleClaim),
				tc.gone && !errors.Is(err, domain.ErrNotFound),
				tc.refused && (err == nil || errors.Is(err, domain.ErrStaleClaim) || errors.Is(err, domain.ErrNotFound)),
				!tc.stale && !tc.gone && !tc.refused && err != nil:
				t.Errorf("%s: commit %d: %v", tc.name, w, err)
			}
			if w == 0 {
				if n := counted.count("BatchExecuteStatement") - batches; n != 1 {
					t.Errorf("%s: the batched commit made %d batches, want 1", tc.name, n)
				}
				// The statement decided a commit that applies; a refused
				// one goes on to the UpdateItem and its explanation.
				after := counted.count("UpdateItem") - updates + counted.count("GetItem") - reads
				if (after == 0) != tc.wantBatchOnly {
					t.Errorf("%s: %d requests after the batch, want them only for a refusal", tc.name, after)
				}
			}
			if tc.claim {
				recs[w] = rawTask(t, e, ref)
			}
		}
		if tc.claim {
			delete(recs[0], "sk")
			delete(recs[1], "sk")
			if !reflect.DeepEqual(recs[0], recs[1]) {
				t.Errorf("%s: the batched commit left %v, the update %v", tc.name, recs[0], recs[1])
			}
		}
	}
}

// A batched commit whose answer is lost is retried by the SDK, whose
// statement the applied commit then refuses; the commit's UpdateItem is
// refused too, and the read that explains it finds the commit its own.
func TestBatchedCommitWithALostAnswerIsItsOwn(t *testing.T) {
	t.Parallel()
	e := newEnv(t, batchwork.NewRegistry(), envOptions{noRun: true})
	ctx := context.Background()
	clean, store, inj := hookedStores(e)
	const job = "jbatchcommitlost"
	now := time.Now()
	if err := clean.TaskPutMany(ctx, readyTasks(job, 2), now.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	ref := domain.TaskRef{Job: job, Partition: 1}
	if _, err := clean.TaskClaim(ctx, dynamo.ClaimParams{Ref: ref, Token: "mine", Now: now, Lease: time.Minute, Grace: time.Minute, MaxAttempts: 3}); err != nil {
		t.Fatal(err)
	}
	inj.Add(faults.Rule{Service: "DynamoDB", Operation: "BatchExecuteStatement", Kind: faults.Lost, Count: 1})
	p := dynamo.CommitParams{HolderParams: dynamo.HolderParams{Ref: ref, Token: "mine", Now: now}, Attempt: 1, Shards: 1, DeferCount: true}
	if _, err := store.TaskCommit(ctx, p); err != nil {
		t.Fatalf("commit with a lost answer: %v, want its own success", err)
	}
	if n := inj.Total(); n != 1 {
		t.Fatalf("%d faults fired, want the lost answer", n)
	}
	got, err := clean.TaskGet(ctx, ref)
	if err != nil || got.State != sm.TaskSucceeded || got.CommittedAttempt != 1 || got.Token != "mine" {
		t.Fatalf("task after the commit: %+v, %v; want SUCCEEDED by attempt 1 with its token", got, err)
	}
}

// batchedAndUpdates is, on a new env, a store that batches its writes
// through a counting client, beside one that writes each by UpdateItem
// (no PartiQL), over job's 20 tasks, put due an hour after now.
func batchedAndUpdates(t *testing.T, job string) (e *env, counted *countingDB, batched, updates *dynamo.Store, now time.Time) {
	t.Helper()
	e = newEnv(t, batchwork.NewRegistry(), envOptions{noRun: true})
	counted = newCountingDB(e)
	batched = dynamo.New(counted, e.r.Resources.Table)
	updates = dynamo.New(noPartiQLDB{dynamodb.NewFromConfig(e.cfg)}, e.r.Resources.Table)
	now = time.Now().Truncate(time.Millisecond)
	if err := batched.TaskPutMany(context.Background(), readyTasks(job, 20), now.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	return e, counted, batched, updates, now
}
