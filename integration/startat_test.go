package integration

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/batchwork/batchwork/internal/faults"
	"github.com/batchwork/batchwork/shared/api"
	"github.com/batchwork/batchwork/shared/batchwork"
	"github.com/batchwork/batchwork/shared/control"
	"github.com/batchwork/batchwork/shared/dynamo"
	"github.com/batchwork/batchwork/shared/schedule"
	sm "github.com/batchwork/batchwork/statemachine"
)

// Jobs submitted with a start time (`batchwork submit --at`): they wait
// WAITING and are started by the schedules' timer mechanism. These tests
// use the real clock, as SQS's delays are real.

const atSpec = `{"name":"at","stages":[{"name":"s","task":"t","partitions":{"count":1}}]}`

// submitAt submits atSpec for owner to start at `at`.
func submitAt(t *testing.T, svc *control.Service, owner, key string, at time.Time) control.SubmitResult {
	t.Helper()
	res, err := svc.Submit(context.Background(), control.SubmitRequest{Owner: owner, IdempotencyKey: key, Spec: []byte(atSpec), At: at})
	if err != nil {
		t.Fatalf("submit at %s: %v", at, err)
	}
	if !res.Created || res.StartAt == nil || !res.StartAt.Equal(at) {
		t.Fatalf("submit at %s: %+v, want a job created to start then", at, res)
	}
	return res
}

// waitState polls the job's state on the emulator until it is want.
func waitState(t *testing.T, e *env, id string, want sm.JobState, within time.Duration) {
	t.Helper()
	for deadline := time.Now().Add(within); ; {
		st, err := e.r.Store.JobState(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		if st == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("job %s is %s after %s, want %s", id, st, within, want)
		}
		time.Sleep(20 * time.Millisecond) // polling the emulator
	}
}

// A job submitted to start 4 s ahead waits WAITING (listed, its start time
// shown, no stage started) and is started through the timer queue, which
// its submission handed the start to, within a second of its time, from
// the start the job records; the sweep after it starts nothing again.
func TestStartAtOnTime(t *testing.T) {
	e := newEnv(t, batchwork.NewRegistry(), envOptions{noRun: true})
	svc := e.r.Service
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// 4 s: a submission on a loaded machine can take a second or two, and
	// the start must still be ahead when it returns.
	at := time.Now().UTC().Add(4 * time.Second).Truncate(time.Millisecond)
	res := submitAt(t, svc, "alice", "at-1", at)

	st, err := svc.Status(ctx, "alice", res.JobID)
	if err != nil {
		t.Fatal(err)
	}
	if st.State != string(sm.JobWaiting) || st.StartAt == nil || !st.StartAt.Equal(at) || st.Stages[0].State != string(sm.StageBlocked) {
		t.Fatalf("status before the start: %s, startAt %v, stage %s; want WAITING, %s, BLOCKED", st.State, st.StartAt, st.Stages[0].State, at)
	}
	l, err := svc.ListJobs(ctx, control.ListJobsRequest{Owner: "alice", Limit: 10, State: string(sm.JobWaiting)})
	if err != nil || len(l.Jobs) != 1 || l.Jobs[0].ID != res.JobID {
		t.Fatalf("WAITING jobs: %+v, %v; want the job", l.Jobs, err)
	}
	if n := messagesIn(t, e, e.r.Resources.Queues.Timer); n != 1 {
		t.Fatalf("timer queue holds %d messages, want the start the submission handed off", n)
	}

	go e.r.RunTimers(ctx)
	waitState(t, e, res.JobID, sm.JobRunning, 10*time.Second)
	j, err := e.r.Store.JobGet(ctx, res.JobID)
	if err != nil {
		t.Fatal(err)
	}
	late := j.Started.Sub(at)
	t.Logf("start at %s, started %s: %v late", at.Format(time.RFC3339Nano), j.Started.Format(time.RFC3339Nano), late)
	if late < 0 || late > time.Second {
		t.Fatalf("job started %v after its time, want within [0, 1s]", late)
	}
	for deadline := time.Now().Add(10 * time.Second); ; {
		stage, err := e.r.Store.StageGet(ctx, res.JobID, 0)
		if err != nil {
			t.Fatal(err)
		}
		if stage.State == sm.StageRunning && stage.Enqueued == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("root stage %s with %d tasks queued, want RUNNING with 1", stage.State, stage.Enqueued)
		}
		time.Sleep(20 * time.Millisecond) // polling the emulator
	}
	if c, err := svc.FireDue(ctx, time.Now()); err != nil || c.Examined != 0 {
		t.Fatalf("fire due after the start: %+v, %v; want its entry gone", c, err)
	}
}

// entriesHeld is the real store, holding the sweep's firing step once it
// has read a non-empty index bucket until the test releases it: the
// sweep then works on an entry another starter has handled since.
type entriesHeld struct {
	*dynamo.Store
	read, release chan struct{}
}

func (s entriesHeld) ScheduleDueEntries(ctx context.Context, b schedule.Bucket, limit int) ([]dynamo.IndexEntry, error) {
	es, err := s.Store.ScheduleDueEntries(ctx, b, limit)
	if len(es) > 0 {
		s.read <- struct{}{}
		<-s.release
	}
	return es, err
}

// A start is done once whoever reaches it: the sweep's firing step reads
// the start entry, the timer message starts the job with the response of
// its start transaction lost (the write applied; the SDK's retry finds it
// done), then the sweep goes on with the entry it read and a second copy
// of the timer message arrives. The job is RUNNING, its one task queued
// once, its start entry gone.
func TestStartAtOnce(t *testing.T) {
	inj := faults.New(1)
	e := newEnv(t, batchwork.NewRegistry(), envOptions{noRun: true, faults: inj})
	svc := e.r.Service
	ctx := context.Background()
	at := time.Now().UTC().Add(1500 * time.Millisecond).Truncate(time.Millisecond)
	res := submitAt(t, svc, "bob", "at-once", at)
	msgs, err := e.r.Queue.Receive(ctx, e.r.Resources.Queues.Timer, 10, 5*time.Second, time.Minute)
	if err != nil || len(msgs) != 1 {
		t.Fatalf("timer messages %d, %v; want the start", len(msgs), err)
	}

	held := entriesHeld{Store: e.r.Store, read: make(chan struct{}, 1), release: make(chan struct{})}
	sweeper := newService(e, testTimings, held, e.r.Queue, newTestClock(), newLogCounter().logger())
	type fired struct {
		c   control.FireCounts
		err error
	}
	swept := make(chan fired, 1)
	go func() {
		c, err := sweeper.FireDue(ctx, at.Add(time.Second))
		swept <- fired{c, err}
	}()
	<-held.read // the sweep has the entry

	inj.Once(faults.Rule{Service: "DynamoDB", Operation: "TransactWriteItems", Kind: faults.Lost, Match: func(_ string, in any) bool {
		u, ok := in.(*dynamodb.TransactWriteItemsInput)
		if !ok || len(u.TransactItems) == 0 || u.TransactItems[0].Update == nil {
			return false
		}
		up := u.TransactItems[0].Update
		sk, _ := up.Key["sk"].(*types.AttributeValueMemberS)
		return sk != nil && sk.Value == "JOB" && up.UpdateExpression != nil && strings.Contains(*up.UpdateExpression, "sta = :now")
	}})
	o, err := svc.FireTimer(ctx, msgs[0].Body)
	if err != nil || (o != control.TimerFired && o != control.TimerAlreadyFired) {
		t.Fatalf("timer message: %s, %v; want the job started", o, err)
	}
	if inj.Total() != 1 {
		t.Fatalf("%d faults injected, want the start's lost response", inj.Total())
	}
	close(held.release)
	sw := <-swept
	if sw.err != nil || sw.c.Started != 0 || sw.c.Examined != 1 {
		t.Fatalf("the sweep with the entry it read: %+v, %v; want it examined, nothing started", sw.c, sw.err)
	}
	if o, err := svc.FireTimer(ctx, msgs[0].Body); err != nil || o != control.TimerAlreadyFired {
		t.Fatalf("the duplicate timer message: %s, %v; want already fired", o, err)
	}

	waitState(t, e, res.JobID, sm.JobRunning, 0)
	stage, err := e.r.Store.StageGet(ctx, res.JobID, 0)
	if err != nil {
		t.Fatal(err)
	}
	if stage.State != sm.StageRunning || stage.Enqueued != 1 || stage.Total != 1 {
		t.Fatalf("root stage %s, %d of %d tasks queued; want RUNNING, 1 of 1", stage.State, stage.Enqueued, stage.Total)
	}
	if n := messagesIn(t, e, e.r.Resources.Queues.Normal); n != 1 {
		t.Fatalf("ready queue holds %d messages, want the one task's", n)
	}
	if c, err := svc.FireDue(ctx, time.Now()); err != nil || c.Examined != 0 {
		t.Fatalf("fire due after the start: %+v, %v; want its entry gone", c, err)
	}
}

// A job cancelled while it waits is CANCELLED for good: its timer message
// is dropped, the sweep drops its start entry, no stage starts.
func TestStartAtCancelledBeforeStart(t *testing.T) {
	e := newEnv(t, batchwork.NewRegistry(), envOptions{noRun: true})
	svc := e.r.Service
	ctx := context.Background()
	at := time.Now().UTC().Add(2 * time.Second).Truncate(time.Millisecond)
	res := submitAt(t, svc, "carol", "at-cancel", at)
	st, err := svc.Cancel(ctx, "carol", res.JobID)
	if err != nil || st.State != string(sm.JobCancelled) {
		t.Fatalf("cancel a WAITING job: %s, %v; want CANCELLED", st.State, err)
	}
	msgs, err := e.r.Queue.Receive(ctx, e.r.Resources.Queues.Timer, 10, 5*time.Second, time.Minute)
	if err != nil || len(msgs) != 1 {
		t.Fatalf("timer messages %d, %v; want the start", len(msgs), err)
	}
	if o, err := svc.FireTimer(ctx, msgs[0].Body); err != nil || o != control.TimerDropped {
		t.Fatalf("timer of a cancelled job: %s, %v; want dropped", o, err)
	}
	// The sweep's firing step at the start time (passed as its now).
	c, err := svc.FireDue(ctx, at.Add(time.Second))
	if err != nil || c.Dropped != 1 || c.Started != 0 {
		t.Fatalf("fire due: %+v, %v; want the start entry dropped", c, err)
	}
	if c, err := svc.FireDue(ctx, at.Add(2*time.Second)); err != nil || c.Examined != 0 {
		t.Fatalf("fire due again: %+v, %v; want no entry", c, err)
	}
	if s, err := e.r.Store.JobState(ctx, res.JobID); err != nil || s != sm.JobCancelled {
		t.Fatalf("job %s, %v; want CANCELLED", s, err)
	}
	stage, err := e.r.Store.StageGet(ctx, res.JobID, 0)
	if err != nil || stage.State != sm.StageCancelled || stage.Enqueued != 0 {
		t.Fatalf("stage %s with %d tasks, %v; want CANCELLED, none", stage.State, stage.Enqueued, err)
	}
}

// A bad `at` is a 400 naming it, and nothing is written.
func TestStartAtRefused(t *testing.T) {
	e := newEnv(t, batchwork.NewRegistry(), envOptions{noRun: true})
	for i, at := range []string{
		"tomorrow",
		time.Now().Add(-time.Hour).UTC().Format(time.RFC3339),
		time.Now().Add(400 * 24 * time.Hour).UTC().Format(time.RFC3339),
	} {
		var body api.Error
		e.callJSON("dave", http.MethodPost, "/jobs?at="+at, []byte(atSpec), http.StatusBadRequest, &body, "Idempotency-Key", fmt.Sprint("bad-at-", i))
		if body.Field != "at" {
			t.Fatalf("at=%s: %+v, want a 400 on at", at, body)
		}
	}
	l, err := e.r.Service.ListJobs(context.Background(), control.ListJobsRequest{Owner: "dave", Limit: 10})
	if err != nil || len(l.Jobs) != 0 {
		t.Fatalf("jobs %+v, %v; want none", l.Jobs, err)
	}
}
