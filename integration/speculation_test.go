package integration

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/batchwork/batchwork/internal/faults"
	"github.com/batchwork/batchwork/shared/batchwork"
	"github.com/batchwork/batchwork/shared/control"
	"github.com/batchwork/batchwork/shared/domain"
	sm "github.com/batchwork/batchwork/statemachine"
)

// Speculative execution (issue 13.5) on the emulator. The tests drive the
// control plane by hand with a test clock: claims, commits and failures
// are the executors' calls, and the sweep, run explicitly, launches the
// copies.

// specJob is a one-stage job of n tasks that speculates with maxCopies.
func specJob(name string, n, maxCopies int) string {
	return fmt.Sprintf(`{"name":%q,"lease":"10m","stages":[{"name":"s","task":"work","partitions":{"count":%d},
		"speculation":{"quantile":0.75,"multiplier":1.5,"maxCopies":%d}}]}`, name, n, maxCopies)
}

// speculationRig is a sweep rig with a job whose tasks are all claimed.
type speculationRig struct {
	*sweepRig
	job    string
	claims []control.Claim
}

func newSpeculationRig(t *testing.T, n, maxCopies int) *speculationRig {
	t.Helper()
	r := &speculationRig{sweepRig: newSweepRig(t, testTimings)}
	r.job = submitTo(t, r.svc, "spec", specJob("spec", n, maxCopies))
	for p := range n {
		r.claims = append(r.claims, mustClaim(t, r.svc, domain.TaskRef{Job: r.job, Partition: p}))
	}
	return r
}

// commitAfter commits the claims of partitions ps, each with one output
// naming its attempt, d after they were claimed (the clock moves on).
func (r *speculationRig) commit(t *testing.T, c control.Claim) {
	t.Helper()
	putOutput(t, r.e, c, fmt.Sprintf("attempt %d\n", c.Task.Attempt))
	if err := r.svc.Commit(context.Background(), c, control.CommitResult{Outputs: 1}); err != nil {
		t.Fatalf("commit %s attempt %d: %v", c.Task.Ref, c.Task.Attempt, err)
	}
}

// straggle commits all but the last `slow` tasks after 10 s, then lets
// the rest run to 30 s (3x the median) and sweeps.
func (r *speculationRig) straggle(t *testing.T, slow int) control.SweepCounts {
	t.Helper()
	r.clk.Advance(10 * time.Second)
	for _, c := range r.claims[:len(r.claims)-slow] {
		r.commit(t, c)
	}
	r.clk.Advance(20 * time.Second)
	return mustSweep(t, r.svc)
}

// copyMessages counts the copy messages on the ready queue (and hides
// them for a minute).
func (r *speculationRig) copyMessages(t *testing.T) []string {
	t.Helper()
	var out []string
	for _, m := range receiveVisible(t, r.e, r.e.r.Resources.Queues.Normal) {
		if strings.HasSuffix(m.Body, domain.CopyMarker) {
			out = append(out, m.Body)
		}
	}
	return out
}

func (r *speculationRig) claimCopy(t *testing.T, p int) control.Claim {
	t.Helper()
	c, err := r.svc.ClaimCopy(context.Background(), domain.TaskRef{Job: r.job, Partition: p})
	if err != nil {
		t.Fatalf("claim copy of %d: %v", p, err)
	}
	if !c.Speculative {
		t.Fatalf("copy claim of %d is not speculative", p)
	}
	return c
}

func (r *speculationRig) task(t *testing.T, p int) domain.Task {
	t.Helper()
	task, err := r.e.r.Store.TaskGet(context.Background(), domain.TaskRef{Job: r.job, Partition: p})
	if err != nil {
		t.Fatal(err)
	}
	return task
}

// attemptEnd is the recorded end of attempt a of partition p ("" if none).
func (r *speculationRig) attemptEnd(t *testing.T, p, a int) domain.AttemptEndKind {
	t.Helper()
	ends, err := r.e.r.Store.AttemptEnds(context.Background(), r.job, 0, p, p)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ends {
		if e.Attempt == a {
			return e.Kind
		}
	}
	return ""
}

// assertCountedOnce checks that the stage of n tasks counted each once.
func (r *speculationRig) assertCountedOnce(t *testing.T, n int) {
	t.Helper()
	ctx := context.Background()
	st, err := r.e.r.Store.StageGet(ctx, r.job, 0)
	if err != nil {
		t.Fatal(err)
	}
	p, err := r.e.r.Store.StageProgress(ctx, st)
	if err != nil {
		t.Fatal(err)
	}
	if st.State != sm.StageCompleted || p.Committed != n || p.Left != 0 {
		t.Fatalf("stage %s, progress %+v; want COMPLETED with %d tasks each counted once", st.State, p, n)
	}
}

// The job's manifest must name the winner's outputs only.
func (r *speculationRig) assertManifestAttempt(t *testing.T, p, attempt int) {
	t.Helper()
	out, err := r.svc.Outputs(context.Background(), control.OutputsRequest{Owner: "tester", ID: r.job})
	if err != nil {
		t.Fatal(err)
	}
	if !out.Complete {
		t.Fatalf("outputs of job %s not complete: %+v", r.job, out)
	}
	for _, o := range out.Outputs {
		if o.Partition == p && o.Attempt != attempt {
			t.Fatalf("manifest names attempt %d of partition %d, want %d: %+v", o.Attempt, p, attempt, o)
		}
	}
}

// (1) A straggler gets a copy; the copy commits first; the job succeeds
// with the copy's outputs; the straggler's late commit is refused.
func TestSpeculativeCopyCommitsFirst(t *testing.T) {
	t.Parallel()
	r := newSpeculationRig(t, 4, 16)
	ctx := context.Background()
	if c := r.straggle(t, 1); c.Speculated != 1 {
		t.Fatalf("sweep launched %d copies, want 1 (counts %+v)", c.Speculated, c)
	}
	if got := r.copyMessages(t); len(got) != 1 || got[0] != fmt.Sprintf("%s/0/3%s", r.job, domain.CopyMarker) {
		t.Fatalf("copy messages %v, want one for partition 3", got)
	}
	if c := mustSweep(t, r.svc); c.Speculated != 0 {
		t.Fatalf("a second sweep launched %d more copies", c.Speculated)
	}
	orig := r.claims[3]
	cp := r.claimCopy(t, 3)
	if cp.Task.Attempt != 2 || cp.Task.Token == orig.Task.Token {
		t.Fatalf("copy is attempt %d (token shared: %v), want attempt 2 with its own token", cp.Task.Attempt, cp.Task.Token == orig.Task.Token)
	}
	// A second delivery of the copy message finds the copy taken.
	if _, err := r.svc.ClaimCopy(ctx, cp.Task.Ref); !errors.Is(err, domain.ErrAlreadyDone) {
		t.Fatalf("second copy claim: %v, want ErrAlreadyDone", err)
	}
	// Both claims live: both heartbeat.
	if err := r.svc.Heartbeat(ctx, orig); err != nil {
		t.Fatalf("holder heartbeat beside its copy: %v", err)
	}
	if err := r.svc.Heartbeat(ctx, cp); err != nil {
		t.Fatalf("copy heartbeat: %v", err)
	}
	r.commit(t, cp)
	if st := jobState(t, r.svc, r.job); st.State != string(sm.JobSucceeded) {
		t.Fatalf("job %s after the copy's commit, want SUCCEEDED", st.State)
	}
	putOutput(t, r.e, orig, "straggler\n")
	if err := r.svc.Commit(ctx, orig, control.CommitResult{Outputs: 1}); !errors.Is(err, domain.ErrAlreadyDone) {
		t.Fatalf("straggler's late commit: %v, want refused (ErrAlreadyDone)", err)
	}
	if err := r.svc.Heartbeat(ctx, orig); !errors.Is(err, domain.ErrStaleClaim) {
		t.Fatalf("straggler's heartbeat after the copy won: %v, want ErrStaleClaim", err)
	}
	if task := r.task(t, 3); task.CommittedAttempt != 2 || task.Copy.Live() {
		t.Fatalf("task committed attempt %d (copy live %v), want the copy's 2", task.CommittedAttempt, task.Copy.Live())
	}
	r.assertManifestAttempt(t, 3, 2)
	r.assertCountedOnce(t, 4)
	if k := r.attemptEnd(t, 3, 1); k != control.AttemptSpeculationLost {
		t.Fatalf("straggler's attempt end %q, want %q", k, control.AttemptSpeculationLost)
	}
}

// (2) The original commits first: the copy is fenced.
func TestSpeculativeCopyFencedWhenOriginalCommitsFirst(t *testing.T) {
	t.Parallel()
	r := newSpeculationRig(t, 4, 16)
	ctx := context.Background()
	r.straggle(t, 1)
	orig, cp := r.claims[3], r.claimCopy(t, 3)
	r.commit(t, orig)
	if err := r.svc.Heartbeat(ctx, cp); !errors.Is(err, domain.ErrStaleClaim) {
		t.Fatalf("copy heartbeat after the original committed: %v, want ErrStaleClaim", err)
	}
	putOutput(t, r.e, cp, "copy\n")
	if err := r.svc.Commit(ctx, cp, control.CommitResult{Outputs: 1}); !errors.Is(err, domain.ErrAlreadyDone) {
		t.Fatalf("copy's late commit: %v, want refused (ErrAlreadyDone)", err)
	}
	if st := jobState(t, r.svc, r.job); st.State != string(sm.JobSucceeded) {
		t.Fatalf("job %s, want SUCCEEDED", st.State)
	}
	r.assertManifestAttempt(t, 3, 1)
	if k := r.attemptEnd(t, 3, 2); k != control.AttemptSpeculationLost {
		t.Fatalf("copy's attempt end %q, want %q", k, control.AttemptSpeculationLost)
	}
}

// (3) One claim fails while the other runs on: the task neither retries
// nor fails, spends no attempt, and succeeds with the other's commit.
func TestSpeculativeFailureBesideLiveCopy(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name       string
		copyFails  bool
		winnerAtt  int
		budgetLeft int // attempts left after the failure: as before the copy
	}{
		{name: "holder fails", copyFails: false, winnerAtt: 2, budgetLeft: 2},
		{name: "copy fails", copyFails: true, winnerAtt: 1, budgetLeft: 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := newSpeculationRig(t, 4, 16)
			ctx := context.Background()
			r.straggle(t, 1)
			orig, cp := r.claims[3], r.claimCopy(t, 3)
			failing, winner := orig, cp
			if tc.copyFails {
				failing, winner = cp, orig
			}
			d, err := r.svc.Fail(ctx, failing, control.FailParams{Cause: "boom", Class: domain.ClassError})
			if err != nil || d.Retry {
				t.Fatalf("failure beside a live claim: %+v, %v; want no retry, no error", d, err)
			}
			task := r.task(t, 3)
			if task.State != sm.TaskClaimed || task.Copy.Live() {
				t.Fatalf("task %s (copy live %v) after the failure, want CLAIMED by one claim", task.State, task.Copy.Live())
			}
			if left := task.MaxAttempts - task.Attempt; left != tc.budgetLeft {
				t.Fatalf("%d attempts left after the failure (attempt %d of %d), want %d", left, task.Attempt, task.MaxAttempts, tc.budgetLeft)
			}
			// The failed claim is fenced; the other beats and commits.
			if err := r.svc.Heartbeat(ctx, failing); !errors.Is(err, domain.ErrStaleClaim) {
				t.Fatalf("failed claim's heartbeat: %v, want ErrStaleClaim", err)
			}
			if err := r.svc.Heartbeat(ctx, winner); err != nil {
				t.Fatalf("surviving claim's heartbeat: %v", err)
			}
			r.commit(t, winner)
			if st := jobState(t, r.svc, r.job); st.State != string(sm.JobSucceeded) {
				t.Fatalf("job %s, want SUCCEEDED", st.State)
			}
			r.assertManifestAttempt(t, 3, tc.winnerAtt)
			if k := r.attemptEnd(t, 3, failing.Task.Attempt); k != control.AttemptFailedBesideCopy {
				t.Fatalf("failed claim's attempt end %q, want %q", k, control.AttemptFailedBesideCopy)
			}
		})
	}
}

// (4) At most maxCopies copies of a stage run at once; a copy that ends
// frees its place, and a task is copied only once.
func TestSpeculationRespectsMaxCopies(t *testing.T) {
	t.Parallel()
	r := newSpeculationRig(t, 12, 2)
	ctx := context.Background()
	if c := r.straggle(t, 3); c.Speculated != 2 {
		t.Fatalf("first sweep launched %d copies, want maxCopies 2", c.Speculated)
	}
	r.clk.Advance(time.Second)
	if c := mustSweep(t, r.svc); c.Speculated != 0 {
		t.Fatalf("sweep at the cap launched %d copies", c.Speculated)
	}
	var copied []int
	for p := 9; p < 12; p++ {
		if r.task(t, p).Copy != nil {
			copied = append(copied, p)
		}
	}
	if len(copied) != 2 {
		t.Fatalf("%d tasks copied, want 2", len(copied))
	}
	cp := r.claimCopy(t, copied[0])
	if _, err := r.svc.Fail(ctx, cp, control.FailParams{Cause: "copy failed"}); err != nil {
		t.Fatal(err)
	}
	r.clk.Advance(time.Second)
	if c := mustSweep(t, r.svc); c.Speculated != 1 {
		t.Fatalf("sweep after a copy ended launched %d copies, want 1", c.Speculated)
	}
	r.clk.Advance(time.Second)
	if c := mustSweep(t, r.svc); c.Speculated != 0 {
		t.Fatalf("sweep launched %d more copies; each of the 3 stragglers is copied at most once and 2 run", c.Speculated)
	}
	n := 0
	for p := 9; p < 12; p++ {
		if r.task(t, p).Copy != nil {
			n++
		}
	}
	if n != 3 {
		t.Fatalf("%d tasks copied, want 3", n)
	}
}

// A stage without speculation, or before its quantile committed, gets no
// copies.
func TestNoSpeculationBeforeQuantileOrWithoutSpec(t *testing.T) {
	t.Parallel()
	r := newSpeculationRig(t, 4, 16)
	if c := r.straggle(t, 2); c.Speculated != 0 { // 2 of 4 < 75%
		t.Fatalf("launched %d copies with half the stage committed", c.Speculated)
	}
	plain := newSweepRig(t, testTimings)
	id := submitTo(t, plain.svc, "plain", `{"name":"plain","lease":"10m","stages":[{"name":"s","task":"work","partitions":{"count":4}}]}`)
	var claims []control.Claim
	for p := range 4 {
		claims = append(claims, mustClaim(t, plain.svc, domain.TaskRef{Job: id, Partition: p}))
	}
	plain.clk.Advance(10 * time.Second)
	for _, c := range claims[:3] {
		putOutput(t, plain.e, c, "x\n")
		if err := plain.svc.Commit(context.Background(), c, control.CommitResult{Outputs: 1}); err != nil {
			t.Fatal(err)
		}
	}
	plain.clk.Advance(time.Minute)
	if c := mustSweep(t, plain.svc); c.Speculated != 0 {
		t.Fatalf("launched %d copies in a stage without speculation", c.Speculated)
	}
}

// (5) Under lost responses and transaction conflicts, duplicate copy
// deliveries and racing commits of both claims: no task ever has more
// than two attempts live (one copy claim granted per task, attempt
// numbers 1 and 2 only), one commit wins per task, and the stage counts
// each task once and completes once.
func TestSpeculationUnderFaults(t *testing.T) {
	t.Parallel()
	inj := faults.New(13)
	inj.SetEnabled(false)
	e := newEnv(t, batchwork.NewRegistry(), envOptions{noRun: true, faults: inj})
	clk, logs := newTestClock(), newLogCounter()
	svc := newService(e, testTimings, e.r.Store, e.r.Queue, clk, logs.logger())
	ctx := context.Background()
	const n, slow = 8, 2
	job := submitTo(t, svc, "faulty", specJob("faulty", n, n))
	var claims []control.Claim
	for p := range n {
		claims = append(claims, mustClaim(t, svc, domain.TaskRef{Job: job, Partition: p}))
		putOutput(t, e, claims[p], "original\n")
	}
	inj.Add(
		faults.Rule{Service: "DynamoDB", Operation: "UpdateItem", Kind: faults.Lost, Rate: 0.2},
		faults.Rule{Service: "DynamoDB", Operation: "TransactWriteItems", Kind: faults.Lost, Rate: 0.2},
		faults.Rule{Service: "DynamoDB", Operation: "TransactWriteItems", Kind: faults.Conflict, Rate: 0.1},
	)
	inj.SetEnabled(true)
	// An executor repeats a call that failed for want of an answer; an
	// outcome (refused, done) ends it.
	persist := func(f func() error) error {
		var err error
		for range 10 {
			if err = f(); err == nil || errors.Is(err, domain.ErrStaleClaim) || errors.Is(err, domain.ErrAlreadyDone) {
				return err
			}
		}
		return err
	}
	clk.Advance(10 * time.Second)
	for _, c := range claims[:n-slow] {
		if err := persist(func() error { return svc.Commit(ctx, c, control.CommitResult{Outputs: 1}) }); err != nil {
			t.Fatalf("commit %s: %v", c.Task.Ref, err)
		}
	}
	clk.Advance(20 * time.Second)
	launched := 0
	for try := 0; launched < slow && try < 10; try++ {
		c, _ := svc.Sweep(ctx) // a failed step is repeated by the next run
		launched += c.Speculated
		clk.Advance(time.Second)
	}
	if launched != slow {
		t.Fatalf("sweeps launched %d copies, want %d", launched, slow)
	}
	type result struct {
		c   control.Claim
		err error
	}
	for p := n - slow; p < n; p++ {
		ref := domain.TaskRef{Job: job, Partition: p}
		// Two deliveries of the copy's message at once.
		got := make(chan result, 2)
		for range 2 {
			go func() {
				var r result
				r.err = persist(func() error {
					var err error
					r.c, err = svc.ClaimCopy(ctx, ref)
					return err
				})
				got <- r
			}()
		}
		var copies []control.Claim
		for range 2 {
			r := <-got
			switch {
			case r.err == nil:
				copies = append(copies, r.c)
			case !errors.Is(r.err, domain.ErrAlreadyDone):
				t.Fatalf("copy claim of %s: %v", ref, r.err)
			}
		}
		if len(copies) != 1 || copies[0].Task.Attempt != 2 {
			t.Fatalf("%d copy claims granted for %s (%+v), want one, attempt 2", len(copies), ref, copies)
		}
		putOutput(t, e, copies[0], "copy\n")
		// Both claims commit at once.
		wins := make(chan error, 2)
		for _, c := range []control.Claim{claims[p], copies[0]} {
			go func() { wins <- persist(func() error { return svc.Commit(ctx, c, control.CommitResult{Outputs: 1}) }) }()
		}
		won := 0
		for range 2 {
			switch err := <-wins; {
			case err == nil:
				won++
			case !errors.Is(err, domain.ErrAlreadyDone) && !errors.Is(err, domain.ErrStaleClaim):
				t.Fatalf("commit of %s: %v", ref, err)
			}
		}
		if won != 1 {
			t.Fatalf("%d commits of %s won, want exactly 1", won, ref)
		}
	}
	inj.SetEnabled(false)
	for p := range n {
		task, err := e.r.Store.TaskGet(ctx, domain.TaskRef{Job: job, Partition: p})
		if err != nil {
			t.Fatal(err)
		}
		if task.State != sm.TaskSucceeded || task.Attempt > 2 || task.Copy.Live() {
			t.Fatalf("task %d: %s attempt %d copy live %v; want SUCCEEDED within 2 attempts", p, task.State, task.Attempt, task.Copy.Live())
		}
	}
	// A committer whose follow-up failed under the faults leaves it to
	// the sweep (after FollowUpGrace).
	for try := 0; jobState(t, svc, job).State == string(sm.JobRunning) && try < 10; try++ {
		clk.Advance(testTimings.CheckEvery + time.Second)
		mustSweep(t, svc)
	}
	if st := jobState(t, svc, job); st.State != string(sm.JobSucceeded) {
		t.Fatalf("job %s, want SUCCEEDED", st.State)
	}
	r := &speculationRig{sweepRig: &sweepRig{e: e, svc: svc, clk: clk, logs: logs}, job: job}
	r.assertCountedOnce(t, n)
	// At most once: a completion whose response was lost finds the stage
	// COMPLETED on its retry and logs nothing (stages.go), so zero logs
	// are possible under these faults; the stage's state and counters
	// above are the proof it completed.
	if c := logs.count("stage completed"); c > 1 {
		t.Fatalf("stage completed %d times, want once", c)
	}
	if inj.Total() == 0 {
		t.Fatal("no faults injected")
	}
}

// End to end with executors and the runner's sweep: a straggler 30x
// slower on its first attempt is copied, the copy (attempt 2) commits,
// the straggler is cancelled, and the job ends long before the
// straggler would have.
func TestSpeculationEndToEnd(t *testing.T) {
	t.Parallel()
	reg := batchwork.NewRegistry()
	reg.Register("straggle", func(ctx context.Context, t *batchwork.Task) error {
		d := time.Second
		if t.Partition == 0 && t.Attempt == 1 {
			d = 30 * time.Second
		}
		select {
		case <-time.After(d):
		case <-ctx.Done():
			return ctx.Err()
		}
		_, err := fmt.Fprintf(t.Out, "attempt %d\n", t.Attempt)
		return err
	})
	e := newEnv(t, reg, envOptions{slots: 12})
	id := e.submit("e2e", []byte(`{"name":"e2e","lease":"1m","stages":[{"name":"s","task":"straggle","partitions":{"count":8},
		"speculation":{"quantile":0.75,"multiplier":1.5}}]}`))
	start := time.Now()
	st := e.waitJob(id, 25*time.Second)
	if st.State != string(sm.JobSucceeded) {
		t.Fatalf("job %s (%s), want SUCCEEDED", st.State, st.Error)
	}
	task, err := e.r.Store.TaskGet(context.Background(), domain.TaskRef{Job: id})
	if err != nil {
		t.Fatal(err)
	}
	if task.CommittedAttempt != 2 || task.Copy == nil {
		t.Fatalf("straggler committed attempt %d (copy %+v), want its copy's, 2", task.CommittedAttempt, task.Copy)
	}
	t.Logf("job with a 30s straggler took %s with speculation", time.Since(start).Round(100*time.Millisecond))
}
