package integration

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/batchwork/batchwork/internal/executor"
	"github.com/batchwork/batchwork/internal/executor/feed"
	"github.com/batchwork/batchwork/internal/faults"
	"github.com/batchwork/batchwork/shared/batchwork"
	"github.com/batchwork/batchwork/shared/blob"
	"github.com/batchwork/batchwork/shared/control"
	"github.com/batchwork/batchwork/shared/domain"
	"github.com/batchwork/batchwork/shared/spec"
	"github.com/batchwork/batchwork/shared/tuning"
	sm "github.com/batchwork/batchwork/statemachine"
)

// Review of checkpoints (session 8).

// A checkpoint whose offset lies past the input the task has read (past
// its end, or any offset of a task without input) is refused when it is
// made, with an error naming the offset, and nothing is recorded: were it
// recorded, every later attempt would resume from it, fail to skip that
// far ("input ends at"), and the task would spend all its attempts on a
// checkpoint no attempt can use. An offset within what was read is
// saved as before.
func TestCheckpointPastInputReadIsRefused(t *testing.T) {
	t.Parallel()
	data := ckptInput(40)
	var mu sync.Mutex
	got := map[string]error{} // job name -> the far checkpoint's error
	reg := batchwork.NewRegistry()
	reg.Register("far", func(ctx context.Context, t *batchwork.Task) error {
		t.Resume()
		var far int64 = 5 // a task without input: any offset but 0
		read := int64(0)
		if t.Input != nil {
			// Read 100 bytes; the checkpoint claims the whole input and
			// more.
			n, err := io.CopyN(io.Discard, t.Input, 100)
			if err != nil {
				return err
			}
			read = n
			far = int64(len(data)) + 1000
		}
		err := t.Checkpoint(ctx, far, []byte("s"))
		mu.Lock()
		got[t.Stage] = err
		mu.Unlock()
		if read > 0 {
			// Within what was read: saved.
			if err := t.Checkpoint(ctx, read, []byte("s")); err != nil {
				return fmt.Errorf("checkpoint within what was read: %w", err)
			}
			_, err := io.Copy(io.Discard, t.Input)
			return err
		}
		return nil
	})
	e := newEnv(t, reg, envOptions{noRun: true})
	in := e.putInput("tester", "ckpt/far/in.txt", data)
	id := e.submit("far", []byte(fmt.Sprintf(`{"name":"far","retry":{"maxAttempts":2,"backoff":"1ms"},"stages":[
	  {"name":"input","task":"far","partitions":{"input":{"prefix":%q}}},
	  {"name":"params","task":"far","partitions":{"count":1}}]}`, in)))
	run := &executor.Runner{CP: e.r.Service, Blob: e.r.Blob, Registry: executor.PublicRegistry(reg), Log: newLogCounter().logger()}
	work(t, e, run)
	for _, stage := range []string{"input", "params"} {
		mu.Lock()
		err := got[stage]
		mu.Unlock()
		if !errors.Is(err, domain.ErrCheckpoint) || !strings.Contains(err.Error(), "offset") {
			t.Errorf("stage %s: a checkpoint past the input read: %v, want it refused (ErrCheckpoint) naming the offset", stage, err)
		}
	}
	wantSucceeded(t, e.r.Service, id)
	ctx := context.Background()
	for idx, want := range []int64{100, 0} {
		task, err := e.r.Store.TaskGet(ctx, domain.TaskRef{Job: id, Stage: idx, Partition: 0})
		if err != nil {
			t.Fatal(err)
		}
		if task.CommittedAttempt != 1 {
			t.Errorf("stage %d committed attempt %d, want 1", idx, task.CommittedAttempt)
		}
		if task.Checkpoint.Offset != want {
			t.Errorf("stage %d's task points at a checkpoint at offset %d, want %d", idx, task.Checkpoint.Offset, want)
		}
	}
}

// A continuation whose response is lost (the write applied, the SDK's
// retry finds the task READY): the caller recognises its own write, as
// commits do, instead of taking it for a lost claim. Taken for a lost
// claim, the executor leaves the message, sends no fresh one, frees no
// concurrency slot and records no history: the task waits for the sweep
// (StuckAfter) with nothing saying it continued. The retry spends no
// continuation twice: the count is 1, under the cap.
func TestContinueLostResponseIsRecognised(t *testing.T) {
	t.Parallel()
	inj := faults.New(8)
	e := newEnv(t, batchwork.NewRegistry(), envOptions{noRun: true, faults: inj})
	ctx := context.Background()
	id := e.submit("lost-continue", []byte(`{"name":"lc","retry":{"maxAttempts":1},"stages":[{"name":"s","task":"x","partitions":{"count":1}}]}`))
	ref := domain.TaskRef{Job: id, Partition: 0}
	c := mustClaim(t, e.r.Service, ref)
	if err := e.r.Service.Checkpoint(ctx, c, 1, 0); err != nil {
		t.Fatal(err)
	}
	inj.Once(faults.Rule{Service: "DynamoDB", Operation: "UpdateItem", Kind: faults.Lost, Match: func(op string, in any) bool {
		u, ok := in.(*dynamodb.UpdateItemInput)
		return ok && strings.Contains(aws.ToString(u.UpdateExpression), "ADD kc")
	}})
	if _, err := e.r.Service.Continue(ctx, c, 0); err != nil {
		t.Fatalf("continue whose response was lost: %v, want its own write recognised", err)
	}
	if inj.Total() != 1 {
		t.Fatalf("%d faults injected, want the continuation's one", inj.Total())
	}
	task, err := e.r.Store.TaskGet(ctx, ref)
	if err != nil {
		t.Fatal(err)
	}
	if task.State != sm.TaskReady || task.Checkpoint.Continuations != 1 || task.MaxAttempts != c.Task.MaxAttempts+1 {
		t.Fatalf("task %s, %d continuations, max attempts %d; want READY, 1, %d", task.State, task.Checkpoint.Continuations, task.MaxAttempts, c.Task.MaxAttempts+1)
	}
	if !timelineHas(t, e, id, "task.continued", "continued in a new invocation") {
		t.Fatal("history does not say the task continued")
	}
}

// A checkpoint record is read back only as the task's pointer names it
// (attempt, seq, offset), and names only segments under the task's own
// checkpoint prefix. Its key is predictable, and whoever may write the
// job area first (a lambda stage's function writes its checkpoint
// outputs beside it, before the executor writes the record, whose
// If-None-Match refusal the executor takes as its own earlier write)
// could otherwise list any key as a segment: the resumed attempt would
// copy it, with the executor's read access, into the job's outputs (here
// another owner's input).
func TestResumeReadsOnlyTheTasksOwnSegments(t *testing.T) {
	t.Parallel()
	reg := batchwork.NewRegistry()
	reg.Register("copy", func(ctx context.Context, t *batchwork.Task) error {
		t.Resume()
		_, err := io.Copy(t.Out, t.Input)
		return err
	})
	e := newEnv(t, reg, envOptions{noRun: true})
	ctx := context.Background()
	secret := []byte("another owner's secret\n")
	other := e.putInput("other", "review8/secret.txt", secret)
	_, otherKey, err := spec.ParseS3URI(other)
	if err != nil {
		t.Fatal(err)
	}
	in := e.putInput("tester", "review8/forge/in.txt", []byte("line 1\nline 2\n"))
	id := e.submit("forge", []byte(fmt.Sprintf(`{"name":"forge","retry":{"maxAttempts":2,"backoff":"1ms"},
	  "stages":[{"name":"m","task":"copy","partitions":{"input":{"prefix":%q}}}]}`, in)))
	ref := domain.TaskRef{Job: id, Partition: 0}
	c := mustClaim(t, e.r.Service, ref)
	for _, tc := range []struct {
		seq int
		rec domain.Checkpoint
	}{
		// A record naming a key outside the task's checkpoints.
		{1, domain.Checkpoint{Attempt: 1, Seq: 1, Outputs: []domain.CheckpointOutput{{Segments: []string{otherKey}, Size: int64(len(secret)), Lines: 1, Last: '\n'}}}},
	} {
		body, err := json.Marshal(tc.rec)
		if err != nil {
			t.Fatal(err)
		}
		if err := e.r.Blob.PutIfAbsent(ctx, blob.CheckpointKey(id, "m", 0, 1, tc.seq), body); err != nil {
			t.Fatal(err)
		}
		if err := e.r.Service.Checkpoint(ctx, c, tc.seq, tc.rec.Offset); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := e.r.Service.Fail(ctx, c, control.FailParams{Cause: "injected failure after a forged checkpoint"}); err != nil {
		t.Fatal(err)
	}
	run := &executor.Runner{CP: e.r.Service, Blob: e.r.Blob, Registry: executor.PublicRegistry(reg), Log: newLogCounter().logger()}
	work(t, e, run)
	task, err := e.r.Store.TaskGet(ctx, ref)
	if err != nil {
		t.Fatal(err)
	}
	if task.State == sm.TaskSucceeded {
		out, _ := e.r.Blob.Get(ctx, blob.OutputKey(id, "m", 0, task.CommittedAttempt, 0))
		t.Fatalf("the task committed from a record naming another owner's object; its output: %q", out)
	}
	if !strings.Contains(task.LastError, "segment") {
		t.Fatalf("task %s with error %q, want it failed naming the foreign segment", task.State, task.LastError)
	}
}

// noJobWatch is the control plane without its job-state checks, so a
// task of a deleted job runs on until its next checkpoint, as one does
// within the checks' interval (two JobStateTTLs) on any executor.
type noJobWatch struct{ *control.Service }

func (noJobWatch) JobStateTTL() time.Duration { return 0 }

// A checkpoint refused because the attempt lost its claim leaves nothing
// behind that nothing will ever read or delete: the record and segments
// it wrote before the refusal are tagged for the bucket's expiry rule,
// as an uncommitted attempt's outputs are. Here the job was deleted
// while the task ran: its data was deleted, and the late checkpoint's
// objects, written after, would otherwise stay for ever. The checkpoint
// the task's pointer named before (not here: the job is gone) is never
// tagged by this (TestFencedCheckpointObjectsTagged).
func TestLateCheckpointAfterJobDeletionIsTagged(t *testing.T) {
	t.Parallel()
	saved, goOn, refused := make(chan struct{}), make(chan struct{}), make(chan error, 1)
	reg := batchwork.NewRegistry()
	reg.Register("late", func(ctx context.Context, t *batchwork.Task) error {
		t.Resume()
		fmt.Fprintf(t.Out, "before\n")
		if err := t.Checkpoint(ctx, 0, []byte("1")); err != nil {
			return err
		}
		close(saved)
		<-goOn
		fmt.Fprintf(t.Out, "after the job was deleted\n")
		err := t.Checkpoint(ctx, 0, []byte("2"))
		refused <- err
		return err
	})
	e := newEnv(t, reg, envOptions{noRun: true})
	ctx := context.Background()
	id := e.submit("late-ckpt", []byte(`{"name":"late","stages":[{"name":"s","task":"late","partitions":{"count":1}}]}`))
	msgs := receiveVisible(t, e, e.r.Resources.Queues.Normal)
	if len(msgs) != 1 {
		t.Fatalf("%d messages, want the task's one", len(msgs))
	}
	run := &executor.Runner{CP: noJobWatch{e.r.Service}, Blob: e.r.Blob, Registry: executor.PublicRegistry(reg),
		Log: newLogCounter().logger(), HeartbeatEvery: time.Hour}
	res := make(chan feed.Result, 1)
	go func() { res <- run.Handle(ctx, feed.Delivery{Body: msgs[0].Body, SentAt: msgs[0].SentAt}, nil) }()
	<-saved
	if _, err := e.r.Service.Cancel(ctx, "tester", id); err != nil {
		t.Fatal(err)
	}
	for i := 0; ; i++ {
		d, err := e.r.Service.DeleteJob(ctx, "tester", id)
		if err != nil {
			t.Fatalf("delete: %v", err)
		}
		if d.Complete {
			break
		}
		if i == 10 {
			t.Fatal("deletion not complete after 10 calls")
		}
	}
	close(goOn)
	if err := <-refused; !errors.Is(err, domain.ErrStaleClaim) {
		t.Fatalf("checkpoint after the job's deletion: %v, want a stale claim", err)
	}
	<-res
	left, err := e.r.Blob.List(ctx, e.r.Resources.Bucket, blob.JobPrefix(id))
	if err != nil {
		t.Fatal(err)
	}
	if len(left) == 0 {
		t.Fatal("the late checkpoint wrote nothing: the test proves nothing")
	}
	for _, o := range left {
		if got := objectTags(t, e, o.Key)[tuning.UncommittedTagKey]; got != tuning.UncommittedTagValue {
			t.Errorf("%s, written after the job's deletion: tag %q, want it marked for expiry", o.Key, got)
		}
	}
}

// After a checkpoint is refused for a lost claim, the objects it wrote
// are tagged for expiry, and those the task's pointer names never are:
// seq 2 of attempt 1 (refused, never named) is tagged; seq 1 (named, and
// resumed from by the next attempt) is not, nor is a refused seq whose
// write had applied before the claim was lost (the pointer names it).
func TestFencedCheckpointObjectsTagged(t *testing.T) {
	t.Parallel()
	e := newEnv(t, batchwork.NewRegistry(), envOptions{noRun: true})
	ctx := context.Background()
	id := e.submit("fenced-tags", []byte(`{"name":"ft","retry":{"maxAttempts":3,"backoff":"1ms"},"stages":[{"name":"s","task":"x","partitions":{"count":1}}]}`))
	ref := domain.TaskRef{Job: id, Partition: 0}
	c := mustClaim(t, e.r.Service, ref)
	objs := func(seq int) []string {
		return []string{blob.CheckpointKey(id, "s", 0, 1, seq), blob.SegmentKey(id, "s", 0, 1, seq, 0)}
	}
	for seq := 1; seq <= 2; seq++ {
		for _, k := range objs(seq) {
			if err := e.r.Blob.PutIfAbsent(ctx, k, []byte("x")); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := e.r.Service.Checkpoint(ctx, c, 1, 0); err != nil {
		t.Fatal(err)
	}
	if _, err := e.r.Service.Fail(ctx, c, control.FailParams{Cause: "lost"}); err != nil {
		t.Fatal(err)
	}
	if c2 := mustClaim(t, e.r.Service, ref); c2.Task.Attempt != 2 {
		t.Fatalf("next claim is attempt %d, want 2", c2.Task.Attempt)
	}
	e.r.Service.CheckpointRefused(ctx, c, 1) // applied before the claim was lost
	e.r.Service.CheckpointRefused(ctx, c, 2)
	for seq, want := range map[int]string{1: "", 2: tuning.UncommittedTagValue} {
		for _, k := range objs(seq) {
			if got := objectTags(t, e, k)[tuning.UncommittedTagKey]; got != want {
				t.Errorf("%s: tag %q, want %q", k, got, want)
			}
		}
	}
}
