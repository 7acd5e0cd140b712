package integration

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/batchwork/batchwork/shared/batchwork"
	"github.com/batchwork/batchwork/shared/blob"
	"github.com/batchwork/batchwork/shared/control"
	"github.com/batchwork/batchwork/shared/domain"
	"github.com/batchwork/batchwork/shared/dynamo"
	"github.com/batchwork/batchwork/shared/events"
	"github.com/batchwork/batchwork/shared/spec"
	"github.com/batchwork/batchwork/shared/tuning"
	sm "github.com/batchwork/batchwork/statemachine"
)

// Writes that land after a job's deletion: an attempt still running when
// its job ended (a task of a failed or cancelled job runs on until its
// runner notices) may record its end after DELETE /jobs/{id}, or the
// sweep's retention deletion, started. Nothing may then re-create a record
// of the deleted job: it would have no job item to find it by, no TTL, and
// live forever.

// An attempt end recorded once the job is marked deleting, or after every
// record of it is gone, writes nothing, whether or not the writer knows
// the stage's counter shards (a process that never read the stage plan
// does not); one recorded before the mark is deleted with the rest.
func TestAttemptEndAfterDeletionWritesNothing(t *testing.T) {
	t.Parallel()
	e := newEnv(t, batchwork.NewRegistry(), envOptions{noRun: true})
	ctx := context.Background()
	store := dynamo.New(dynamodb.NewFromConfig(e.cfg), e.r.Resources.Table)
	sp, err := spec.Parse([]byte(`{"name":"late","stages":[{"name":"s","task":"x","partitions":{"count":4}}]}`))
	if err != nil {
		t.Fatal(err)
	}
	id := control.NewJobID()
	now := time.Now()
	if _, _, err := store.JobCreate(ctx, dynamo.CreateJobParams{Job: domain.Job{ID: id, Owner: "tester", Spec: sp, SpecHash: sp.Hash(), Created: now},
		IdemKey: "late", IdemTTL: time.Hour, StageDue: now.Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	st, err := store.StageSetPlan(ctx, id, 0, 4)
	if err != nil {
		t.Fatal(err)
	}
	if err := store.ShardPut(ctx, id, 0, 4, st.Shards); err != nil {
		t.Fatal(err)
	}
	var tasks []domain.Task
	for p := range 4 {
		tasks = append(tasks, domain.Task{Ref: domain.TaskRef{Job: id, Partition: p}, State: sm.TaskReady, MaxAttempts: 3, Updated: now})
	}
	if err := store.TaskPutMany(ctx, tasks, time.Time{}); err != nil {
		t.Fatal(err)
	}
	end := func(p, shards int) (bool, error) {
		return store.AttemptRecordEnd(ctx, dynamo.AttemptEndParams{End: domain.AttemptEnd{
			Ref: domain.TaskRef{Job: id, Partition: p}, Attempt: 1, Kind: domain.AttemptFailed, At: time.Now(), Err: "late"}, Shards: shards})
	}
	// Before the deletion: recorded, and deleted with the job below.
	if ok, err := end(0, st.Shards); !ok || err != nil {
		t.Fatalf("attempt end of a live job: %v, %v", ok, err)
	}
	if err := store.JobEnd(ctx, id, sm.JobCancel, "test", "", now); err != nil {
		t.Fatal(err)
	}
	if err := store.JobMarkDeleting(ctx, id, "tester", time.Now()); err != nil {
		t.Fatal(err)
	}
	before := recordsOf(t, e, id)
	for _, c := range []struct {
		name   string
		p      int
		shards int
	}{
		{"marked, shards known", 1, st.Shards},
		{"marked, shards unknown", 2, 0},
	} {
		ok, err := end(c.p, c.shards)
		if ok {
			t.Errorf("%s: recorded an attempt end of a job being deleted (err %v)", c.name, err)
		}
		if got := recordsOf(t, e, id); len(got) != len(before) {
			t.Errorf("%s: %d records, were %d: a late attempt end wrote %v", c.name, len(got), len(before), diffKeys(got, before))
		}
	}
	// The timeline-only writer (a resume from a checkpoint, a
	// speculative copy's start or win) likewise.
	err = store.TimelineRecord(ctx, domain.AttemptEnd{Ref: domain.TaskRef{Job: id, Partition: 1}, Attempt: 2, Kind: "late", At: time.Now()})
	if !errors.Is(err, domain.ErrNotFound) {
		t.Errorf("timeline event of a job being deleted: %v, want not found", err)
	}
	if got := recordsOf(t, e, id); len(got) != len(before) {
		t.Errorf("timeline event: a late write re-created %v", diffKeys(got, before))
	}
	if _, complete, err := store.JobDeleteRecords(ctx, id, 0); err != nil || !complete {
		t.Fatalf("delete records: %v, %v", complete, err)
	}
	if _, err := store.JobDeleteItem(ctx, id); err != nil {
		t.Fatal(err)
	}
	for _, shards := range []int{st.Shards, 0} {
		if ok, err := end(3, shards); ok {
			t.Errorf("shards %d: recorded an attempt end of a deleted job (err %v)", shards, err)
		}
	}
	if left := recordsOf(t, e, id); len(left) != 0 {
		t.Errorf("records of the deleted job: %v", left)
	}
}

// diffKeys is what got has that was does not.
func diffKeys(got, was []string) []string {
	seen := map[string]bool{}
	for _, k := range was {
		seen[k] = true
	}
	var out []string
	for _, k := range got {
		if !seen[k] {
			out = append(out, k)
		}
	}
	return out
}

// deletingStore deletes the job between a task's release and whatever
// its releaser writes next: the window of a late executor whose job its
// owner deletes as its attempt fails.
type deletingStore struct {
	control.Store
	del func()
}

func (s *deletingStore) TaskRelease(ctx context.Context, p dynamo.ReleaseParams) (domain.Task, error) {
	t, err := s.Store.TaskRelease(ctx, p)
	if err == nil {
		s.del()
	}
	return t, err
}

// A task of a failed job still runs; its owner deletes the job just as
// that task's attempt fails (after its release, before its history). The
// late attempt leaves no record of the job behind, and its task-failed
// event, written with the release, is still published (an event of a
// deleted job is published, then its outbox record deleted).
func TestLateFailAfterJobDeletion(t *testing.T) {
	t.Parallel()
	e := newEnv(t, batchwork.NewRegistry(), envOptions{noRun: true})
	ctx := context.Background()
	clk, logs := newTestClock(), newLogCounter()
	svc := newService(e, testTimings, e.r.Store, e.r.Queue, clk, logs.logger())
	id := submitTo(t, svc, "late", `{"name":"late","retry":{"maxAttempts":1},"stages":[{"name":"s","task":"x","partitions":{"count":2}}]}`)
	var claims []control.Claim
	for p := range 2 {
		c, err := svc.Claim(control.WithExecutor(ctx, control.NewExecutorID()), domain.TaskRef{Job: id, Partition: p})
		if err != nil {
			t.Fatalf("claim %d: %v", p, err)
		}
		claims = append(claims, c)
	}
	if _, err := svc.Fail(ctx, claims[0], control.FailParams{Cause: "first"}); err != nil {
		t.Fatalf("fail partition 0: %v", err)
	}
	if st := jobState(t, svc, id); st.State != string(sm.JobFailed) {
		t.Fatalf("job %s, want FAILED", st.State)
	}
	deleted := false
	lateOut := blob.OutputKey(id, "s", 1, claims[1].Task.Attempt, 0)
	ds := &deletingStore{Store: e.r.Store, del: func() {
		for i := 0; i < 10; i++ {
			d, err := e.r.Service.DeleteJob(ctx, "tester", id)
			if err != nil {
				t.Errorf("delete: %v", err)
				return
			}
			if d.Complete {
				deleted = true
				// The late attempt's output, written after the deletion's
				// data step.
				if err := e.r.Blob.PutIfAbsent(ctx, lateOut, []byte("late\n")); err != nil {
					t.Error(err)
				}
				return
			}
		}
		t.Error("deletion not complete after 10 calls")
	}}
	// A process that has not read the stage's plan: the sweep, or a
	// fresh executor host.
	late := newService(e, testTimings, ds, e.r.Queue, clk, logs.logger())
	_, err := late.Fail(ctx, claims[1], control.FailParams{Cause: "second"})
	if !deleted {
		t.Fatalf("the job was not deleted in the late release (fail: %v)", err)
	}
	if err != nil && !errors.Is(err, domain.ErrNotFound) {
		t.Errorf("late fail: %v, want success or not found", err)
	}
	if left := recordsOf(t, e, id); len(left) != 0 {
		t.Errorf("records of the deleted job after its late attempt ended: %v", left)
	}
	// Its output is tagged for the lifecycle rule to expire, as any
	// uncommitted attempt's.
	if got := objectTags(t, e, lateOut)[tuning.UncommittedTagKey]; got != tuning.UncommittedTagValue {
		t.Errorf("the late attempt's output %s: tag %s=%q, want %q", lateOut, tuning.UncommittedTagKey, got, tuning.UncommittedTagValue)
	}
	for p := range 2 {
		if _, found, err := e.r.Store.OutboxEvent(ctx, events.TaskFailedID(id, 0, p, 1)); err != nil || found {
			t.Errorf("task-failed event of partition %d: outbox record found=%v, %v; want it published and deleted", p, found, err)
		}
	}
}
