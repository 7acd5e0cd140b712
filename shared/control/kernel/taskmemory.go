package kernel

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/batchwork/batchwork/shared/domain"
	"github.com/batchwork/batchwork/shared/dynamo"
	"github.com/batchwork/batchwork/shared/spec"
	sm "github.com/batchwork/batchwork/statemachine"
)

// TaskMemory is the executor size the next attempt of the task ref names
// must run on: the size an out-of-memory retry raised it to, else its
// stage's (spec Resources). Its messages go to that size's ready queue
// (sizedqueues.go); an executor of another size that receives one anyway
// forwards it there unclaimed (executor.Runner.Memory). Only a stage whose
// maxMemory is above its memory can have been raised, so only such a
// stage's tasks cost a read of the task record (eventually consistent:
// a raise not seen yet is seen when the message comes back).
func (s *Kernel) TaskMemory(ctx context.Context, ref domain.TaskRef) (spec.Size, error) {
	sp, err := s.CachedSpec(ctx, ref.Job)
	if err != nil {
		return 0, err
	}
	if ref.Stage < 0 || ref.Stage >= len(sp.Stages) {
		return 0, fmt.Errorf("task %s: no stage %d: %w", ref, ref.Stage, domain.ErrNotFound)
	}
	need := sp.StageMemory(ref.Stage)
	if sp.StageMaxMemory(ref.Stage) <= need {
		return need, nil
	}
	t, err := s.store.TaskGet(ctx, ref)
	if errors.Is(err, domain.ErrNotFound) {
		return need, nil // unwritten (sm.TaskUnwritten): never raised
	}
	if err != nil {
		return 0, err
	}
	if t.Memory > need {
		need = t.Memory
	}
	if t.State == sm.TaskClaimed {
		// A lapsed claim of an executor killed for memory retries one size
		// up (below).
		need = max(need, s.raiseLapsed(ctx, t, sp))
	}
	return need, nil
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
func (s *Kernel) raiseLapsed(ctx context.Context, t domain.Task, sp *spec.Job) spec.Size {
	if t.State != sm.TaskClaimed || t.Copy.Live() || t.Attempt >= t.MaxAttempts {
		return 0
	}
	m, ok := s.ExecutorMemory(ctx, t)
	if !ok {
		return 0
	}
	why, killed := JudgeKilled(m)
	if !killed {
		return 0
	}
	now := s.Now()
	view := t.View()
	view.HolderAlive = m.Alive
	in := sm.TaskInput{At: now}
	mem, note := Escalate(Claim{Task: t, Spec: sp})
	cause := Truncate(note+": "+why, MaxErrorLen)
	switch {
	case sm.Holds(sm.GuardLeaseExpired, view, in):
		err := s.store.TaskSweep(ctx, dynamo.SweepTaskParams{Ref: t.Ref, Event: sm.TaskExpire, Now: now, Err: cause,
			Class: domain.ClassOutOfMemory, Memory: mem, Due: now.Add(s.cfg.StuckAfter)})
		if err != nil {
			return 0
		}
	case sm.Holds(sm.GuardHolderDead, view, in):
		if _, err := s.store.TaskLoseForMemory(ctx, dynamo.LostForMemoryParams{Holder: t, Now: now, Memory: mem, Err: cause,
			Due: now.Add(s.cfg.StuckAfter)}); err != nil {
			return 0
		}
	default:
		return 0 // alive: its attempt runs on
	}
	s.LostForMemory(ctx, t, sp, cause)
	return mem
}

// LostForMemory follows a task put back for a larger executor: the dead
// claim's slots are freed and its attempt ends as out of memory.
func (s *Kernel) LostForMemory(ctx context.Context, t domain.Task, sp *spec.Job, cause string) {
	s.Slots.FreeSlots(ctx, t.Ref, sp, t.SlotAt)
	s.TaskLog(ctx, t.Ref, t.Attempt).Warn("executor killed for memory; retrying on a larger executor", "executor", t.Executor, "err", cause)
	s.NoteAttemptEnd(ctx, t.Ref, t.Attempt, domain.AttemptOutOfMemory, cause, t)
	s.Meter().TaskRetried(s.TaskPriority(ctx, sp, t.Ref)) // metrics.go
}

// ExecutorMemory reads the liveness record of t's holder; false when
// there is none to read.
func (s *Kernel) ExecutorMemory(ctx context.Context, t domain.Task) (dynamo.ExecutorMemory, bool) {
	if t.Executor == "" {
		return dynamo.ExecutorMemory{}, false
	}
	m, err := s.store.ExecutorMemory(ctx, t.Executor)
	if err != nil {
		s.Logger(t.Ref).Warn("read the executor's memory", "executor", t.Executor, "err", err)
		return dynamo.ExecutorMemory{}, false
	}
	return m, true
}

// JudgeKilled says whether an executor whose liveness record is m, and
// which died, was killed for memory: ECS marked it, or its last report
// was at or above MemoryLostShare of its limit.
func JudgeKilled(m dynamo.ExecutorMemory) (string, bool) {
	if m.Killed != "" {
		return "executor killed for memory (" + m.Killed + ")", true
	}
	if m.LimitMiB > 0 && float64(m.UsedMiB) >= MemoryLostShare*float64(m.LimitMiB) {
		return fmt.Sprintf("executor lost with its memory at %d MiB of %d MiB", m.UsedMiB, m.LimitMiB), true
	}
	return "", false
}

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

// Escalate is the executor size an out-of-memory attempt's retry runs on
// (the next size up, within the stage's maxMemory) and the note its
// history gets: "out of memory at 2GiB; retrying at 4GiB".
func Escalate(c Claim) (spec.Size, string) {
	cur := c.Task.Memory
	if cur == 0 {
		cur = c.Spec.StageMemory(c.Task.Ref.Stage)
	}
	if next, ok := spec.NextSize(cur); ok && next <= c.Spec.StageMaxMemory(c.Task.Ref.Stage) {
		return next, fmt.Sprintf("out of memory at %s; retrying at %s", SizeString(cur), SizeString(next))
	}
	return cur, fmt.Sprintf("out of memory at %s, the stage's maxMemory; retrying at %s", SizeString(cur), SizeString(cur))
}

// SizeString renders an executor size as the spec spells it: 2GiB.
func SizeString(z spec.Size) string {
	if z%(1<<30) == 0 {
		return strconv.FormatInt(int64(z)>>30, 10) + "GiB"
	}
	return strconv.FormatInt(int64(z)>>20, 10) + "MiB"
}
