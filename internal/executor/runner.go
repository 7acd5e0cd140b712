package executor

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"time"

	"github.com/batchwork/batchwork/internal/executor/feed"
	"github.com/batchwork/batchwork/internal/executor/later"
	"github.com/batchwork/batchwork/internal/executor/output"
	"github.com/batchwork/batchwork/internal/executor/rangeshuffle"
	"github.com/batchwork/batchwork/internal/executor/tagged"
	"github.com/batchwork/batchwork/shared/blob"
	"github.com/batchwork/batchwork/shared/control"
	"github.com/batchwork/batchwork/shared/cost/meter"
	"github.com/batchwork/batchwork/shared/domain"
	"github.com/batchwork/batchwork/shared/lambdatask"
	"github.com/batchwork/batchwork/shared/spec"
	"github.com/batchwork/batchwork/shared/tracing"
	"github.com/batchwork/batchwork/shared/tuning"
	sm "github.com/batchwork/batchwork/statemachine"
)

// Runner handles one task message end to end.
type Runner struct {
	CP       ControlPlane
	Blob     Blob
	Registry *Registry
	Log      *slog.Logger
	// HeartbeatEvery overrides lease/3 (tests).
	HeartbeatEvery time.Duration
	// OnClaim, when set, is called after a claim is granted with the time
	// the message was sent (tests and benchmarks measure ready-to-claimed
	// latency with it).
	OnClaim func(c control.Claim, sentAt time.Time)
	// MaxOutputBytes overrides tuning.MaxTaskOutput (tests).
	MaxOutputBytes int64
	// ExecDir is the directory of programs exec stages may run (execstage);
	// empty: this host runs no exec stages. Set by the long-polling host
	// (execstage.ExecDirFromEnv), never on Lambda.
	ExecDir string
	// Lambda invokes lambda stages' functions (lambdatask.go); nil: this
	// host runs no lambda stages.
	Lambda lambdatask.Invoker
	// TimeoutGrace overrides DefaultTimeoutGrace (tests): how long a
	// timed-out task function may take to return (timeout.go).
	TimeoutGrace time.Duration
	// Memory is this executor's size (procmem.EnvExecutorMemory): it runs only
	// tasks that need that size, handing others back (memory.go). 0: any.
	Memory spec.Size
	// MemoryLimit, when set, is the process's memory (a Lambda function's,
	// procmem.LambdaLimit): near it, the watchdog stops the attempts running
	// as out of memory (memory.go). 0: not watched.
	MemoryLimit spec.Size
	// ExecMemoryDivisor, when set, divides an exec program's memory limit
	// (tests: a limit a test can pass cheaply, which still climbs with
	// the attempt's size; execstage.LimitsOf).
	ExecMemoryDivisor int
	// SplitAfter overrides DefaultSplitAfter (tests): how long an input
	// task of a dynamicSplit stage runs before it offers to split.
	SplitAfter time.Duration

	manifests sync.Map                 // stage manifest key -> *domain.Manifest
	indexes   indexCache               // of indexed shuffle objects read (shuffle.go)
	runHeads  rangeshuffle.HeaderCache // of range shuffles' sorted runs read (rangeinput.go)
	skewPlans sync.Map                 // skew plan key -> skew.Plan (skewinput.go)
}

// Handle runs the task a message names.
func (r *Runner) Handle(ctx context.Context, d feed.Delivery, extend feed.Extender) feed.Result {
	received := time.Now()
	body, isCopy := control.IsCopyMessage(d.Body) // a speculative copy's (speculation.go)
	ref, err := domain.ParseTaskRef(body)
	if err != nil {
		// Not a task message: leave it for the dead-letter queue.
		return feed.Result{Action: feed.Leave, Err: err}
	}
	ctx = meter.WithJob(ctx, ref.Job) // every request for the task is its job's cost
	log := taskLogger(ctx, r.Log, ref)
	if err := r.cannotRun(ctx, ref); err != nil {
		// Unclaimed, so no attempt is spent here: back to the queue for an
		// executor that can run it (exec.go).
		if res, ok := r.forwardWrongSize(ctx, d.Body, err); ok { // sizedqueues.go
			log.Info("forwarded a task of another size to its size's queue", "err", err)
			return res
		}
		log.Info("handing back a task this executor cannot run", "err", err)
		return feed.Result{Action: feed.Hide, Delay: handBackDelay, Err: err}
	}
	claimed := time.Now()
	c, err := r.claim(tracing.WithCarried(ctx, d.Trace), ref, isCopy)
	var held *domain.ClaimHeldError
	var notDue *domain.NotDueError
	switch {
	case errors.As(err, &held):
		// Back just after the claim can be taken over (a margin for the
		// clocks; the time already includes the skew margin).
		return feed.Result{Action: feed.Hide, Delay: time.Until(held.LeaseUntil) + 250*time.Millisecond, Err: err}
	case errors.As(err, &notDue):
		return feed.Result{Action: feed.Hide, Delay: time.Until(notDue.At), Err: err}
	case errors.Is(err, domain.ErrAlreadyDone), errors.Is(err, domain.ErrJobNotRunning):
		return feed.Result{Action: feed.Delete, Err: err}
	case err != nil:
		return feed.Result{Action: feed.Leave, Err: err}
	}
	ctx = traceAttempt(ctx, c, d, received, claimed) // tracehooks.go
	if d.Claimed != nil {
		d.Claimed(ctx)
	}
	if r.OnClaim != nil {
		r.OnClaim(c, d.SentAt)
	}
	log = attemptLogger(log, c.Task.Attempt, c.StageName()) // tasklog.go
	// The message was received with the host's visibility (the queue's, or
	// the poller's), not the stage's lease. Align them now: if this
	// executor dies, the message must return when the lease ends, so the
	// next executor can reclaim at once, and not earlier, when the claim
	// would still be held. A failed extension is not fatal: the lease in
	// the task record is what fences; the message only returns sooner or
	// later than ideal.
	// A host that received with the lease as visibility saves the request.
	if extend != nil && d.Visibility != messageLease(c) {
		if err := extend(ctx, messageLease(c)); err != nil {
			log.Warn("set message visibility to the lease", "err", err)
		}
	}
	return r.run(ctx, c, extend, log)
}

// messageLease is how long a claimed task's message stays hidden when the
// host does not keep it hidden itself: until the claim can be reclaimed,
// which is the lease and the skew margin (sm.LeaseSkew), so the message
// of a dead executor returns when the next claim can succeed.
func messageLease(c control.Claim) time.Duration { return c.Lease + sm.LeaseSkew }

var (
	errGoexit     = errors.New("task function ended its goroutine (runtime.Goexit)")
	errLeaseLost  = errors.New("lease lost")
	errJobStopped = errors.New("job no longer running")
	// errTaskCancelled stops an attempt whose task its owner cancelled as
	// one whose job ended: nothing to commit, the message deleted.
	errTaskCancelled = fmt.Errorf("%w: %w", domain.ErrTaskCancelled, errJobStopped)
)

func (r *Runner) run(ctx context.Context, c control.Claim, extend feed.Extender, log *slog.Logger) feed.Result {
	// The attempt's stage timeout counts from here (timeout.go).
	start := time.Now()
	fn, err := r.taskFunc(c) // a registered function, a program or a Lambda function: exec.go
	if err != nil {
		return r.fail(ctx, c, err, log)
	}
	taskCtx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	hbWait := startHeartbeat(taskCtx, r, c, extend, cancel, log)
	t, closeInput, err := r.prepare(taskCtx, c, log)
	if err != nil {
		cancel(nil)
		hbWait()
		return r.fail(ctx, c, fmt.Errorf("prepare input: %w", err), log)
	}
	// Uploads a failed, fenced or stopped attempt left open are aborted.
	defer t.Out.Abort(ctx, log)
	in := countInput(t)
	r.trackRejects(c, t) // reject.go
	// After the input's wrappers: a resume skips records as read.
	if err := r.startCheckpoints(taskCtx, c, t, cancel, log); err != nil { // checkpoint.go
		closeInput()
		cancel(nil)
		hbWait()
		return r.fail(ctx, c, err, log)
	}
	defer t.ck.armContinue(ctx)()
	stopSplit := r.watchSplit(taskCtx, c, t, cancel, log) // dynsplit.go
	// Under the stage's timeout, if it has one (timeout.go), and the
	// memory watchdog of an executor of a known size (memory.go).
	r.watchMemory(taskCtx, cancel)
	runCtx, span := traceStep(taskCtx, "batchwork.run", c)
	returned := false
	defer func() {
		if returned {
			return
		}
		// The function ended its goroutine (runtime.Goexit, which recover
		// does not stop), and this one ends with it: fail the attempt, or
		// its claim stays live with a live holder and the task is never
		// retried.
		tracing.End(span, errGoexit)
		stopSplit()
		closeInput()
		cancel(nil)
		hbWait()
		r.fail(ctx, c, errGoexit, log)
	}()
	running, runErr := r.callTask(runCtx, cancel, c, start, fn, t)
	returned = true
	tracing.End(span, runErr)
	stopSplit()
	if running != nil {
		// Abandoned (timeout.go), the function may still be reading: its
		// input is closed when it returns, never under it. The attempt
		// fails with the cancel's cause, whatever its input's state.
		input := closeInput
		go func() { <-running; input() }()
		closeInput = func() {}
	} else {
		// A last line written without its newline is a record: an encoded
		// (parquet) output takes it now, so that a rejection of it counts
		// below and its refusal is Refused's, not publish's.
		_ = t.Out.Flush()
		if err := in.Err(); err != nil && runErr == nil {
			runErr = err // the function returned without seeing all its input
		}
		if err := t.Rejects.Err(); err != nil {
			runErr = err // past maxBadRecords: permanent, whatever the function returned
		}
	}
	if err := t.Out.Refused(); err != nil {
		// Whatever the function made of the refusal, its outputs are
		// incomplete: this attempt must not commit.
		runErr = err
	}
	closeInput()
	cause := context.Cause(taskCtx)
	cancel(nil)
	hbWait()
	switch {
	case errors.Is(cause, errLeaseLost):
		log.Warn("lease lost; abandoning attempt")
		return feed.Result{Action: feed.Leave, Err: cause}
	case errors.Is(cause, errJobStopped):
		log.Info("task stopped", "why", cause.Error())
		return feed.Result{Action: feed.Delete, Err: cause}
	case errors.Is(cause, domain.ErrTimedOut), errors.Is(cause, domain.ErrOutOfMemory):
		// Whatever the function returned after the cancel, the attempt
		// ran out its time (or its executor's memory): fail it as such,
		// so it is retried (on a larger executor) and its history says
		// so.
		if errors.Is(runErr, domain.ErrTimedOut) || errors.Is(runErr, domain.ErrOutOfMemory) {
			cause = runErr // says whether the function was abandoned
		}
		log.Warn("task stopped", "err", cause)
		return r.fail(ctx, c, cause, log)
	case errors.Is(cause, domain.ErrContinue) && runErr != nil:
		// Asked to continue in a new invocation (checkpoint.go).
		return r.continueTask(ctx, c, t.ck, runErr, log)
	case runErr != nil:
		return r.fail(ctx, c, runErr, log)
	}
	// Every partition's object is complete before the commit (output.Output.Publish),
	// and so are its rejected records (reject.go).
	outCtx, span := traceStep(ctx, "batchwork.outputs", c)
	err = r.publish(outCtx, c, t) // published.go
	if err == nil {
		err = r.saveRejects(outCtx, c, t)
	}
	if tracing.End(span, err); err != nil {
		if errors.Is(err, domain.ErrPermanent) || errors.Is(err, domain.ErrTooManyBadRecords) {
			// Its retry would publish the same outputs and fail alike.
			return r.fail(ctx, c, err, log)
		}
		return feed.Result{Action: feed.Leave, Err: err}
	}
	commitCtx, span := traceStep(ctx, "batchwork.commit", c)
	err = r.commit(commitCtx, c, t, in)
	tracing.End(span, err)
	switch {
	case err == nil:
		t.ck.expire(ctx) // checkpoint.go
		return feed.Result{Action: feed.Delete}
	case errors.Is(err, domain.ErrTooManyBadRecords):
		// The stage's other tasks used up its maxBadRecords.
		return r.fail(ctx, c, err, log)
	case errors.Is(err, domain.ErrAlreadyDone):
		return feed.Result{Action: feed.Delete, Err: err}
	case errors.Is(err, domain.ErrStaleClaim):
		log.Warn("commit fenced: a newer attempt holds the task", "err", err)
		return feed.Result{Action: feed.Leave, Err: err}
	}
	log.Error("commit", "err", err)
	return feed.Result{Action: feed.Leave, Err: err}
}

func safeCall(ctx context.Context, fn Func, t *Task) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("task panicked: %v", p)
		}
	}()
	return fn(ctx, t)
}

// fail records the attempt's failure with its error's class
// (classOf): a permanent error fails the task at once, others are
// retried while attempts are left (timeout.go).
func (r *Runner) fail(ctx context.Context, c control.Claim, runErr error, log *slog.Logger) feed.Result {
	cause := runErr.Error()
	d, err := r.CP.Fail(ctx, c, control.FailParams{Cause: cause, Class: classOf(runErr)}) // errorclass.go
	switch {
	case errors.Is(err, domain.ErrStaleClaim):
		return feed.Result{Action: feed.Leave, Err: err}
	case err != nil:
		log.Error("record task failure", "err", err)
		return feed.Result{Action: feed.Leave, Err: err}
	case d.Retry && r.forwardRaised(ctx, c.Task.Ref.String(), d.Memory, d.Delay): // sizedqueues.go
		// Its retry runs on a larger executor, which polls another queue.
		return feed.Result{Action: feed.Delete, Err: errors.New(cause)}
	case d.Retry:
		return feed.Result{Action: feed.Hide, Delay: d.Delay, Err: errors.New(cause)}
	}
	return feed.Result{Action: feed.Delete, Err: errors.New(cause)}
}

// startHeartbeat starts the heartbeat, which renews the lease (DynamoDB and
// the message's visibility) every lease/3 until ctx ends, and cancels the task when the lease is lost or
// the job ends.
//
// Its tickers start with the attempt, its goroutine only when the first of
// them is due (internal/executor/later): a shorter attempt starts none.
// The returned func, called once ctx is done, waits for it to end.
func startHeartbeat(ctx context.Context, r *Runner, c control.Claim, extend feed.Extender, cancel context.CancelCauseFunc, log *slog.Logger) func() {
	every := r.HeartbeatEvery
	if every == 0 {
		every = c.Lease / 3
	}
	tick := time.NewTicker(every)
	watch, stopWatch := r.jobWatch(c) // jobwatch.go
	first := every
	if ttl := r.CP.JobStateTTL(); ttl > 0 {
		first = min(first, ttl)
	}
	g := later.Start(first, func() { r.heartbeat(ctx, c, every, tick.C, watch, extend, cancel, log) })
	return func() { g.Wait(); tick.Stop(); stopWatch() }
}

// heartbeat renews the lease every tick. A renewal's requests are not
// cancelled by the attempt's end, which waits for them (hbWait): one cut
// off client-side can still land after the attempt's outcome, a
// ChangeVisibility after a retry's delay stretching it to a whole lease.
// Each keeps ctx's values and deadline, and a bound of one period or
// renewalBound, whichever is less: the end (a timeout's, a continuation's
// margin) waits at most that for a renewal hung on the network.
const renewalBound = 5 * time.Second

func (r *Runner) heartbeat(ctx context.Context, c control.Claim, every time.Duration, tick, watch <-chan time.Time, extend feed.Extender, cancel context.CancelCauseFunc, log *slog.Logger) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-watch:
			if r.jobEnded(ctx, c, cancel, log) {
				return
			}
			continue
		case <-tick:
		}
		if ctx.Err() != nil {
			return // a tick ready beside the end: no renewal after it
		}
		by := time.Now().Add(min(every, renewalBound))
		if d, ok := ctx.Deadline(); ok && d.Before(by) {
			by = d
		}
		rctx, done := context.WithDeadline(context.WithoutCancel(ctx), by)
		err := r.CP.Heartbeat(rctx, c)
		if err == nil && extend != nil {
			if err := extend(rctx, messageLease(c)); err != nil {
				log.Warn("extend visibility", "err", err)
			}
		}
		done()
		switch {
		case errors.Is(err, domain.ErrTaskCancelled):
			cancel(errTaskCancelled)
			return
		case errors.Is(err, domain.ErrStaleClaim):
			cancel(errLeaseLost)
			return
		case errors.Is(err, domain.ErrJobNotRunning):
			cancel(errJobStopped)
			return
		case err != nil:
			log.Warn("heartbeat", "err", err)
		}
	}
}

func (r *Runner) newOutput(parts int) *output.Output {
	return output.New(parts, cmp.Or(r.MaxOutputBytes, tuning.MaxTaskOutput))
}

// prepare builds the task's input and outputs.
func (r *Runner) prepare(ctx context.Context, c control.Claim, log *slog.Logger) (*Task, func(), error) {
	ref := c.Task.Ref
	st := c.Spec.Stages[ref.Stage]
	parts := 1
	if st.Shuffle != nil && !st.Shuffle.Ranged() {
		parts = st.Shuffle.Partitions
	}
	t := &Task{Ref: ref, Stage: st.Name, Attempt: c.Task.Attempt, Out: r.newOutput(parts), Log: log}
	if indexedShuffle(c.Spec, ref.Stage) {
		t.Out.Index() // one PUT for all partitions: shuffle.go
	}
	if st.Shuffle.Ranged() {
		t.Out.Range() // one sorted run: rangeinput.go
	}
	// The key func captures copies of the fields it needs, not the claim
	// and the stage, which would move both to the heap each attempt.
	job, stage, part, attempt := ref.Job, st.Name, ref.Partition, c.Task.Attempt
	t.Out.Bind(ctx, r.Blob, func(p int) string { return blob.OutputKey(job, stage, part, attempt, p) })
	noop := func() {}
	if err := encodeOutput(r.Blob, st, t); err != nil { // parquetstage.go
		return nil, noop, err
	}
	if st.Partitions != nil && ref.Partition < len(st.Partitions.Params) {
		t.Params = st.Partitions.Params[ref.Partition]
	}
	t.RunParams = c.Spec.RunParams()
	if st.Lambda != "" {
		// The function reads its input itself, from the split's range or
		// the shuffle's keys (lambdatask.go): opening it here would be a
		// wasted GET (from the object's start, for a CSV header).
		if c.Task.Input != nil {
			in, err := stageInput(st, *c.Task.Input, t) // stageinput.go
			if err != nil {
				return nil, noop, err
			}
			t.Format = in.Format
		}
		return t, noop, nil
	}
	switch srcs := c.Spec.ShuffleSources(ref.Stage); {
	case len(srcs) > 0:
		// One shuffle's records, or several's tagged (package tagged).
		in, err := tagged.Open(c.Spec, srcs, func(src int) (io.ReadCloser, error) { return reduceInput(ctx, r, c, ref, src) }) // skewinput.go
		if err != nil {
			return nil, noop, err
		}
		t.Input = in
		return t, func() { in.Close() }, nil
	case c.Task.Input != nil:
		in, err := stageInput(st, *c.Task.Input, t)
		if err != nil {
			return nil, noop, err
		}
		t.cut = r.splittable(c, in, *c.Task.Input) // dynsplit.go
		rc, err := r.openInput(ctx, in, *c.Task.Input, t)
		if err != nil {
			return nil, noop, err
		}
		t.Input = rc
		return t, func() { rc.Close() }, nil
	}
	return t, noop, nil
}

// shuffleInput concatenates partition ref.Partition of every committed
// output of the upstream shuffle stage, as listed by its manifest: whole
// objects of the per-part layout, slices of indexed ones (shuffle.go). A
// paged manifest is read one page at a time, keeping only this partition's
// sources, so a reducer holds one page and its own part's sources, never
// the whole list of upstream tasks times parts. Only the manifest object
// is cached: a paged one's is its short index.
func (r *Runner) shuffleInput(ctx context.Context, sp *spec.Job, ref domain.TaskRef, src int) (io.ReadCloser, error) {
	if sp.Stages[src].Shuffle.Ranged() {
		return rangeInput(ctx, r, sp, ref, src) // rangeinput.go
	}
	srcs, err := r.shuffleSources(ctx, sp, ref, src)
	if err != nil {
		return nil, err
	}
	return &shuffleReader{ctx: ctx, blob: r.Blob, part: ref.Partition, readAhead: blob.DefaultShuffleReadAhead, srcs: srcs, cache: &r.indexes}, nil
}

// shuffleKeys lists the objects of shuffleInput for a lambda stage, whose
// function reads whole objects: its upstream writes the per-part layout
// (indexedShuffle), so an indexed object here is an error, not a slice to
// hand over whole.
func (r *Runner) shuffleKeys(ctx context.Context, sp *spec.Job, ref domain.TaskRef, src int) ([]string, error) {
	srcs, err := r.shuffleSources(ctx, sp, ref, src)
	if err != nil {
		return nil, err
	}
	var keys []string
	for _, s := range srcs {
		if s.parts != 0 {
			return nil, fmt.Errorf("%s holds all %d partitions of a map task, indexed; a lambda function reads whole objects", s.key, s.parts)
		}
		keys = append(keys, s.key)
	}
	return keys, nil
}
