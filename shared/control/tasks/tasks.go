package tasks

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/batchwork/batchwork/shared/blob"
	"github.com/batchwork/batchwork/shared/control/kernel"
	"github.com/batchwork/batchwork/shared/control/stages"
	"github.com/batchwork/batchwork/shared/domain"
	"github.com/batchwork/batchwork/shared/dynamo"
	"github.com/batchwork/batchwork/shared/spec"
	"github.com/batchwork/batchwork/shared/tracing"
	"github.com/batchwork/batchwork/shared/tuning"
	sm "github.com/batchwork/batchwork/statemachine"
)

// Claim claims a task for the executor that received its message. Outcomes
// other than a claim: *domain.ClaimHeldError and *domain.NotDueError (keep
// the message hidden until then), domain.ErrAlreadyDone and
// domain.ErrJobNotRunning (drop the message).
//
// A task under a concurrency limit (its job's, its owner's) takes a slot
// under each before the claim (see kernel/limits.go); a task over a limit gets an
// *OverLimitError (ErrOverLimit), which also wraps domain.ErrAlreadyDone
// because a delayed copy of its message replaces it.
func (s *Lifecycle) Claim(ctx context.Context, ref domain.TaskRef) (_ kernel.Claim, err error) {
	meta, err := s.Meta(ctx, ref.Job)
	sp := meta.Spec
	if errors.Is(err, domain.ErrNotFound) {
		return kernel.Claim{}, fmt.Errorf("claim %s: job %w: %w", ref, err, domain.ErrAlreadyDone)
	}
	if err != nil {
		return kernel.Claim{}, fmt.Errorf("claim %s: %w", ref, err)
	}
	if ref.Stage >= len(sp.Stages) {
		return kernel.Claim{}, fmt.Errorf("claim %s: no stage %d: %w", ref, ref.Stage, domain.ErrAlreadyDone)
	}
	lease := time.Duration(sp.StageLease(ref.Stage))
	now := s.Now()
	// Its task may be unwritten (sm.TaskUnwritten), and then the claim
	// writes it. A partition the stage does not have is never written.
	mayWrite := 0
	total, unwritten := stages.UnwrittenTotal(sp, ref.Stage)
	piece, err := skewPiece(ctx, s, sp, ref, total) // skewclaim.go
	if err != nil {
		return kernel.Claim{}, err
	}
	if unwritten && ref.Partition >= 0 && (ref.Partition < total || piece) {
		// Nor is a task of a job this process does not know as RUNNING:
		// only a running job has tasks to write. The sweep ends a
		// cancelled or failed job's unwritten tasks, and a job that
		// ended otherwise may be under deletion, whose pass over its
		// tasks may be behind it: a record written now would outlive the
		// job. The claim itself goes on (a written task is claimed and
		// then cancelled by the check after it, as before): this read
		// may be stale, and a FAILED job may have been redriven since,
		// whose tasks a refusal here must not touch. The state read is
		// the one the check after the claim makes, cached, but a FAILED
		// one is read again at each ask (kernel/jobstate.go): a redriven
		// job reads RUNNING at once.
		state, err := s.CachedJobState(ctx, ref.Job)
		switch {
		case errors.Is(err, domain.ErrNotFound):
			return kernel.Claim{}, fmt.Errorf("claim %s: job %w: %w", ref, err, domain.ErrAlreadyDone)
		case err != nil:
			// Not a refusal: the message comes back and is claimed again.
			return kernel.Claim{}, fmt.Errorf("claim %s: %w", ref, err)
		case state == sm.JobRunning:
			mayWrite = sp.StageRetry(ref.Stage).MaxAttempts
		}
	}
	combine, err := combineGate(ctx, s, sp, ref) // skewclaim.go
	if err != nil {
		return kernel.Claim{}, err
	}
	slots, err := s.Slots.TakeSlots(ctx, ref, meta, now)
	if err != nil {
		return kernel.Claim{}, err
	}
	defer func() {
		if err != nil {
			s.Slots.ReturnSlots(ctx, ref, slots)
		}
	}()
	cp := dynamo.ClaimParams{Ref: ref, Token: kernel.NewToken(), Now: now, Lease: lease, Grace: lease, Executor: kernel.ExecutorOf(ctx), MaxAttempts: mayWrite,
		TraceSpan: tracing.SpanID(tracing.Carried(ctx))} // the message's, for a record this claim writes
	if slots.Any {
		cp.SlotAt = slots.At
	}
	t, err := s.store.TaskClaim(ctx, cp)
	var held *domain.ClaimHeldError
	var prev domain.Task // the claim a takeover replaced, for its attempt's history
	if errors.As(err, &held) && t.Executor != "" && t.Executor != cp.Executor {
		prev = t
		t, err = s.takeOver(ctx, cp, t, err)
	}
	if errors.Is(err, sm.ErrInvalidTransition) {
		// The lease of the last attempt ran out: the executor died or hung.
		reason := fmt.Sprintf("lease expired on attempt %d of %d (executor lost)", t.Attempt, t.MaxAttempts)
		if xerr := s.exhaust(ctx, t, reason); xerr != nil {
			return kernel.Claim{}, xerr
		}
		return kernel.Claim{}, fmt.Errorf("claim %s: %s: %w", ref, reason, domain.ErrAlreadyDone)
	}
	if errors.Is(err, domain.ErrNotFound) {
		return kernel.Claim{}, fmt.Errorf("claim %s: %w: %w", ref, err, domain.ErrAlreadyDone)
	}
	if errors.Is(err, dynamo.ErrCommitted) {
		// A committed task's message came back: its committer may have
		// died before it counted the task, or before the stage's
		// follow-up, as well as before it deleted the message. Doing
		// those here (one read when it was counted and its shard is not
		// empty) saves the stage the wait for the sweep's look.
		if cerr := s.ensureCounted(ctx, ref, &kernel.SweepCounts{}); cerr != nil {
			s.Logger(ref).Warn("count of a committed task", "err", cerr)
		}
	}
	if err != nil {
		return kernel.Claim{}, err
	}
	// Claim first, then check the job, as this process knows it: a job
	// that ended more than JobStateTTL before this claim is seen here, so
	// no task of it starts later than that; one claimed within it is
	// stopped by its runner's job watch (CheckJob). The state is read at
	// most once per TTL per job per process (kernel/jobstate.go), from a small
	// record, never the spec-bearing job item: the claim path has no
	// per-job hot key.
	state, err := s.CachedJobState(ctx, ref.Job)
	if errors.Is(err, domain.ErrNotFound) && cp.MaxAttempts > 0 {
		// The job was deleted since the check above: a first claim may
		// have written its task after the deletion's pass over the
		// job's tasks, and only this claim knows of the record.
		if derr := s.store.TaskForgetClaim(ctx, ref, cp.Token); derr != nil {
			return kernel.Claim{}, fmt.Errorf("claim %s: job %w: %w", ref, err, derr)
		}
		return kernel.Claim{}, fmt.Errorf("claim %s: job %w: %w", ref, err, domain.ErrAlreadyDone)
	}
	if err != nil {
		// The claim stands and its lease runs out; the attempt is lost
		// only if DynamoDB stayed unreadable through every try.
		return kernel.Claim{}, fmt.Errorf("claim %s: %w", ref, err)
	}
	if state != sm.JobRunning {
		return kernel.Claim{}, s.refuseEnded(ctx, ref, sp, state)
	}
	if t.Attempt > 1 {
		// A retry or an expiry recorded how the previous attempt ended
		// before its task could be claimed again; if neither did, this
		// claim took over an expired lease or a dead executor's claim.
		s.NoteAttemptEnd(ctx, ref, t.Attempt-1, domain.AttemptLeaseExpired, "lease expired or executor lost; attempt taken over by another executor", prev)
		s.copies.notePrevHolder(ctx, t, prev) // speculation.go
	}
	if kernel.Logs(ctx, s.Kernel, slog.LevelDebug) { // the logger costs more than the check
		s.TaskLog(ctx, ref, t.Attempt).Debug("task claimed")
	}
	s.Meter().TaskClaimed(s.TaskPriority(ctx, sp, ref)) // kernel/metrics.go
	return kernel.Claim{Task: t, Spec: sp, Lease: lease, Trace: tracing.Join(meta.Trace, t.TraceSpan), Combine: combine}, nil
}

// refuseEnded refuses a claim of a task whose job is in state, not
// RUNNING: the task is cancelled if it has a record to cancel (the
// cancel never writes an unwritten one: the sweep's look at its marker
// ends those), and whatever slots its attempts held are freed.
func (s *Lifecycle) refuseEnded(ctx context.Context, ref domain.TaskRef, sp *spec.Job, state sm.JobState) error {
	if err := kernel.IgnoreInvalid(s.store.TaskSweep(ctx, dynamo.SweepTaskParams{
		Ref: ref, Event: sm.TaskCancel, Now: s.Now(), Err: "job " + string(state),
	})); err != nil {
		return err
	}
	s.Slots.FreeSlots(ctx, ref, sp, time.Time{}) // ended: whatever attempt's
	return fmt.Errorf("claim %s: job is %s: %w", ref, state, domain.ErrJobNotRunning)
}

// takeOver claims a task held by a live-leased claim whose executor died
// (its liveness record lapsed), as a new attempt. A last attempt is left
// to its lease: liveness may speed recovery up, but a slow or partitioned
// executor misjudged dead must never fail a job. While the holder lives,
// it returns held again.
func (s *Lifecycle) takeOver(ctx context.Context, cp dynamo.ClaimParams, t domain.Task, held error) (domain.Task, error) {
	alive, err := s.store.ExecutorAlive(ctx, t.Executor)
	if err != nil {
		return t, held
	}
	view := t.View()
	view.HolderAlive = alive
	if _, err := sm.Decide(view, sm.TaskTakeover, sm.TaskInput{At: cp.Now}); err != nil {
		return t, &domain.ClaimHeldError{LeaseUntil: heldUntil(t, alive, cp.Now)}
	}
	if done, err := s.kills.loseForMemory(ctx, cp.Now, t); done { // oomkill.go
		return t, err
	}
	nt, err := s.store.TaskTakeover(ctx, dynamo.TakeoverParams{ClaimParams: cp, Holder: t})
	if errors.Is(err, sm.ErrInvalidTransition) {
		// The holder renewed, committed, or another executor took over
		// first: look again shortly.
		return t, &domain.ClaimHeldError{LeaseUntil: cp.Now.Add(time.Second)}
	}
	if err != nil {
		return t, err
	}
	s.TaskLog(ctx, t.Ref, t.Attempt).Info("took over the task of a dead executor", "executor", t.Executor)
	return nt, nil
}

// heldUntil is when a message of a task held by a live claim should come
// back. An executor that renewed its promise within the last beat is
// running: the message is a copy (the holder keeps its own hidden), and it
// comes back when the task's lease allows a reclaim. One whose promise is
// about to lapse may be dying: the message may be its own, so it comes
// back just after the promise lapses, for a takeover (or at the lease,
// when that is sooner or the attempt is the last).
func heldUntil(t domain.Task, alive, now time.Time) time.Time {
	lease := t.LeaseUntil.Add(sm.LeaseSkew)
	if alive.Sub(now) > tuning.ExecutorLease-tuning.ExecutorBeat-sm.LivenessSkew || t.Attempt >= t.MaxAttempts {
		return lease
	}
	if soon := alive.Add(sm.LivenessSkew); soon.Before(lease) {
		return soon
	}
	return lease
}

// Heartbeat extends the holder's lease. domain.ErrStaleClaim means the lease
// is lost (with domain.ErrTaskCancelled when the task's owner cancelled
// it); domain.ErrJobNotRunning means the job ended. Either way the
// executor stops the task.
func (s *Lifecycle) Heartbeat(ctx context.Context, c kernel.Claim) error {
	var err error
	if c.Speculative {
		err = s.copies.copyHeartbeat(ctx, c) // speculation.go
	} else {
		err = s.store.TaskHeartbeat(ctx, dynamo.HolderParams{Ref: c.Task.Ref, Token: c.Task.Token, Now: s.Now()}, c.Lease, c.Lease)
	}
	if err != nil {
		s.copies.noteIfLost(ctx, c, err)                         // speculation.go
		return cancelledHeartbeat(ctx, s.store, c.Task.Ref, err) // ownercancel.go
	}
	return s.CheckJob(ctx, c)
}

// ErrOutputsMissing means a commit named outputs that are not in S3.
var ErrOutputsMissing = errors.New("outputs missing")

// CommitResult is what an executor reports when it commits: its output
// count and, where it counted them, the records it read and wrote.
type CommitResult struct {
	Outputs               int
	RecordsIn, RecordsOut int64
	// BadRecords is how many records the attempt rejected: added to its
	// stage's count, within the stage's maxBadRecords (dynamo/badrecords.go).
	BadRecords int64
	// WrittenHere: this process wrote each of outputs 0..Outputs-1 itself,
	// in this attempt, with If-None-Match: * at the attempt's own key, and
	// the put succeeded or answered 412 (the object is there). S3 has then
	// already said they exist, and the commit skips its listing (one
	// ListObjectsV2 per task with output). Only code in this process sets
	// it: a remote executor's commit (RemoteCommitRequest) is not trusted
	// and is always checked against S3.
	WrittenHere bool
}

// Commit makes the holder's attempt authoritative: it checks the attempt's
// outputs exist (unless r.WrittenHere), then commits the task, keeping its
// record counts and summing them on the stage's counters for the job's
// status, and counts its stage down in one transaction, then completes
// the stage if this was its last task. A retry after a lost response
// recognises its own success and finishes the follow-up steps.
func (s *Lifecycle) Commit(ctx context.Context, c kernel.Claim, r CommitResult) error {
	if !r.WrittenHere {
		if err := s.checkOutputs(ctx, c, r.Outputs); err != nil {
			return err
		}
	}
	return s.commit(ctx, c, r)
}

// checkOutputs checks that the attempt's outputs 0..outputs-1 are in S3:
// one listing of the attempt's prefix, none when it has no outputs.
func (s *Lifecycle) checkOutputs(ctx context.Context, c kernel.Claim, outputs int) error {
	if outputs <= 0 {
		return nil
	}
	ref := c.Task.Ref
	name := c.StageName()
	objs, err := s.blob.List(ctx, s.blob.Bucket(), blob.AttemptPrefix(ref.Job, name, ref.Partition, c.Task.Attempt))
	if err != nil {
		return fmt.Errorf("commit %s: %w", ref, err)
	}
	have := make(map[string]bool, len(objs))
	for _, o := range objs {
		have[o.Key] = true
	}
	for r := 0; r < outputs; r++ {
		if k := blob.OutputKey(ref.Job, name, ref.Partition, c.Task.Attempt, r); !have[k] {
			return fmt.Errorf("commit %s: %s: %w", ref, k, ErrOutputsMissing)
		}
	}
	return nil
}

// commit is Commit once the outputs are known to exist.
func (s *Lifecycle) commit(ctx context.Context, c kernel.Claim, r CommitResult) error {
	start := time.Now() // the commit's latency, for metrics
	outputs := r.Outputs
	ref := c.Task.Ref
	shards, err := s.StageShards(ctx, ref.Job, ref.Stage)
	if err != nil {
		return fmt.Errorf("commit %s: %w", ref, err)
	}
	p := dynamo.CommitParams{
		HolderParams: dynamo.HolderParams{Ref: ref, Token: c.Task.Token, Now: s.Now()},
		Attempt:      c.Task.Attempt, Outputs: outputs, Shards: shards,
		RecordsIn: r.RecordsIn, RecordsOut: r.RecordsOut,
		BadRecords: r.BadRecords, MaxBadRecords: c.Spec.Stages[ref.Stage].MaxBadRecords,
		Duration: attemptDuration(c, s.Now()), Copy: c.Speculative, // speculation.go
		// Batched counts (countbatch.go); a commit with bad records
		// counts in its own transaction.
		DeferCount: s.counts != nil && r.BadRecords == 0 && !c.Task.Watched,
		Watched:    c.Task.Watched,
	}
	s.spendAttempt(c, p.Now) // cost.go
	s.takeCost(&p)
	shardDone, err := s.store.TaskCommit(ctx, p)
	if err != nil {
		s.giveBack(p, err)
		s.copies.noteIfLost(ctx, c, err) // speculation.go
	}
	if errors.Is(err, domain.ErrStaleClaim) {
		// A fenced attempt's outputs were written after its takeover may
		// already have marked the attempt's prefix: mark them again.
		s.MarkUncommitted(ctx, ref, c.Task.Attempt)
	}
	if err != nil {
		return err
	}
	s.Slots.FreeSlots(ctx, ref, c.Spec, time.Time{}) // ended: whatever attempt's
	s.copies.afterCommit(ctx, c)                     // speculation.go
	s.CountCommit(ctx, c, start)
	kernel.TaskInfo(ctx, s.Kernel, ref, c.Task.Attempt, "task committed", "outputs", outputs) // TaskLog's line, cheaper
	s.wakeCombine(ctx, c.Spec, ref)                                                           // skewclaim.go; after the commit's latency is taken
	if p.DeferCount {
		s.counts.add(p)
		return nil
	}
	if !shardDone {
		return nil
	}
	return s.afterShardDone(ctx, ref.Job, ref.Stage, dynamo.ShardOf(ref.Partition, p.Shards))
}

// afterShardDone is the follow-up of a count that emptied a counter shard.
func (s *Lifecycle) afterShardDone(ctx context.Context, job string, stage, shard int) error {
	ref := domain.TaskRef{Job: job, Stage: stage}
	// Reading every counter is worth it once the shards are all empty:
	// the count that empties the last one sees that here (ShardEmptied).
	// Others stop, where each used to read all the counters (shards²
	// reads a stage). Should the note fail, the read decides.
	if all, err := s.store.ShardEmptied(ctx, job, stage, shard); err != nil {
		s.Logger(ref).Warn("stage follow-up: note the emptied shard", "err", err)
	} else if !all {
		return nil
	}
	// The stage's follow-up is this committer's now. Should it die before
	// finishing, the sweep takes over after FollowUpGrace instead of the
	// stage's next check (a minute); a live committer finishes first, and
	// the steps are idempotent if the sweep overlaps it. A stage another
	// committer has already completed stays out of the index.
	if err := s.store.StageHurry(ctx, ref.Job, ref.Stage, s.Now().Add(s.cfg.FollowUpGrace)); err != nil {
		s.Logger(ref).Warn("stage follow-up: sweep index", "err", err)
	}
	// This shard is done; the stage is done when all shards are. If two
	// committers empty the last two shards at once, each reads the counters
	// after its own write, so at least one of them sees both at zero.
	err := s.stages.CheckStageComplete(ctx, ref.Job, ref.Stage)
	s.flushCost(ctx, job, stage, shard) // cost.go
	return err
}

// Decision is what the executor does with a failed task's message.
type Decision struct {
	Retry bool
	// Delay is the backoff before the next attempt.
	Delay time.Duration
	// Memory, when set, is the executor size the retry runs on (an
	// out-of-memory attempt's escalation, kernel/taskmemory.go).
	Memory spec.Size
}

// backoff is base * 2^(attempt-1) plus up to half of that again as jitter,
// capped at the spec's maximum backoff.
func (s *Lifecycle) backoff(sp *spec.Job, stage, attempt int) time.Duration {
	base := time.Duration(sp.StageRetry(stage).Backoff)
	d := base << min(attempt-1, 30)
	if d <= 0 || d > time.Duration(spec.MaxBackoff) {
		d = time.Duration(spec.MaxBackoff)
	}
	if base == 0 {
		return 0
	}
	return min(d+s.Jitter(d/2+1), time.Duration(spec.MaxBackoff))
}

// exhaust fails a task whose last attempt's lease expired.
func (s *Lifecycle) exhaust(ctx context.Context, t domain.Task, reason string) error {
	meta, err := s.Meta(ctx, t.Ref.Job)
	if err != nil {
		return err
	}
	now := s.Now()
	// A last attempt whose executor was killed for memory fails as out
	// of memory (oomkill.go).
	reason, class := s.kills.exhaustForMemory(ctx, t, reason)
	failed := kernel.TaskFailedEvent(t.Ref, meta.Owner, meta.Spec, t.Attempt, reason, now) // kernel/events.go
	tolerated, err := s.sweepFailed(ctx, meta.Spec, dynamo.SweepTaskParams{Ref: t.Ref, Event: sm.TaskExhaust, Now: now, Err: reason, Class: class, Due: now,
		Outbox: failed}) // tolerate.go
	if err != nil {
		return kernel.IgnoreInvalid(err)
	}
	s.PublishEvents(ctx, failed.ID)
	s.Slots.FreeSlots(ctx, t.Ref, nil, time.Time{})
	t.LastError, t.ErrorClass = reason, class
	t.State, t.Tolerated, t.Updated = sm.TaskFailed, tolerated, now // as written
	s.NoteAttemptEnd(ctx, t.Ref, holderAttempt(t), attemptKind(t, cmp.Or(attemptKinds[class], domain.AttemptFailed)), reason, t)
	s.Meter().TaskFailed(s.TaskPriority(ctx, nil, t.Ref)) // kernel/metrics.go
	return s.propagateFailure(ctx, t)
}

// propagateFailure fails the stage and job of a FAILED task, then takes the
// task out of the sweep index. Until then the sweep repeats it.
func (s *Lifecycle) propagateFailure(ctx context.Context, t domain.Task) error {
	if t.Tolerated {
		return s.afterTolerated(ctx, t) // tolerate.go: its stage goes on
	}
	sp, err := s.CachedSpec(ctx, t.Ref.Job)
	if err != nil {
		return err
	}
	// The failure is about the job's generation in which the task failed:
	// if a redrive has since put the task back (the job ended for another
	// reason, and its owner redrove it), there is nothing to fail.
	gen, current, err := s.FailureGen(ctx, t) // kernel/jobgen.go
	if err != nil || !current {
		return err
	}
	reason := s.overAllowance(ctx, sp, t, failReason(sp, t)) // failclass.go, tolerate.go
	if err := s.stages.FailJob(ctx, t.Ref.Job, t.Ref.Stage, reason, gen); err != nil {
		return err
	}
	return s.store.TaskUnindex(ctx, t)
}
