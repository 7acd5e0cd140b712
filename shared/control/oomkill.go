package control

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/batchwork/batchwork/shared/batch"
	"github.com/batchwork/batchwork/shared/dynamo"
	"github.com/batchwork/batchwork/shared/spec"
	"github.com/batchwork/batchwork/shared/tuning"
	sm "github.com/batchwork/batchwork/statemachine"
)

// An executor killed for memory (a Lambda runtime that ran out of its
// function's memory, a Fargate container that ECS stopped with
// OutOfMemoryError) before its watchdog could fail its attempts as out of
// memory records nothing as it dies: its tasks' claims just lapse. Left
// at that, the retry would run on the same size, run out of memory again,
// and a task that needs more memory would spend all its attempts and
// fail. Its liveness record survives it, and tells the control plane how
// it died: the memory it last reported (Lambda and Fargate alike, with
// the beat it makes anyway) or ECS's mark that it was killed for memory
// (Fargate). When a claim of an executor judged killed for memory lapses
// (a takeover, the sweep's expiry of its lease, the expiry of its last
// attempt), its attempt ends as out of memory, and the retry goes to the
// next executor size up, within the stage's maxMemory.

// MemoryLostShare is the share of its memory at or above which an
// executor that died (its liveness record lapsed, its claims unrenewed)
// is judged killed for memory. Its report is the peak since its previous
// beat (tuning.ExecutorBeat), so memory that grows slower than about the
// remaining share per beat is seen before the kill. An executor that came
// this close to its limit and then died of something else has its task
// retried one size up: harmless, it costs memory, never correctness. A
// task whose memory grows faster than that is killed between two reports
// below the mark and retried as a lease expiry on the same size. The mark
// is above the Go runtime's soft limit (tuning.SoftMemoryLimit, 90%):
// the collector holds a busy, healthy executor's heap just under that
// limit, and such an executor dying of something else (a timeout) must
// fail with that cause, not climb a size as out of memory.
const MemoryLostShare = 0.92

// MemoryReport is an executor's memory as it reports it with each beat.
type MemoryReport struct {
	// Used is the peak the executor held since its previous report, and
	// Limit its memory (its Lambda function's, its container's); bytes.
	Used, Limit uint64
}

// ExecutorAliveMemory renews executor id's liveness record with its
// memory report: one write, as ExecutorAlive.
func (s *Service) ExecutorAliveMemory(ctx context.Context, id string, m MemoryReport) error {
	if m.Limit == 0 {
		return s.ExecutorAlive(ctx, id)
	}
	return s.store.RenewExecutorMemory(ctx, id, s.Now().Add(tuning.ExecutorLease), int64(m.Used>>20), int64(m.Limit>>20))
}

// MarkExecutorKilled records that executor id was killed for memory, for
// reason (ECS's stopped reason): its claims, when they lapse, end as out
// of memory.
func (s *Service) MarkExecutorKilled(ctx context.Context, id, reason string) error {
	if id == "" {
		return errors.New("mark executor killed for memory: no executor id")
	}
	return s.store.MarkExecutorKilled(ctx, id, truncate(reason, 200), s.Now())
}

// ecsExecutorPrefix starts the executor id of a Fargate (ECS) task:
// "ecs-" and the task's id, the last part of its ARN, so the control plane
// finds the liveness record of a task ECS says it stopped.
const ecsExecutorPrefix = "ecs-"

// ExecutorIDForECSTask is the executor id of the ECS task arn
// (arn:aws:ecs:region:account:task/cluster/id, or the older
// arn:aws:ecs:region:account:task/id): "ecs-" and its id. "" for an arn
// that names no task.
func ExecutorIDForECSTask(arn string) string {
	i := strings.Index(arn, ":task/")
	if i < 0 {
		return ""
	}
	id := arn[strings.LastIndexByte(arn, '/')+1:]
	if id == "" {
		return ""
	}
	return ecsExecutorPrefix + id
}

// killedForMemory says whether the dead holder of t was killed for memory,
// and how its attempt ended, from its liveness record (judgeKilled). A
// record that cannot be read judges no death as one for memory (the lease
// expiry goes on as before).
func (s *Service) killedForMemory(ctx context.Context, t batch.Task) (string, bool) {
	m, ok := s.executorMemory(ctx, t)
	if !ok {
		return "", false
	}
	return judgeKilled(m)
}

// executorMemory reads the liveness record of t's holder; false when
// there is none to read.
func (s *Service) executorMemory(ctx context.Context, t batch.Task) (dynamo.ExecutorMemory, bool) {
	if t.Executor == "" {
		return dynamo.ExecutorMemory{}, false
	}
	m, err := s.store.ReadExecutorMemory(ctx, t.Executor)
	if err != nil {
		s.logger(t.Ref).Warn("read the executor's memory", "executor", t.Executor, "err", err)
		return dynamo.ExecutorMemory{}, false
	}
	return m, true
}

// judgeKilled says whether an executor whose liveness record is m, and
// which died, was killed for memory: ECS marked it, or its last report
// was at or above MemoryLostShare of its limit.
func judgeKilled(m dynamo.ExecutorMemory) (string, bool) {
	if m.Killed != "" {
		return "executor killed for memory (" + m.Killed + ")", true
	}
	if m.LimitMiB > 0 && float64(m.UsedMiB) >= MemoryLostShare*float64(m.LimitMiB) {
		return fmt.Sprintf("executor lost with its memory at %d MiB of %d MiB", m.UsedMiB, m.LimitMiB), true
	}
	return "", false
}

// errLostForMemory is the claim that found its task's holder killed for
// memory: the task went back to READY for a larger executor, and the
// claimant drops its message (a new one was sent).
var errLostForMemory = errors.New("holder killed for memory; the task retries on a larger executor")

// loseForMemory is the takeover of a claim whose executor died for memory
// (sm.TaskLostForMemory): the task goes back to READY at the next size up
// (escalate), its attempt ends as out of memory, and a new message goes
// out for it. done is false when the holder died of anything else: the
// takeover goes on.
func (s *Service) loseForMemory(ctx context.Context, now time.Time, t batch.Task) (done bool, err error) {
	why, killed := s.killedForMemory(ctx, t)
	if !killed {
		return false, nil
	}
	sp, err := s.jobSpec(ctx, t.Ref.Job)
	if err != nil {
		return true, err
	}
	mem, note := escalate(Claim{Task: t, Spec: sp}) // failclass.go
	cause := truncate(note+": "+why, MaxErrorLen)
	_, err = s.store.LoseTaskForMemory(ctx, dynamo.LostForMemoryParams{Holder: t, Now: now, Memory: mem, Err: cause, Due: now.Add(s.cfg.StuckAfter)})
	if errors.Is(err, sm.ErrInvalidTransition) {
		// The holder renewed, or another claim got there first: look again
		// shortly.
		return true, &batch.ClaimHeldError{LeaseUntil: now.Add(time.Second)}
	}
	if err != nil {
		return true, err
	}
	s.lostForMemory(ctx, t, sp, cause)
	if err := s.resend(ctx, t.Ref, 0); err != nil {
		// The sweep resends it (the task is due at StuckAfter).
		s.logger(t.Ref).Warn("resend a task lost for memory", "err", err)
	}
	return true, fmt.Errorf("claim %s: %w: %w", t.Ref, errLostForMemory, batch.ErrAlreadyDone)
}

// lostForMemory follows a task put back for a larger executor: the dead
// claim's slots are freed and its attempt ends as out of memory.
func (s *Service) lostForMemory(ctx context.Context, t batch.Task, sp *spec.Job, cause string) {
	s.freeSlots(ctx, t.Ref, sp, t.SlotAt)
	s.taskLog(ctx, t.Ref, t.Attempt).Warn("executor killed for memory; retrying on a larger executor", "executor", t.Executor, "err", cause)
	s.noteAttemptEnd(ctx, t.Ref, t.Attempt, batch.AttemptOutOfMemory, cause, t)
	s.metrics().TaskRetried(s.taskPriority(ctx, sp, t.Ref)) // metrics.go
}

// raiseLapsed is TaskMemory's look at a task still CLAIMED when an
// executor of a known size receives its message: if the claim lapsed (its
// lease expired, or its executor died) and its executor was killed for
// memory, the task goes back to READY one size up, as the sweep or a
// takeover would have done (an expired lease is otherwise reclaimed at
// once, on the same size), and the raised size is returned; else 0. The
// executor then hands the message on to the raised size. A last attempt
// is left to its lease's exhaustion (exhaustForMemory). Only a message
// that comes back while its task is claimed by another executor costs
// the read of that executor's record.
func (s *Service) raiseLapsed(ctx context.Context, t batch.Task, sp *spec.Job) spec.Size {
	if t.State != sm.TaskClaimed || t.Copy.Live() || t.Attempt >= t.MaxAttempts {
		return 0
	}
	m, ok := s.executorMemory(ctx, t)
	if !ok {
		return 0
	}
	why, killed := judgeKilled(m)
	if !killed {
		return 0
	}
	now := s.Now()
	view := t.View()
	view.HolderAlive = m.Alive
	in := sm.TaskInput{At: now}
	mem, note := escalate(Claim{Task: t, Spec: sp}) // failclass.go
	cause := truncate(note+": "+why, MaxErrorLen)
	switch {
	case sm.Holds(sm.GuardLeaseExpired, view, in):
		err := s.store.SweepTask(ctx, dynamo.SweepTaskParams{Ref: t.Ref, Event: sm.TaskExpire, Now: now, Err: cause,
			Class: batch.ClassOutOfMemory, Memory: mem, Due: now.Add(s.cfg.StuckAfter)})
		if err != nil {
			return 0
		}
	case sm.Holds(sm.GuardHolderDead, view, in):
		if _, err := s.store.LoseTaskForMemory(ctx, dynamo.LostForMemoryParams{Holder: t, Now: now, Memory: mem, Err: cause,
			Due: now.Add(s.cfg.StuckAfter)}); err != nil {
			return 0
		}
	default:
		return 0 // alive: its attempt runs on
	}
	s.lostForMemory(ctx, t, sp, cause)
	return mem
}

// expiryForMemory fills in the sweep's expiry p of t's lapsed lease when
// its executor was killed for memory (class, error, next size), and
// returns how the attempt ended for its history.
func (s *Service) expiryForMemory(ctx context.Context, t batch.Task, p *dynamo.SweepTaskParams) (batch.AttemptEndKind, string) {
	why, killed := s.killedForMemory(ctx, t)
	if !killed {
		return batch.AttemptLeaseExpired, "lease expired (executor lost)"
	}
	sp, err := s.jobSpec(ctx, t.Ref.Job)
	if err != nil {
		return batch.AttemptLeaseExpired, "lease expired (executor lost)"
	}
	mem, note := escalate(Claim{Task: t, Spec: sp})
	p.Err = truncate(note+": "+why, MaxErrorLen)
	p.Class, p.Memory = batch.ClassOutOfMemory, mem
	return batch.AttemptOutOfMemory, p.Err
}

// exhaustForMemory is the reason and class of a last attempt whose lease
// lapsed: out of memory, with its size, when its executor was killed for
// memory; else reason as given and lease_expired.
func (s *Service) exhaustForMemory(ctx context.Context, t batch.Task, reason string) (string, batch.ErrorClass) {
	why, killed := s.killedForMemory(ctx, t)
	if !killed {
		return reason, batch.ClassLeaseExpired
	}
	size := t.Memory
	if sp, err := s.jobSpec(ctx, t.Ref.Job); err == nil && size == 0 {
		size = sp.StageMemory(t.Ref.Stage)
	}
	return truncate(fmt.Sprintf("ran out of memory at %s on attempt %d of %d: %s", sizeString(size), t.Attempt, t.MaxAttempts, why), MaxErrorLen),
		batch.ClassOutOfMemory
}
