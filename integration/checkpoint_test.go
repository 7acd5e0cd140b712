package integration

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/batchwork/batchwork/internal/executor"
	"github.com/batchwork/batchwork/internal/executor/feed"
	"github.com/batchwork/batchwork/shared/batchwork"
	"github.com/batchwork/batchwork/shared/blob"
	"github.com/batchwork/batchwork/shared/control"
	"github.com/batchwork/batchwork/shared/domain"
	"github.com/batchwork/batchwork/shared/tuning"
	sm "github.com/batchwork/batchwork/statemachine"
)

// ckptInput is n lines whose keys spread over shuffle partitions.
func ckptInput(n int) []byte {
	var b bytes.Buffer
	for i := range n {
		fmt.Fprintf(&b, "k%02d-line%04d\n", i%17, i)
	}
	return b.Bytes()
}

// numberLines is a task function that checkpoints: it numbers its input's
// lines (the running count is its checkpoint state), emits each line as
// a key with its number as the value, and checkpoints every `every`
// lines, calling after (when set) once each checkpoint is saved. Asked to
// continue (batchwork.ErrContinue), it checkpoints where it is and
// returns. pace is how long each line takes (the work a slow task does).
func numberLines(every int, pace time.Duration, after func(ctx context.Context, t *batchwork.Task, n int) error) batchwork.Func {
	return numberLinesRejecting(every, pace, 0, after)
}

// numberLinesRejecting is numberLines that rejects (Task.Reject) every
// line whose number is a multiple of rejectEvery (0: none).
func numberLinesRejecting(every int, pace time.Duration, rejectEvery int, after func(ctx context.Context, t *batchwork.Task, n int) error) batchwork.Func {
	return func(ctx context.Context, t *batchwork.Task) error {
		off, state, _ := t.Resume()
		n := 0
		if len(state) > 0 {
			var err error
			if n, err = strconv.Atoi(string(state)); err != nil {
				return fmt.Errorf("checkpoint state %q: %w", state, err)
			}
		}
		br := bufio.NewReader(t.Input)
		for {
			if cause := context.Cause(ctx); cause != nil {
				if errors.Is(cause, batchwork.ErrContinue) {
					if err := t.Checkpoint(ctx, off, []byte(strconv.Itoa(n))); err != nil {
						return err
					}
				}
				return cause
			}
			line, err := br.ReadString('\n')
			if len(line) > 0 {
				time.Sleep(pace) // the work a line takes, not synchronisation
				off += int64(len(line))
				n++
				if rejectEvery > 0 && n%rejectEvery == 0 {
					if err := t.Reject([]byte(line), "number "+strconv.Itoa(n)); err != nil {
						return err
					}
				} else if err := t.Out.Emit(strings.TrimSuffix(line, "\n"), strconv.Itoa(n)); err != nil {
					return err
				}
				if n%every == 0 {
					if err := t.Checkpoint(ctx, off, []byte(strconv.Itoa(n))); err != nil {
						return err
					}
					if after != nil {
						if err := after(ctx, t, n); err != nil {
							return err
						}
					}
				}
			}
			if err == io.EOF {
				return nil
			}
			if err != nil {
				return err
			}
		}
	}
}

// collect copies a reduce task's input to its output.
func collect(ctx context.Context, t *batchwork.Task) error {
	_, err := io.Copy(t.Out, t.Input)
	return err
}

// committedOutput reads output part r of the committed attempt of a task.
func committedOutput(t *testing.T, e *env, job, stage string, stageIdx, partition, r int) []byte {
	t.Helper()
	task, err := e.r.Store.TaskGet(context.Background(), domain.TaskRef{Job: job, Stage: stageIdx, Partition: partition})
	if err != nil {
		t.Fatal(err)
	}
	if task.State != sm.TaskSucceeded {
		t.Fatalf("task %s/%d/%d is %s, want SUCCEEDED", job, stageIdx, partition, task.State)
	}
	body, err := e.r.Blob.Get(context.Background(), blob.OutputKey(job, stage, partition, task.CommittedAttempt, r))
	if err != nil {
		t.Fatalf("output %d of %s/%s/%d attempt %d: %v", r, job, stage, partition, task.CommittedAttempt, err)
	}
	return body
}

// timelineHas reports whether the job's history has an event of type typ
// whose message contains msg.
func timelineHas(t *testing.T, e *env, job, typ, msg string) bool {
	t.Helper()
	h, err := e.r.Service.History(context.Background(), control.HistoryRequest{Owner: "tester", ID: job, Limit: 200})
	if err != nil {
		t.Fatal(err)
	}
	for _, ev := range h.Events {
		if ev.Type == typ && strings.Contains(ev.Message, msg) {
			return true
		}
	}
	return false
}

// A map task that fails after its second checkpoint is retried from that
// checkpoint: its input resumes at the checkpoint's offset, its state
// (the line count) is restored, the outputs it wrote before the
// checkpoint are kept and those it wrote after are dropped. Its committed
// outputs, on every shuffle partition, and what the reduce stage makes of
// them are byte for byte those of a job whose task ran through.
func TestCheckpointResumeOutputsMatchUninterrupted(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	failing := map[string]bool{} // jobs whose first attempt fails
	reg := batchwork.NewRegistry()
	reg.Register("number", numberLinesRejecting(50, 0, 37, func(ctx context.Context, t *batchwork.Task, n int) error {
		mu.Lock()
		fail := failing[t.Job]
		mu.Unlock()
		if fail && t.Attempt == 1 && n == 150 {
			// Written after the checkpoint: a resume must not keep these.
			for i := range 10 {
				if err := t.Out.Emit(fmt.Sprintf("lost-%d", i), "after the checkpoint"); err != nil {
					return err
				}
			}
			return errors.New("injected failure after a checkpoint")
		}
		return nil
	}))
	reg.Register("collect", collect)
	e := newEnv(t, reg, envOptions{noRun: true})
	in := e.putInput("tester", "ckpt/resume/in.txt", ckptInput(300))
	spec := func(name string) []byte {
		return []byte(fmt.Sprintf(`{"name":%q,"retry":{"maxAttempts":3,"backoff":"1ms"},"stages":[
		  {"name":"m","task":"number","partitions":{"input":{"prefix":%q}},"shuffle":{"partitions":3},"maxBadRecords":20},
		  {"name":"r","task":"collect","after":["m"]}]}`, name, in))
	}
	resumed := e.submit("resumed", spec("resumed"))
	through := e.submit("through", spec("through"))
	mu.Lock()
	failing[resumed] = true
	mu.Unlock()
	run := &executor.Runner{CP: e.r.Service, Blob: e.r.Blob, Registry: executor.PublicRegistry(reg), Log: newLogCounter().logger()}
	work(t, e, run)
	wantSucceeded(t, e.r.Service, resumed)
	wantSucceeded(t, e.r.Service, through)

	ctx := context.Background()
	task, err := e.r.Store.TaskGet(ctx, domain.TaskRef{Job: resumed, Stage: 0, Partition: 0})
	if err != nil {
		t.Fatal(err)
	}
	if task.CommittedAttempt != 2 {
		t.Fatalf("resumed job's map task committed attempt %d, want 2 (one failure, one resume)", task.CommittedAttempt)
	}
	if !timelineHas(t, e, resumed, "task.resumed", "resumed from the checkpoint of attempt 1 at offset") {
		t.Fatal("history does not say the task resumed from attempt 1's checkpoint")
	}
	// The resumed task counts the records it skipped as read, and `tasks`
	// shows where it resumed from.
	info := func(job string) control.TaskInfo {
		l, err := e.r.Service.ListTasks(ctx, control.ListTasksRequest{Owner: "tester", ID: job, Stage: "m", Limit: 10})
		if err != nil || len(l.Tasks) != 1 {
			t.Fatalf("tasks of %s: %+v, %v", job, l, err)
		}
		return l.Tasks[0]
	}
	gotInfo, wantInfo := info(resumed), info(through)
	if gotInfo.RecordsIn != wantInfo.RecordsIn || gotInfo.RecordsOut != wantInfo.RecordsOut || wantInfo.RecordsIn != 300 {
		t.Fatalf("resumed task counted %d records in, %d out; the uninterrupted one %d and %d (want 300 in)",
			gotInfo.RecordsIn, gotInfo.RecordsOut, wantInfo.RecordsIn, wantInfo.RecordsOut)
	}
	if ck := gotInfo.Checkpoint; ck == nil || ck.Attempt != 2 {
		t.Fatalf("tasks shows checkpoint %+v, want attempt 2's last", ck)
	}
	// Once the task committed, its checkpoints (records and segments) are
	// marked for the bucket's expiry rule; its committed outputs are not.
	ckpts, err := e.r.Blob.List(ctx, e.r.Resources.Bucket, blob.TaskCheckpointsPrefix(resumed, "m", 0))
	if err != nil || len(ckpts) == 0 {
		t.Fatalf("checkpoint objects of the resumed task: %d, %v", len(ckpts), err)
	}
	for _, o := range ckpts {
		if got := objectTags(t, e, o.Key)[tuning.UncommittedTagKey]; got != tuning.UncommittedTagValue {
			t.Errorf("%s: tag %q, want it marked for expiry", o.Key, got)
		}
	}
	if got := objectTags(t, e, blob.OutputKey(resumed, "m", 0, 2, 0))[tuning.UncommittedTagKey]; got != "" {
		t.Errorf("committed output tagged %q", got)
	}
	// The records rejected before the checkpoint were committed with the
	// attempt that resumed from it.
	bad := func(job string) []domain.BadRecord {
		page, err := e.r.Service.BadRecords(ctx, control.BadRecordsRequest{Owner: "tester", ID: job, Limit: 100})
		if err != nil {
			t.Fatal(err)
		}
		return page.Records
	}
	gotBad, wantBad := bad(resumed), bad(through)
	if len(wantBad) != 300/37 || len(gotBad) != len(wantBad) {
		t.Fatalf("resumed job has %d bad records, the uninterrupted one %d; want %d each", len(gotBad), len(wantBad), 300/37)
	}
	for i := range gotBad {
		g, w := gotBad[i], wantBad[i]
		if g.Record != w.Record || g.Offset != w.Offset || g.Reason != w.Reason {
			t.Fatalf("bad record %d of the resumed job %+v, want %+v", i, g, w)
		}
	}
	for r := range 3 {
		got, want := committedOutput(t, e, resumed, "m", 0, 0, r), committedOutput(t, e, through, "m", 0, 0, r)
		if !bytes.Equal(got, want) {
			t.Fatalf("map output %d of the resumed task (%d bytes) differs from the uninterrupted one's (%d bytes):\n%s\nwant:\n%s", r, len(got), len(want), got, want)
		}
		if len(want) == 0 {
			t.Fatalf("map output %d is empty: the test proves nothing", r)
		}
		got, want = committedOutput(t, e, resumed, "r", 1, r, 0), committedOutput(t, e, through, "r", 1, r, 0)
		if !bytes.Equal(got, want) {
			t.Fatalf("reduce output %d of the resumed job differs from the uninterrupted job's", r)
		}
	}
}

// A checkpoint is fenced by the claim token. Attempt 1 saves a
// checkpoint; its executor is then judged dead and attempt 2 takes the
// task over (an injected takeover: the claim names an executor with no
// liveness record). Attempt 1's next checkpoint is refused as stale, its
// context is cancelled, and the task record keeps pointing at the
// checkpoint saved while it held the claim: its refused record is in S3
// but never used. Attempt 2 resumes from attempt 1's first checkpoint and
// fails without one of its own; attempt 3 resumes from the same
// checkpoint, never the fenced one, and commits the outputs of an
// uninterrupted run.
func TestFencedCheckpointIsNeverUsed(t *testing.T) {
	t.Parallel()
	data := ckptInput(300)
	saved := make(chan int64)      // attempt 1's first checkpoint offset
	goOn := make(chan struct{})    // attempt 1 may go on
	refused := make(chan error, 1) // attempt 1's second checkpoint
	stopped := make(chan error, 1) // attempt 1's context after it
	started := make(chan int64, 3) // a resumed attempt's offset
	failNow := make(chan struct{}) // attempt 2 may fail
	reg := batchwork.NewRegistry()
	reg.Register("fence", func(ctx context.Context, t *batchwork.Task) error {
		off, state, ok := t.Resume()
		if t.Attempt > 1 {
			if !ok {
				started <- -1
				return errors.New("attempt did not resume")
			}
			started <- off
		}
		if t.Attempt == 2 {
			<-failNow
			return errors.New("injected failure before any checkpoint of attempt 2")
		}
		n := 0
		if ok {
			n, _ = strconv.Atoi(string(state))
		}
		br := bufio.NewReader(t.Input)
		for {
			line, err := br.ReadString('\n')
			if len(line) > 0 {
				off += int64(len(line))
				n++
				if err := t.Out.Emit(strings.TrimSuffix(line, "\n"), strconv.Itoa(n)); err != nil {
					return err
				}
				if t.Attempt == 1 && n == 100 {
					if err := t.Checkpoint(ctx, off, []byte(strconv.Itoa(n))); err != nil {
						return err
					}
					saved <- off
					<-goOn
				}
				if t.Attempt == 1 && n == 200 {
					err := t.Checkpoint(ctx, off, []byte(strconv.Itoa(n)))
					refused <- err
					<-ctx.Done()
					stopped <- context.Cause(ctx)
					return err
				}
			}
			if err == io.EOF {
				return nil
			}
			if err != nil {
				return err
			}
		}
	})
	e := newEnv(t, reg, envOptions{noRun: true})
	ctx := context.Background()
	in := e.putInput("tester", "ckpt/fence/in.txt", data)
	id := e.submit("fence", []byte(fmt.Sprintf(`{"name":"fence","retry":{"maxAttempts":3,"backoff":"1ms"},
	  "stages":[{"name":"m","task":"fence","partitions":{"input":{"prefix":%q}}}]}`, in)))
	ref := domain.TaskRef{Job: id, Stage: 0, Partition: 0}
	url := e.r.Resources.Queues.Normal
	msgs := receiveVisible(t, e, url)
	if len(msgs) != 1 {
		t.Fatalf("%d messages, want the task's one", len(msgs))
	}
	newRunner := func(every time.Duration) *executor.Runner {
		return &executor.Runner{CP: e.r.Service, Blob: e.r.Blob, Registry: executor.PublicRegistry(reg),
			Log: newLogCounter().logger(), HeartbeatEvery: every}
	}
	d := feed.Delivery{Body: msgs[0].Body, SentAt: msgs[0].SentAt}

	// Attempt 1, on an executor that has no liveness record: any other
	// executor may take its task over. It beats rarely, so it learns of
	// the takeover from its checkpoint.
	resA := make(chan feed.Result, 1)
	go func() { resA <- newRunner(time.Hour).Handle(control.WithExecutor(ctx, "ghost-executor"), d, nil) }()
	off1 := <-saved
	if task, err := e.r.Store.TaskGet(ctx, ref); err != nil || task.Checkpoint != (domain.CheckpointRef{Attempt: 1, Seq: 1, Offset: off1}) {
		t.Fatalf("after attempt 1's checkpoint the task points at %+v (err %v), want attempt 1's checkpoint 1 at %d", task.Checkpoint, err, off1)
	}

	// Attempt 2 takes over and resumes from attempt 1's checkpoint.
	resB := make(chan feed.Result, 1)
	go func() { resB <- newRunner(0).Handle(ctx, d, nil) }()
	if got := <-started; got != off1 {
		t.Fatalf("attempt 2 resumed at %d, want attempt 1's checkpoint at %d", got, off1)
	}

	// Attempt 1 goes on, and its next checkpoint is refused.
	close(goOn)
	if err := <-refused; !errors.Is(err, domain.ErrStaleClaim) {
		t.Fatalf("fenced attempt's checkpoint: %v, want a stale claim", err)
	}
	if cause := <-stopped; cause == nil {
		t.Fatal("fenced attempt's context was not cancelled")
	}
	if res := <-resA; res.Action != feed.Leave {
		t.Fatalf("fenced attempt ended with %v (%v), want leave", res.Action, res.Err)
	}
	task, err := e.r.Store.TaskGet(ctx, ref)
	if err != nil {
		t.Fatal(err)
	}
	if task.Checkpoint != (domain.CheckpointRef{Attempt: 1, Seq: 1, Offset: off1}) {
		t.Fatalf("after the refused checkpoint the task points at %+v, want attempt 1's checkpoint 1", task.Checkpoint)
	}
	// The refused checkpoint's record was written before the fence
	// refused it: only the fence keeps it from being used.
	if _, err := e.r.Blob.Get(ctx, blob.CheckpointKey(id, "m", 0, 1, 2)); err != nil {
		t.Fatalf("the fenced attempt's checkpoint record: %v, want it written (and never used)", err)
	}

	// Attempt 2 fails; attempt 3 resumes from the same checkpoint.
	close(failNow)
	if res := <-resB; res.Action != feed.Hide {
		t.Fatalf("attempt 2 ended with %v (%v), want a retry", res.Action, res.Err)
	}
	if err := e.r.Queue.ChangeVisibility(ctx, url, msgs[0].Receipt, 0); err != nil {
		t.Fatal(err)
	}
	work(t, e, newRunner(0))
	if got := <-started; got != off1 {
		t.Fatalf("attempt 3 resumed at %d, want attempt 1's unfenced checkpoint at %d", got, off1)
	}
	wantSucceeded(t, e.r.Service, id)
	want, err := batchwork.RunTask(ctx, numberLines(1000, 0, nil), batchwork.TaskInput{Input: bytes.NewReader(data)})
	if err != nil {
		t.Fatal(err)
	}
	if got := committedOutput(t, e, id, "m", 0, 0, 0); !bytes.Equal(got, want.Parts[0]) {
		t.Fatalf("outputs after a fenced checkpoint (%d bytes) differ from an uninterrupted run's (%d bytes)", len(got), len(want.Parts[0]))
	}
}

// On the Lambda host, a task whose work takes longer than an invocation
// is asked to checkpoint before the invocation's deadline and continues
// in the next one, without spending an attempt: with maxAttempts 1, it
// finishes across several invocations, its history says where each one
// continued, and its outputs are those of an uninterrupted run.
func TestLambdaTaskContinuesAcrossInvocations(t *testing.T) {
	t.Parallel()
	const lines, pace = 400, 20 * time.Millisecond // 8s of work
	data := ckptInput(lines)
	fn := numberLines(1000, pace, nil) // checkpoints only when asked
	reg := batchwork.NewRegistry()
	reg.Register("slow", fn)
	e := newEnv(t, reg, envOptions{noRun: true})
	ctx := context.Background()
	in := e.putInput("tester", "ckpt/lambda/in.txt", data)
	id := e.submit("cont", []byte(fmt.Sprintf(`{"name":"cont","retry":{"maxAttempts":1},
	  "stages":[{"name":"m","task":"slow","partitions":{"input":{"prefix":%q}}}]}`, in)))
	// An invocation of 8s whose task is asked to continue 5s before its
	// end: at most 3s of work each (less its claim), so at least three
	// invocations. The margin is what its checkpoint and continuation
	// have: on loaded cores the emulators take seconds for them, and an
	// invocation that ends first loses its attempt, as on Lambda.
	invocations, receives := invokeUntilDone(t, e, reg, id, 8*time.Second, 5*time.Second)
	wantSucceeded(t, e.r.Service, id)
	task, err := e.r.Store.TaskGet(ctx, domain.TaskRef{Job: id, Stage: 0, Partition: 0})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("finished in %d invocations: %d continuations, committed attempt %d", invocations, task.Checkpoint.Continuations, task.CommittedAttempt)
	if task.Checkpoint.Continuations < 2 {
		t.Fatalf("task continued %d times, want at least 2 (8s of work in invocations of at most 3s)", task.Checkpoint.Continuations)
	}
	if task.CommittedAttempt != task.Checkpoint.Continuations+1 || task.MaxAttempts != 1+task.Checkpoint.Continuations {
		t.Fatalf("committed attempt %d of %d after %d continuations: want each continuation a new attempt that spends none of the 1 allowed",
			task.CommittedAttempt, task.MaxAttempts, task.Checkpoint.Continuations)
	}
	if receives != 1 {
		t.Fatalf("a message was received %d times: each invocation must get a fresh one, or continuations add up to the redrive threshold", receives)
	}
	if !timelineHas(t, e, id, "task.continued", "continued in a new invocation at offset") {
		t.Fatal("history does not say the task continued in a new invocation")
	}
	want, err := batchwork.RunTask(ctx, fn, batchwork.TaskInput{Input: bytes.NewReader(data)})
	if err != nil {
		t.Fatal(err)
	}
	if got := committedOutput(t, e, id, "m", 0, 0, 0); !bytes.Equal(got, want.Parts[0]) {
		t.Fatalf("outputs across %d invocations (%d bytes) differ from an uninterrupted run's (%d bytes)", task.Checkpoint.Continuations+1, len(got), len(want.Parts[0]))
	}
}

// invokeUntilDone drives the Lambda host in-process, as Lambda's SQS event
// source would, until job id ends: each batch of ready messages is one
// invocation of the given length (its context's deadline), with the
// given continuation margin; messages the handler does not report as
// failures are deleted. It returns the number of invocations and the
// most receives of a message it handled.
func invokeUntilDone(t *testing.T, e *env, reg *batchwork.Registry, id string, invocation, margin time.Duration) (invocations, receives int) {
	t.Helper()
	ctx := context.Background()
	url := e.r.Resources.Queues.Normal
	run := &executor.Runner{CP: e.r.Service, Blob: e.r.Blob, Registry: executor.PublicRegistry(reg), Log: newLogCounter().logger()}
	h := &feed.LambdaHandler{
		Handler: run, CP: run.CP, Log: run.Log,
		Queue: e.r.Queue,
		QueueURLs: map[string]string{
			queueName(e.r.Resources.Queues.High): e.r.Resources.Queues.High,
			queueName(url):                       url,
			queueName(e.r.Resources.Queues.Low):  e.r.Resources.Queues.Low,
		},
		ContinueMargin: margin,
	}
	for deadline := time.Now().Add(2 * time.Minute); ; {
		st := jobState(t, e.r.Service, id)
		if st.State != string(sm.JobRunning) {
			return invocations, receives
		}
		if time.Now().After(deadline) || invocations > 20 {
			t.Fatalf("job still %s after %d invocations", st.State, invocations)
		}
		msgs, err := e.r.Queue.Receive(ctx, url, 10, time.Second, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		if len(msgs) == 0 {
			continue
		}
		invocations++
		for _, m := range msgs {
			receives = max(receives, m.ReceiveCount)
		}
		ictx, cancel := context.WithTimeout(ctx, invocation)
		resp, err := h.Handle(ictx, sqsEvent(t, e, url, msgs))
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		keep := map[string]bool{}
		for _, f := range resp.BatchItemFailures {
			keep[f.ItemIdentifier] = true
		}
		var done []string
		for _, m := range msgs {
			if !keep[m.ID] {
				done = append(done, m.Receipt)
			}
		}
		if len(done) > 0 {
			if err := e.r.Queue.DeleteBatch(ctx, url, done); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// A task that checkpoints when asked but never gets further cannot
// continue for ever: its first continuation saves where it is; the next
// invocation checkpoints the same place again, which is no progress, so
// the attempt fails like any other and spends an attempt; its retries
// fail the same way and the job fails saying why.
func TestLambdaTaskWithoutProgressFails(t *testing.T) {
	t.Parallel()
	reg := batchwork.NewRegistry()
	reg.Register("stuck", func(ctx context.Context, t *batchwork.Task) error {
		off, state, _ := t.Resume()
		<-ctx.Done() // never reads a record
		if errors.Is(context.Cause(ctx), batchwork.ErrContinue) {
			if state == nil {
				state = []byte("waiting")
			}
			if err := t.Checkpoint(ctx, off, state); err != nil {
				return err
			}
		}
		return context.Cause(ctx)
	})
	e := newEnv(t, reg, envOptions{noRun: true})
	in := e.putInput("tester", "ckpt/stuck/in.txt", ckptInput(10))
	id := e.submit("stuck", []byte(fmt.Sprintf(`{"name":"stuck","retry":{"maxAttempts":2,"backoff":"1ms"},
	  "stages":[{"name":"m","task":"stuck","partitions":{"input":{"prefix":%q}}}]}`, in)))
	// Asked to continue after 3s (its claim is made in them), with 5s
	// left for the checkpoint.
	invocations, _ := invokeUntilDone(t, e, reg, id, 8*time.Second, 5*time.Second)
	st := jobState(t, e.r.Service, id)
	if st.State != string(sm.JobFailed) || !strings.Contains(st.Error, "no progress checkpointed") {
		t.Fatalf("job %s (%s), want FAILED for want of progress", st.State, st.Error)
	}
	task, err := e.r.Store.TaskGet(context.Background(), domain.TaskRef{Job: id, Stage: 0, Partition: 0})
	if err != nil {
		t.Fatal(err)
	}
	// One continuation (the first checkpoint), then two attempts that
	// made none: 3 attempts of the 2 allowed plus the continuation's.
	if task.Checkpoint.Continuations != 1 || task.Attempt != 3 || invocations != 3 {
		t.Fatalf("%d continuations, %d attempts, %d invocations; want 1, 3 and 3", task.Checkpoint.Continuations, task.Attempt, invocations)
	}
}
