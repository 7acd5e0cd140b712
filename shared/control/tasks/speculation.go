package tasks

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/batchwork/batchwork/shared/control/kernel"
	"github.com/batchwork/batchwork/shared/domain"
	"github.com/batchwork/batchwork/shared/dynamo"
	"github.com/batchwork/batchwork/shared/queue"
	"github.com/batchwork/batchwork/shared/spec"
	sm "github.com/batchwork/batchwork/statemachine"
)

// Speculative execution (spec Stage.Speculation; the rules are in
// statemachine/speculation.go).
//
// The sweep launches copies, in its look at a running stage: it already
// visits every running stage every CheckEvery and reads the stage's
// record, so the one listing of the stage's tasks that finds stragglers
// also counts the copies that run, which keeps a stage within maxCopies
// without a counter that every way a copy can end would have to count
// down. Executors' heartbeats could react sooner, but every beat of every
// task would then read the stage's statistics, and the cap would need
// such a counter. Speculation pays off for tasks that run minutes, where
// a sweep period is small beside the straggler's lateness.

// Attempt ends and timeline events of speculation.
const (
	// AttemptSpeculationLost (an attempt end): the other claim of the task
	// committed first; this attempt's outputs are never used.
	AttemptSpeculationLost domain.AttemptEndKind = "speculation_lost"
	// AttemptFailedBesideCopy (an attempt end): the attempt failed while
	// the task's other claim ran on, so the task neither retried nor
	// failed.
	AttemptFailedBesideCopy domain.AttemptEndKind = "failed_beside_copy"
	// speculationStarted and speculationWon are timeline events only.
	speculationStarted domain.AttemptEndKind = "speculation_started"
	speculationWon     domain.AttemptEndKind = "speculation_won"
)

// IsCopyMessage splits a task message's body into the task it names and
// whether it asks for the task's speculative copy.
func IsCopyMessage(body string) (string, bool) {
	if len(body) > len(domain.CopyMarker) && body[len(body)-len(domain.CopyMarker):] == domain.CopyMarker {
		return body[:len(body)-len(domain.CopyMarker)], true
	}
	return body, false
}

// ClaimCopy claims the speculative copy a copy message asks for: a new
// attempt of a running task with its own token and lease, beside the
// holder's claim. domain.ErrAlreadyDone: there is no copy to claim (the
// task ended, or the copy was claimed by another delivery); drop the
// message. domain.ErrJobNotRunning: the job ended.
func (s *Copies) ClaimCopy(ctx context.Context, ref domain.TaskRef) (kernel.Claim, error) {
	meta, err := s.Meta(ctx, ref.Job)
	if errors.Is(err, domain.ErrNotFound) {
		return kernel.Claim{}, fmt.Errorf("claim copy %s: job %w: %w", ref, err, domain.ErrAlreadyDone)
	}
	if err != nil {
		return kernel.Claim{}, fmt.Errorf("claim copy %s: %w", ref, err)
	}
	sp := meta.Spec
	if ref.Stage >= len(sp.Stages) {
		return kernel.Claim{}, fmt.Errorf("claim copy %s: no stage %d: %w", ref, ref.Stage, domain.ErrAlreadyDone)
	}
	lease := time.Duration(sp.StageLease(ref.Stage))
	now := s.Now()
	t, err := s.store.CopyClaim(ctx, dynamo.ClaimParams{Ref: ref, Token: kernel.NewToken(), Now: now, Lease: lease, Grace: lease, Executor: kernel.ExecutorOf(ctx)})
	if err != nil {
		return kernel.Claim{}, err
	}
	// Claim first, then check the job, as Claim does: a check before the
	// claim's write lets a cancel that returns while the write is on its
	// way (throttled and retried, seconds) start a copy after it. A copy
	// of an ended job is refused and only its own claim dropped, so it
	// cannot commit; the task stays with its holder, whose own checks end
	// it with the job. Cancelling the task here would also end it for a
	// job that runs again: the state read may be a stale FAILED of a job
	// redriven since.
	state, err := s.CachedJobState(ctx, ref.Job)
	if errors.Is(err, domain.ErrNotFound) {
		// Deleted: the deletion removes the task with its copy.
		return kernel.Claim{}, fmt.Errorf("claim copy %s: job %w: %w", ref, err, domain.ErrAlreadyDone)
	}
	if err != nil {
		// The copy's lease runs out, and the sweep drops it.
		return kernel.Claim{}, fmt.Errorf("claim copy %s: %w", ref, err)
	}
	if state != sm.JobRunning {
		return kernel.Claim{}, s.refuseCopy(ctx, t, state)
	}
	s.noteTaskEvent(ctx, ref, t.Attempt, speculationStarted,
		fmt.Sprintf("speculative copy of attempt %d started", t.Copy.HolderAttempt))
	s.TaskLog(ctx, ref, t.Attempt).Info("speculative copy claimed", "holder_attempt", t.Copy.HolderAttempt)
	return kernel.Claim{Task: t, Spec: sp, Lease: lease, Speculative: true}, nil
}

// refuseCopy drops a copy claimed for a job that is not running. A copy
// no longer live (its holder yielded to it, or the task moved on) has
// nothing to drop: the refusal stands, and the task's own path decides.
func (s *Copies) refuseCopy(ctx context.Context, t domain.Task, state sm.JobState) error {
	_, err := s.store.TaskDropClaim(ctx, dynamo.DropParams{
		HolderParams: dynamo.HolderParams{Ref: t.Ref, Token: t.Token, Now: s.Now()},
		Event:        sm.TaskCopyFail, Err: "job " + string(state),
	})
	if err != nil && !errors.Is(err, domain.ErrStaleClaim) && !errors.Is(err, sm.ErrInvalidTransition) {
		return fmt.Errorf("claim copy %s: drop the copy of a %s job: %w", t.Ref, state, err)
	}
	return fmt.Errorf("claim copy %s: job is %s: %w", t.Ref, state, domain.ErrJobNotRunning)
}

// noteTaskEvent writes a timeline-only task event; history, best effort.
func (s *Copies) noteTaskEvent(ctx context.Context, ref domain.TaskRef, attempt int, kind domain.AttemptEndKind, msg string) {
	err := s.store.TimelineRecord(ctx, domain.AttemptEnd{Ref: ref, Attempt: attempt, Kind: kind, At: s.Now(), Err: msg})
	if err != nil {
		s.Logger(ref).Warn("record task event", "kind", kind, "err", err)
	}
}

// copyHeartbeat extends a copy's lease. A copy whose holder yielded to it
// holds the task's main claim now, and beats as the holder.
func (s *Copies) copyHeartbeat(ctx context.Context, c kernel.Claim) error {
	hp := dynamo.HolderParams{Ref: c.Task.Ref, Token: c.Task.Token, Now: s.Now()}
	err := s.store.CopyHeartbeat(ctx, hp, c.Lease, c.Lease)
	if errors.Is(err, domain.ErrStaleClaim) {
		err = s.store.TaskHeartbeat(ctx, hp, c.Lease, c.Lease)
	}
	return err
}

// speculates says whether the claim's stage runs speculative copies.
func speculates(c kernel.Claim) bool {
	return c.Spec != nil && c.Task.Ref.Stage < len(c.Spec.Stages) && c.Spec.StageSpeculation(c.Task.Ref.Stage) != nil
}

// noteIfLost records, for an attempt of a speculating stage whose claim
// was refused, that it lost to the task's other claim: the task
// committed with another attempt. The winner's commit usually recorded it
// first (first writer wins).
func (s *Copies) noteIfLost(ctx context.Context, c kernel.Claim, refusal error) {
	if !speculates(c) || !(errors.Is(refusal, domain.ErrStaleClaim) || errors.Is(refusal, domain.ErrAlreadyDone)) {
		return
	}
	t, err := s.store.TaskGet(ctx, c.Task.Ref)
	if err != nil || t.State != sm.TaskSucceeded || t.CommittedAttempt == c.Task.Attempt || t.Copy == nil {
		return
	}
	s.NoteAttemptEnd(ctx, c.Task.Ref, c.Task.Attempt, AttemptSpeculationLost,
		fmt.Sprintf("attempt %d committed first", t.CommittedAttempt), c.Task)
}

// afterCommit records a copy's win: the holder it ran beside lost.
func (s *Copies) afterCommit(ctx context.Context, c kernel.Claim) {
	if !c.Speculative || c.Task.Copy == nil {
		return
	}
	ref, holder := c.Task.Ref, c.Task.Copy.HolderAttempt
	s.noteTaskEvent(ctx, ref, c.Task.Attempt, speculationWon,
		fmt.Sprintf("speculative copy committed before attempt %d", holder))
	s.NoteAttemptEnd(ctx, ref, holder, AttemptSpeculationLost,
		fmt.Sprintf("speculative copy attempt %d committed first", c.Task.Attempt), domain.Task{})
}

// failBesideCopy handles the failure of one claim of a task that has two:
// the failed claim is dropped, and the task runs on under the other one,
// neither retried nor failed (statemachine TaskYield, TaskCopyFail).
// done is false when the task has no other live claim: the caller fails
// the attempt as usual.
func (s *Copies) failBesideCopy(ctx context.Context, c kernel.Claim, cause string) (d Decision, done bool, err error) {
	if !speculates(c) {
		return Decision{}, false, nil
	}
	ref := c.Task.Ref
	cause = kernel.Truncate(cause, kernel.MaxErrorLen)
	p := dynamo.DropParams{HolderParams: dynamo.HolderParams{Ref: ref, Token: c.Task.Token, Now: s.Now()}, Err: cause}
	if c.Speculative {
		p.Event = sm.TaskCopyFail
	} else {
		t, err := s.store.TaskGet(ctx, ref)
		if err != nil {
			return Decision{}, true, err
		}
		if t.State != sm.TaskClaimed || t.Token != c.Task.Token || !t.Copy.Live() {
			return Decision{}, false, nil
		}
		p.Event, p.Copy = sm.TaskYield, *t.Copy
	}
	_, err = s.store.TaskDropClaim(ctx, p)
	if c.Speculative && errors.Is(err, domain.ErrStaleClaim) {
		// Not the copy any more: its holder yielded to it, or the task
		// ended. The usual failure path judges which.
		return Decision{}, false, nil
	}
	if err != nil {
		return Decision{}, true, err
	}
	s.TaskLog(ctx, ref, c.Task.Attempt).Warn("attempt failed beside its task's other claim; the task runs on", "event", p.Event, "err", cause)
	s.NoteAttemptEnd(ctx, ref, c.Task.Attempt, AttemptFailedBesideCopy, cause, c.Task)
	return Decision{}, true, nil
}

// notePrevHolder is Claim's note of the attempt its claim replaced, for a
// task that was copied: the copy took an attempt number beside its
// holder's, so the attempt before the claimed one may be the copy's
// (whose end was recorded when it failed or expired) and the replaced
// holder's the one before that. The first end recorded for an attempt
// stands, so an attempt that ended otherwise keeps its end.
func (s *Copies) notePrevHolder(ctx context.Context, t, prev domain.Task) {
	if t.Attempt <= 2 || t.Copy == nil || t.Copy.Started.IsZero() {
		return
	}
	s.NoteAttemptEnd(ctx, t.Ref, t.Attempt-2, domain.AttemptLeaseExpired, "lease expired or executor lost; attempt taken over by another executor", prev)
}

// Speculate launches speculative copies of a running stage's stragglers
// (the sweep's look at the stage): once Quantile of its tasks committed,
// every task whose claim has run longer than Multiplier times the median
// committed duration gets one copy, longest-running first, while fewer
// than MaxCopies copies of the stage run. It also drops copies whose
// lease ran out, which frees their place.
func (s *Copies) Speculate(ctx context.Context, job string, sp *spec.Job, st domain.Stage, now time.Time, c *kernel.SweepCounts) error {
	sc := sp.StageSpeculation(st.Index)
	if sc == nil || !st.Materialized || st.Total == 0 {
		return nil
	}
	d, err := s.store.StageDurations(ctx, job, st.Index, st.Shards)
	if err != nil {
		return err
	}
	if float64(d.Count()) < math.Ceil(sc.Quantile*float64(st.Total)) {
		return nil
	}
	median := d.Median()
	if !s.speculationLookDue(job, st, int(d.Count()), median, sc.Multiplier, now) { // speculationlook.go
		return nil
	}
	// earliest is the earliest claim of a running task that may still
	// become a straggler (uncopied, not one yet): the next look is due
	// when it is one.
	earliest := now
	tasks, err := s.store.TaskListStage(ctx, job, st.Index, st.Total)
	if err != nil {
		return err
	}
	running := 0
	var stragglers []domain.Task
	for _, t := range tasks {
		if t.State != sm.TaskClaimed {
			continue
		}
		switch {
		case t.Copy.Live() && now.After(t.Copy.LeaseUntil.Add(sm.LeaseSkew)):
			if err := s.dropDeadCopy(ctx, t, now); err != nil {
				return err
			}
		case t.Copy.Live():
			running++
		case t.Copy != nil && t.Copy.Started.IsZero() && t.Claimed.After(t.Copy.Requested):
			// Requested for an earlier attempt, which ended before its
			// copy started: void. The claim runs uncopied (a task is
			// copied once); a late message of the request may still be
			// claimed, which costs a copy and breaks nothing.
		case t.Copy != nil && t.Copy.Started.IsZero():
			running++ // requested, its message on the way
			if now.Sub(t.Copy.Requested) > s.cfg.StuckAfter {
				// Its message may be lost: send another (a duplicate is
				// refused at claim).
				if err := s.sendCopy(ctx, sp, t.Ref); err != nil {
					return err
				}
			}
		case t.Copy == nil && !copyable(sp, t.Ref): // skewclaim.go
			// Never copied: it neither takes a place under the cap nor
			// keeps the looks coming.
		case t.Copy == nil && !t.Claimed.IsZero() && sm.IsStraggler(now.Sub(t.Claimed), median, sc.Multiplier):
			stragglers = append(stragglers, t)
		case t.Copy == nil && !t.Claimed.IsZero() && t.Claimed.Before(earliest):
			earliest = t.Claimed
		}
	}
	slices.SortFunc(stragglers, func(a, b domain.Task) int { return cmp.Compare(a.Claimed.UnixNano(), b.Claimed.UnixNano()) })
	launch := stragglers[:min(len(stragglers), max(sc.MaxCopies-running, 0))]
	s.noteCopiesRunning(ctx, st, running+len(launch)) // speculationlook.go
	// Copies under way (to drop when dead, resend when lost) or
	// stragglers the cap held back need the next sweep's look.
	s.noteSpeculationLook(job, st, specLook{earliest: earliest, busy: running+len(stragglers) > 0})
	for _, t := range launch {
		err := s.store.CopyRequest(ctx, t.Ref, now)
		if errors.Is(err, sm.ErrInvalidTransition) {
			continue // it committed, failed or was copied meanwhile
		}
		if err != nil {
			return err
		}
		if err := s.sendCopy(ctx, sp, t.Ref); err != nil {
			return err // the next look resends it (StuckAfter)
		}
		c.Speculated++
		s.TaskLog(ctx, t.Ref, t.Attempt).Info("speculative copy requested", "ran", now.Sub(t.Claimed).String(), "median", median.String())
	}
	return nil
}

// sendCopy sends a copy's message to its task's ready queue.
func (s *Copies) sendCopy(ctx context.Context, sp *spec.Job, ref domain.TaskRef) error {
	return s.queue.SendBatch(ctx, s.ReadyQueue(ctx, sp, ref), []queue.Send{{Body: ref.String() + domain.CopyMarker}}) // kernel/sizedqueues.go
}

// dropDeadCopy drops a copy whose lease ran out (its executor died): the
// task runs on under its holder.
func (s *Copies) dropDeadCopy(ctx context.Context, t domain.Task, now time.Time) error {
	_, err := s.store.TaskDropClaim(ctx, dynamo.DropParams{HolderParams: dynamo.HolderParams{Ref: t.Ref, Now: now},
		Event: sm.TaskCopyExpire, Err: "speculative copy's lease expired"})
	if err != nil {
		return kernel.IgnoreInvalid(err)
	}
	s.NoteAttemptEnd(ctx, t.Ref, t.Copy.Attempt, domain.AttemptLeaseExpired, "speculative copy's lease expired (executor lost)", dynamo.AsCopyClaim(t))
	return nil
}

// sweepCopiedTask is the sweep's look at a task with two live claims: a
// dead copy is dropped (the next look judges the holder as usual); while
// the copy lives, neither claim is expired, and the task is looked at
// again when the later lease has passed.
func (s *Copies) sweepCopiedTask(ctx context.Context, it dynamo.DueItem, t domain.Task, now time.Time) error {
	if now.After(t.Copy.LeaseUntil.Add(sm.LeaseSkew)) {
		return s.dropDeadCopy(ctx, t, now)
	}
	sp, err := s.CachedSpec(ctx, t.Ref.Job)
	if err != nil {
		return err
	}
	lease := time.Duration(sp.StageLease(t.Ref.Stage))
	return s.store.DueSet(ctx, it, later(t.LeaseUntil, t.Copy.LeaseUntil).Add(lease))
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// attemptDuration is how long the claim's attempt has run, for the stage's
// duration histogram; 0 (not counted) when its claim time is unknown.
func attemptDuration(c kernel.Claim, now time.Time) time.Duration {
	if c.Task.Claimed.IsZero() {
		return 0
	}
	return max(now.Sub(c.Task.Claimed), time.Millisecond)
}

// StageDurations is the histogram of the durations of a stage's committed
// attempts (claim to commit), summed from its counter shards: what
// speculation judges stragglers by, and what dynamic splitting may read.
// Each commit adds to it in its own transaction, so it is exact for the
// commits so far; the buckets are √2 wide (domain.Durations).
func (s *Copies) StageDurations(ctx context.Context, job string, stage int) (domain.Durations, error) {
	shards, err := s.StageShards(ctx, job, stage)
	if err != nil {
		return domain.Durations{}, err
	}
	return s.store.StageDurations(ctx, job, stage, shards)
}

// holderAttempt is the attempt of a task's holder claim: its record's
// attempt, except after a copy of it ended, when the copy's attempt is
// the record's and the holder's is kept beside it.
func holderAttempt(t domain.Task) int {
	if c := t.Copy; c != nil && !c.Live() && c.HolderAttempt > 0 {
		return c.HolderAttempt
	}
	return t.Attempt
}
