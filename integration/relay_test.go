package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/batchwork/batchwork/shared/batchwork"
	"github.com/batchwork/batchwork/shared/control"
	sm "github.com/batchwork/batchwork/statemachine"
)

// relayTimings materialize 10 tasks a call, and leave the sweep
// (which no test here runs) an hour's grace before it would step in.
var relayTimings = control.Config{
	StartGrace: time.Hour, CheckEvery: time.Hour, StuckAfter: time.Hour,
	ChunkTasks: 5, ChunksPerCall: 2,
}

// A stage larger than one call's chunk budget is queued in one run by
// relays on the timer queue, consumed as the sweep function's
// event source would (RunTimers), without any sweep run: every task
// exists once and has one message, and the executors finish the job.
func TestMaterializationRelaysWithoutSweep(t *testing.T) {
	t.Parallel()
	reg := batchwork.NewRegistry()
	reg.Register("noop", func(context.Context, *batchwork.Task) error { return nil })
	cfg := relayTimings
	e := newEnv(t, reg, envOptions{noRun: true, control: &cfg})
	ctx := context.Background()
	const n = 95 // ten calls, the last one short
	id := e.submit("cont", fmt.Appendf(nil, `{"name":"cont","stages":[{"name":"a","task":"noop","partitions":{"count":%d}}]}`, n))
	if st := stageOf(t, e, id); st.Enqueued != 10 || st.Materialized {
		t.Fatalf("after the submit's call: enqueued %d materialized %v, want 10 false", st.Enqueued, st.Materialized)
	}

	timers, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); e.r.RunTimers(timers) }()
	defer func() { stop(); <-done }()
	waitFor(t, time.Minute, "the stage to be materialized by relays", func() bool { return stageOf(t, e, id).Materialized })
	if st := stageOf(t, e, id); st.Enqueued != n || st.Total != n {
		t.Fatalf("materialized stage: enqueued %d of %d, want %d", st.Enqueued, st.Total, n)
	}
	if got := messagesIn(t, e, e.r.Resources.Queues.Normal); got != n {
		t.Fatalf("%d task messages queued, want one per task (%d)", got, n)
	}
	wantTasksOnce(t, e, id, n)
	waitFor(t, 10*time.Second, "the timer queue to drain", func() bool { return messagesIn(t, e, e.r.Resources.Queues.Timer) == 0 })

	runCtx, stopExec := context.WithCancel(ctx)
	execDone := make(chan error, 1)
	go func() { execDone <- e.r.Poller().Run(runCtx) }()
	defer func() { stopExec(); <-execDone }()
	if st := e.waitJob(id, time.Minute); st.State != string(sm.JobSucceeded) {
		t.Fatalf("job %s, want SUCCEEDED: %+v", st.State, st)
	}
}

// A relay is idempotent: delivered twice at once, again after it ran, or
// late (the count moved on), or for an ended job, it queues no task twice
// beyond one chunk's duplicate messages (dropped at claim) and never
// leaves more than one relay behind, so duplicates do not multiply.
func TestRelayIsIdempotent(t *testing.T) {
	t.Parallel()
	const n = 30
	cases := []struct {
		name string
		// deliver hands the relay left by the submit (body) to
		// the consumer, as SQS might.
		deliver      func(t *testing.T, e *env, id, body string)
		wantEnqueued int
		// wantNext is how many relays are left on the timer queue.
		wantNext int
		// extra is how many duplicate task messages are allowed.
		extra int
	}{
		{name: "delivered once", wantEnqueued: 20, wantNext: 1,
			deliver: func(t *testing.T, e *env, _, body string) { fireTimers(t, e, body) }},
		{name: "delivered twice at once", wantEnqueued: 20, wantNext: 1, extra: 10,
			deliver: func(t *testing.T, e *env, _, body string) { fireTimers(t, e, body, body) }},
		{name: "delivered again after it ran", wantEnqueued: 20, wantNext: 1,
			deliver: func(t *testing.T, e *env, _, body string) { fireTimers(t, e, body); fireTimers(t, e, body) }},
		{name: "late: the count moved on", wantEnqueued: 10, wantNext: 0,
			deliver: func(t *testing.T, e *env, _, body string) { fireTimers(t, e, withFrom(t, body, 0)) }},
		{name: "its job was cancelled", wantEnqueued: 10, wantNext: 0,
			deliver: func(t *testing.T, e *env, id, body string) {
				if _, err := e.r.Service.Cancel(context.Background(), "tester", id); err != nil {
					t.Fatalf("cancel: %v", err)
				}
				fireTimers(t, e, body)
			}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			reg := batchwork.NewRegistry()
			reg.Register("noop", func(context.Context, *batchwork.Task) error { return nil })
			cfg := relayTimings
			e := newEnv(t, reg, envOptions{noRun: true, control: &cfg})
			id := e.submit("dup", fmt.Appendf(nil, `{"name":"dup","stages":[{"name":"a","task":"noop","partitions":{"count":%d}}]}`, n))
			bodies := takeTimerMessages(t, e)
			if len(bodies) != 1 {
				t.Fatalf("the submit left %d timer messages, want one relay: %q", len(bodies), bodies)
			}
			c.deliver(t, e, id, bodies[0])
			st := stageOf(t, e, id)
			if st.Enqueued != c.wantEnqueued {
				t.Fatalf("enqueued %d, want %d", st.Enqueued, c.wantEnqueued)
			}
			next := takeTimerMessages(t, e)
			if len(next) != c.wantNext {
				t.Fatalf("%d relays left, want %d: %q", len(next), c.wantNext, next)
			}
			if got := messagesIn(t, e, e.r.Resources.Queues.Normal); got < c.wantEnqueued || got > c.wantEnqueued+c.extra {
				t.Fatalf("%d task messages, want %d to %d", got, c.wantEnqueued, c.wantEnqueued+c.extra)
			}
			wantTasksOnce(t, e, id, c.wantEnqueued)
			if c.wantNext == 0 {
				return
			}
			// The chain carries on to the end from the one relay.
			for len(next) > 0 {
				fireTimers(t, e, next...)
				next = takeTimerMessages(t, e)
			}
			if st := stageOf(t, e, id); !st.Materialized || st.Enqueued != n {
				t.Fatalf("after the chain: enqueued %d materialized %v, want %d true", st.Enqueued, st.Materialized, n)
			}
			wantTasksOnce(t, e, id, n)
		})
	}
}

func stageOf(t *testing.T, e *env, id string) stageView {
	t.Helper()
	st, err := e.r.Store.StageGet(context.Background(), id, 0)
	if err != nil {
		t.Fatal(err)
	}
	return stageView{Enqueued: st.Enqueued, Total: st.Total, Materialized: st.Materialized}
}

type stageView struct {
	Enqueued, Total int
	Materialized    bool
}

// wantTasksOnce checks that the stage's first n tasks exist once each,
// READY.
func wantTasksOnce(t *testing.T, e *env, id string, n int) {
	t.Helper()
	got := markedPartitions(t, e, id, 0)
	for p := range n {
		if !got[p] {
			t.Fatalf("task %d missing (%d tasks)", p, len(got))
		}
	}
	if len(got) != n {
		t.Fatalf("%d tasks, want %d", len(got), n)
	}
}

// markedPartitions is the set of partitions of job's stage that
// materialization wrote: a task record, or a ready marker's chunk of
// unwritten tasks (sm.TaskUnwritten). A repeated chunk writes the same
// marker again, so a partition is in the set once however often it was
// materialized.
func markedPartitions(t *testing.T, e *env, job string, stage int) map[int]bool {
	t.Helper()
	ctx := context.Background()
	db := dynamodb.NewFromConfig(e.cfg)
	got := map[int]bool{}
	for b := 0; ; b++ {
		n := len(got)
		for _, prefix := range []string{"TASK#", "RDY#"} {
			out, err := db.Query(ctx, &dynamodb.QueryInput{
				TableName: &e.r.Resources.Table, ConsistentRead: aws.Bool(true),
				KeyConditionExpression:    aws.String("pk = :pk"),
				ExpressionAttributeValues: map[string]types.AttributeValue{":pk": &types.AttributeValueMemberS{Value: fmt.Sprintf("%s%s#%d#%d", prefix, job, stage, b)}},
			})
			if err != nil {
				t.Fatal(err)
			}
			for _, it := range out.Items {
				sk := it["sk"].(*types.AttributeValueMemberS).Value
				var lo, hi int
				if prefix == "TASK#" {
					if _, err := fmt.Sscanf(sk, "%d", &lo); err != nil {
						t.Fatalf("task key %q: %v", sk, err)
					}
					got[lo] = true
					continue
				}
				if _, err := fmt.Sscanf(sk, "%d#%d", &lo, &hi); err != nil {
					t.Fatalf("marker key %q: %v", sk, err)
				}
				for p := lo; p < hi; p++ {
					got[p] = true
				}
			}
		}
		if len(got) == n {
			return got
		}
	}
}

// takeTimerMessages receives and deletes every message of the timer queue.
func takeTimerMessages(t *testing.T, e *env) []string {
	t.Helper()
	url := e.r.Resources.Queues.Timer
	msgs := receiveVisible(t, e, url)
	var bodies, receipts []string
	for _, m := range msgs {
		bodies = append(bodies, m.Body)
		receipts = append(receipts, m.Receipt)
	}
	for lo := 0; lo < len(receipts); lo += 10 {
		if err := e.r.Queue.DeleteBatch(context.Background(), url, receipts[lo:min(lo+10, len(receipts))]); err != nil {
			t.Fatal(err)
		}
	}
	return bodies
}

// fireTimers hands bodies to the timer consumer as one batch (handled
// concurrently, as a Lambda batch is) and wants every one done with.
func fireTimers(t *testing.T, e *env, bodies ...string) {
	t.Helper()
	errs := e.r.Service.FireTimers(context.Background(), bodies)
	for i, err := range errs {
		if err != nil {
			t.Fatalf("timer message %q: %v", bodies[i], err)
		}
	}
}

// withFrom is a relay's body with another count at handoff (its wire
// key is "continue").
func withFrom(t *testing.T, body string, from int) string {
	t.Helper()
	var m map[string]map[string]any
	if err := json.Unmarshal([]byte(body), &m); err != nil || m["continue"] == nil {
		t.Fatalf("not a relay: %q (%v)", body, err)
	}
	m["continue"]["from"] = from
	out, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return string(out)
}
