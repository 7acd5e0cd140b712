package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/batchwork/batchwork/internal/executor"
	"github.com/batchwork/batchwork/internal/executor/feed"
	"github.com/batchwork/batchwork/shared/batchwork"
	"github.com/batchwork/batchwork/shared/blob"
	"github.com/batchwork/batchwork/shared/control"
	"github.com/batchwork/batchwork/shared/domain"
	"github.com/batchwork/batchwork/shared/lambdatask"
	sm "github.com/batchwork/batchwork/statemachine"
)

// numberingFunction plays a lambda stage's function that checkpoints
// (internal/executor/lambdackpt.go), in process: it numbers the lines of
// its input (ckptInput(300), held here; the offset is in its bytes),
// writing line<TAB>number, and rejects every 37th line instead. With
// Params["step"] = N it handles N lines per invocation and answers with a
// checkpoint (its outputs written to checkpointOutputs) until the input
// ends; with Params["fail"] = "yes", attempt 1 fails once it has
// checkpointed at line 150, after writing lines that must not be kept.
type numberingFunction struct {
	e  *env
	in []byte

	mu     sync.Mutex
	events map[string][]lambdatask.Event // by job
}

func (f *numberingFunction) Invoke(ctx context.Context, function string, payload []byte) ([]byte, string, error) {
	var ev lambdatask.Event
	if err := json.Unmarshal(payload, &ev); err != nil {
		return nil, "", err
	}
	f.mu.Lock()
	f.events[ev.Task.Job] = append(f.events[ev.Task.Job], ev)
	f.mu.Unlock()
	step, _ := strconv.Atoi(ev.Params["step"])
	off, n := int64(0), 0
	if ev.Resume != nil {
		off = ev.Resume.Offset
		var err error
		if n, err = strconv.Atoi(string(ev.Resume.State)); err != nil {
			return nil, "", fmt.Errorf("resume state %q: %w", ev.Resume.State, err)
		}
	}
	if ev.Params["fail"] == "yes" && ev.Task.Attempt == 1 && n == 150 {
		if err := f.e.r.Blob.PutIfAbsent(ctx, ev.CheckpointOutputs[0], []byte("lost\tafter the checkpoint\n")); err != nil {
			return nil, "", err
		}
		return []byte(`{"error": "injected failure after a checkpoint"}`), "", nil
	}
	var out bytes.Buffer
	var resp lambdatask.Response
	for handled := 0; off < int64(len(f.in)) && (step == 0 || handled < step); handled++ {
		end := int64(bytes.IndexByte(f.in[off:], '\n')) + off + 1
		line := f.in[off : end-1]
		n++
		if n%37 == 0 {
			at := off
			resp.Rejects = append(resp.Rejects, lambdatask.Reject{Record: string(line), Reason: "number " + strconv.Itoa(n), Offset: &at})
		} else {
			fmt.Fprintf(&out, "%s\t%d\n", line, n)
		}
		off = end
	}
	key := ev.Outputs[0]
	if off < int64(len(f.in)) {
		key = ev.CheckpointOutputs[0]
		resp.Checkpoint = &lambdatask.Checkpoint{Offset: off, State: []byte(strconv.Itoa(n))}
	}
	if err := f.e.r.Blob.PutIfAbsent(ctx, key, out.Bytes()); err != nil {
		return nil, "", err
	}
	resp.Outputs = []lambdatask.Output{{Part: 0, Key: key}}
	raw, err := json.Marshal(resp)
	return raw, "", err
}

func (f *numberingFunction) jobEvents(job string) []lambdatask.Event {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]lambdatask.Event(nil), f.events[job]...)
}

// numbered is what numberingFunction commits for in, uninterrupted.
func numbered(in []byte) []byte {
	var b bytes.Buffer
	for n, line := range bytes.Split(bytes.TrimSuffix(in, []byte("\n")), []byte("\n")) {
		if (n+1)%37 != 0 {
			fmt.Fprintf(&b, "%s\t%d\n", line, n+1)
		}
	}
	return b.Bytes()
}

// A lambda stage's function checkpoints in its response: the executor
// saves each checkpoint (its outputs so far sealed as segments) and
// invokes the function again from it, within the attempt; a retry after
// a failure resumes from the last checkpoint of the failed attempt, with
// its offset and state in the event, dropping what the function wrote
// after it. Either way the committed output is byte for byte an
// uninterrupted run's, and so are the bad records.
func TestLambdaStageCheckpointsAndResumes(t *testing.T) {
	t.Parallel()
	e := newEnv(t, batchwork.NewRegistry(), envOptions{noRun: true, control: &control.Config{
		StartGrace: time.Second, CheckEvery: time.Second, StuckAfter: 5 * time.Second,
		TaskFunctions: []string{"numberer"},
	}})
	fn := &numberingFunction{e: e, in: ckptInput(300), events: map[string][]lambdatask.Event{}}
	run := &executor.Runner{CP: e.r.Service, Blob: e.r.Blob, Registry: executor.NewRegistry(), Log: newLogCounter().logger(), Lambda: fn}
	spec := func(name, params string) []byte {
		return fmt.Appendf(nil, `{"name":%q,"retry":{"maxAttempts":3,"backoff":"1ms"},"stages":[{"name":"l","lambda":"numberer",`+
			`"maxBadRecords":20,"partitions":{"count":1,"params":[%s]}}]}`, name, params)
	}
	through := e.submit("through", spec("through", `{}`))
	steps := e.submit("steps", spec("steps", `{"step":"50"}`))
	resumed := e.submit("resumed", spec("resumed", `{"step":"50","fail":"yes"}`))
	workUntilEnded(t, e, run, time.Minute, through, steps, resumed)
	ctx := context.Background()
	want := numbered(fn.in)
	for _, tc := range []struct {
		job         string
		attempt     int
		invocations int
	}{{through, 1, 1}, {steps, 1, 6}, {resumed, 2, 4 + 3}} {
		wantSucceeded(t, e.r.Service, tc.job)
		task, err := e.r.Store.TaskGet(ctx, domain.TaskRef{Job: tc.job})
		if err != nil {
			t.Fatal(err)
		}
		if task.CommittedAttempt != tc.attempt {
			t.Errorf("job %s committed attempt %d, want %d", tc.job, task.CommittedAttempt, tc.attempt)
		}
		if n := len(fn.jobEvents(tc.job)); n != tc.invocations {
			t.Errorf("job %s: %d invocations, want %d", tc.job, n, tc.invocations)
		}
		if got := committedOutput(t, e, tc.job, "l", 0, 0, 0); !bytes.Equal(got, want) {
			t.Fatalf("job %s: committed output (%d bytes) differs from an uninterrupted run's (%d bytes):\n%s", tc.job, len(got), len(want), got)
		}
		pg, err := e.r.Service.BadRecords(ctx, control.BadRecordsRequest{Owner: "tester", ID: tc.job, Limit: 100})
		if err != nil {
			t.Fatal(err)
		}
		if len(pg.Records) != 300/37 || pg.Counts["l"] != 300/37 {
			t.Fatalf("job %s: %d bad records (count %d), want %d", tc.job, len(pg.Records), pg.Counts["l"], 300/37)
		}
		for _, r := range pg.Records {
			if r.Offset < 0 || !bytes.HasPrefix(fn.in[r.Offset:], []byte(r.Record+"\n")) {
				t.Errorf("job %s: bad record %+v is not at its offset", tc.job, r)
			}
		}
	}
	// The retry's first event resumes from the failed attempt's last
	// checkpoint, and writes to segments from the start.
	evs := fn.jobEvents(resumed)
	first := evs[4]
	if first.Task.Attempt != 2 || first.Resume == nil || first.Resume.Offset != 150*13 || string(first.Resume.State) != "150" {
		t.Fatalf("retry's first event: attempt %d resume %+v, want attempt 2 resuming at %d with state 150", first.Task.Attempt, first.Resume, 150*13)
	}
	if first.Outputs[0] != first.CheckpointOutputs[0] || first.Outputs[0] == blob.OutputKey(resumed, "l", 0, 2, 0) {
		t.Errorf("resumed attempt's outputs %q, want its checkpoint outputs %q", first.Outputs, first.CheckpointOutputs)
	}
	if evs[0].Resume != nil || evs[0].Outputs[0] != blob.OutputKey(resumed, "l", 0, 1, 0) {
		t.Errorf("first event of a fresh task: resume %+v, outputs %q; want none, and the attempt's output keys", evs[0].Resume, evs[0].Outputs)
	}
	if !timelineHas(t, e, resumed, "task.resumed", "resumed from the checkpoint of attempt 1 at offset") {
		t.Error("history does not say the task resumed from attempt 1's checkpoint")
	}
}

// fenceAtCheckpoint is a control plane on which the at-th checkpoint
// finds its attempt taken over: just before it, the lease runs out and
// another claim takes the task (an executor stalled past its lease), and
// that claim's holder dies too.
type fenceAtCheckpoint struct {
	*control.Service
	clk   *testClock
	lease time.Duration
	at, n int
	t     *testing.T
}

func (f *fenceAtCheckpoint) Checkpoint(ctx context.Context, c control.Claim, seq int, offset int64) error {
	if f.n++; f.n == f.at {
		f.clk.Advance(f.lease + sm.LeaseSkew + time.Second)
		if _, err := f.Service.Claim(ctx, c.Task.Ref); err != nil {
			f.t.Errorf("takeover claim: %v", err)
		}
		f.clk.Advance(f.lease + sm.LeaseSkew + time.Second)
	}
	return f.Service.Checkpoint(ctx, c, seq, offset)
}

// A lambda function's checkpoint from a fenced attempt is refused and
// never used: the attempt stops (its executor leaves the message), the
// task keeps pointing at the checkpoint saved while the attempt held the
// claim, and the next attempt resumes from that one and commits an
// uninterrupted run's output.
func TestLambdaFencedCheckpointIsNeverUsed(t *testing.T) {
	t.Parallel()
	e := newEnv(t, batchwork.NewRegistry(), envOptions{noRun: true})
	clk := newTestClock()
	cfg := testTimings
	cfg.TaskFunctions = []string{"numberer"}
	svc := newService(e, cfg, e.r.Store, e.r.Queue, clk, newLogCounter().logger())
	ctx := context.Background()
	fn := &numberingFunction{e: e, in: ckptInput(300), events: map[string][]lambdatask.Event{}}
	id := submitTo(t, svc, "fenced", `{"name":"fenced","lease":"10s","retry":{"maxAttempts":5},"stages":[{"name":"l","lambda":"numberer",`+
		`"maxBadRecords":20,"partitions":{"count":1,"params":[{"step":"50"}]}}]}`)
	ref := domain.TaskRef{Job: id}
	stale := &executor.Runner{CP: &fenceAtCheckpoint{Service: svc, clk: clk, lease: 10 * time.Second, at: 2, t: t},
		Blob: e.r.Blob, Registry: executor.NewRegistry(), Log: newLogCounter().logger(), HeartbeatEvery: time.Hour, Lambda: fn}
	res := stale.Handle(ctx, feed.Delivery{Body: ref.String()}, nil)
	if res.Action != feed.Leave || res.Err == nil {
		t.Fatalf("fenced attempt: %+v, want it left", res)
	}
	task, err := e.r.Store.TaskGet(ctx, ref)
	if err != nil {
		t.Fatal(err)
	}
	off1 := int64(50 * 13)
	if task.Checkpoint != (domain.CheckpointRef{Attempt: 1, Seq: 1, Offset: off1}) {
		t.Fatalf("after the refused checkpoint the task points at %+v, want attempt 1's checkpoint 1 at %d", task.Checkpoint, off1)
	}
	if _, err := e.r.Blob.Get(ctx, blob.CheckpointKey(id, "l", 0, 1, 2)); err != nil {
		t.Fatalf("the fenced attempt's checkpoint record: %v, want it written (and never used)", err)
	}
	if n := len(fn.jobEvents(id)); n != 2 {
		t.Fatalf("fenced attempt invoked its function %d times, want 2 (none after the refused checkpoint)", n)
	}
	fresh := &executor.Runner{CP: svc, Blob: e.r.Blob, Registry: executor.NewRegistry(), Log: newLogCounter().logger(), HeartbeatEvery: time.Hour, Lambda: fn}
	if res := fresh.Handle(ctx, feed.Delivery{Body: ref.String()}, nil); res.Err != nil || res.Action != feed.Delete {
		t.Fatalf("fresh attempt: %+v", res)
	}
	evs := fn.jobEvents(id)
	if r := evs[2]; r.Task.Attempt != 3 || r.Resume == nil || r.Resume.Offset != off1 || string(r.Resume.State) != "50" {
		t.Fatalf("next attempt's first event: attempt %d resume %+v, want attempt 3 resuming from the unfenced checkpoint at %d", r.Task.Attempt, r.Resume, off1)
	}
	if st := jobState(t, svc, id); st.State != string(sm.JobSucceeded) {
		t.Fatalf("job %s (%s), want SUCCEEDED", st.State, st.Error)
	}
	if got, want := committedOutput(t, e, id, "l", 0, 0, 0), numbered(fn.in); !bytes.Equal(got, want) {
		t.Fatalf("output after a fenced checkpoint (%d bytes) differs from an uninterrupted run's (%d bytes)", len(got), len(want))
	}
}

// workUntilEnded runs work until every job has ended: a retry's message
// may still be hidden (its backoff) when one round of work finds the
// queue empty.
func workUntilEnded(t *testing.T, e *env, run *executor.Runner, within time.Duration, jobs ...string) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		work(t, e, run)
		running := 0
		for _, id := range jobs {
			if st := jobState(t, e.r.Service, id).State; st == string(sm.JobRunning) || st == string(sm.JobPublishing) {
				running++
			}
		}
		if running == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d jobs still running after %s", running, within)
		}
	}
}
