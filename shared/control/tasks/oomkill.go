package tasks

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/batchwork/batchwork/shared/control/kernel"
	"github.com/batchwork/batchwork/shared/domain"
	"github.com/batchwork/batchwork/shared/dynamo"
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

// MemoryReport is an executor's memory as it reports it with each beat.
type MemoryReport struct {
	// Used is the peak the executor held since its previous report, and
	// Limit its memory (its Lambda function's, its container's); bytes.
	Used, Limit uint64
}

// ExecutorAliveMemory renews executor id's liveness record with its
// memory report: one write, as ExecutorAlive.
func (s *Kills) ExecutorAliveMemory(ctx context.Context, id string, m MemoryReport) error {
	if m.Limit == 0 {
		return s.ExecutorAlive(ctx, id)
	}
	return s.store.ExecutorRenewMemory(ctx, id, s.Now().Add(tuning.ExecutorLease), int64(m.Used>>20), int64(m.Limit>>20))
}

// MarkExecutorKilled records that executor id was killed for memory, for
// reason (ECS's stopped reason): its claims, when they lapse, end as out
// of memory.
func (s *Kills) MarkExecutorKilled(ctx context.Context, id, reason string) error {
	if id == "" {
		return errors.New("mark executor killed for memory: no executor id")
	}
	return s.store.ExecutorMarkKilled(ctx, id, kernel.Truncate(reason, 200), s.Now())
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
// and how its attempt ended, from its liveness record (JudgeKilled). A
// record that cannot be read judges no death as one for memory (the lease
// expiry goes on as before).
func (s *Kills) killedForMemory(ctx context.Context, t domain.Task) (string, bool) {
	m, ok := s.ExecutorMemory(ctx, t)
	if !ok {
		return "", false
	}
	return kernel.JudgeKilled(m)
}

// errLostForMemory is the claim that found its task's holder killed for
// memory: the task went back to READY for a larger executor, and the
// claimant drops its message (a new one was sent).
var errLostForMemory = errors.New("holder killed for memory; the task retries on a larger executor")

// loseForMemory is the takeover of a claim whose executor died for memory
// (sm.TaskLostForMemory): the task goes back to READY at the next size up
// (Escalate), its attempt ends as out of memory, and a new message goes
// out for it. done is false when the holder died of anything else: the
// takeover goes on.
func (s *Kills) loseForMemory(ctx context.Context, now time.Time, t domain.Task) (done bool, err error) {
	why, killed := s.killedForMemory(ctx, t)
	if !killed {
		return false, nil
	}
	sp, err := s.CachedSpec(ctx, t.Ref.Job)
	if err != nil {
		return true, err
	}
	mem, note := kernel.Escalate(kernel.Claim{Task: t, Spec: sp}) // kernel/taskmemory.go
	cause := kernel.Truncate(note+": "+why, kernel.MaxErrorLen)
	_, err = s.store.TaskLoseForMemory(ctx, dynamo.LostForMemoryParams{Holder: t, Now: now, Memory: mem, Err: cause, Due: now.Add(s.cfg.StuckAfter)})
	if errors.Is(err, sm.ErrInvalidTransition) {
		// The holder renewed, or another claim got there first: look again
		// shortly.
		return true, &domain.ClaimHeldError{LeaseUntil: now.Add(time.Second)}
	}
	if err != nil {
		return true, err
	}
	s.LostForMemory(ctx, t, sp, cause)
	if err := s.Resend(ctx, t.Ref, t.TraceSpan, 0); err != nil {
		// The sweep resends it (the task is due at StuckAfter).
		s.Logger(t.Ref).Warn("resend a task lost for memory", "err", err)
	}
	return true, fmt.Errorf("claim %s: %w: %w", t.Ref, errLostForMemory, domain.ErrAlreadyDone)
}

// expiryForMemory fills in the sweep's expiry p of t's lapsed lease when
// its executor was killed for memory (class, error, next size), and
// returns how the attempt ended for its history.
func (s *Kills) expiryForMemory(ctx context.Context, t domain.Task, p *dynamo.SweepTaskParams) (domain.AttemptEndKind, string) {
	why, killed := s.killedForMemory(ctx, t)
	if !killed {
		return domain.AttemptLeaseExpired, "lease expired (executor lost)"
	}
	sp, err := s.CachedSpec(ctx, t.Ref.Job)
	if err != nil {
		return domain.AttemptLeaseExpired, "lease expired (executor lost)"
	}
	mem, note := kernel.Escalate(kernel.Claim{Task: t, Spec: sp})
	p.Err = kernel.Truncate(note+": "+why, kernel.MaxErrorLen)
	p.Class, p.Memory = domain.ClassOutOfMemory, mem
	return domain.AttemptOutOfMemory, p.Err
}

// exhaustForMemory is the reason and class of a last attempt whose lease
// lapsed: out of memory, with its size, when its executor was killed for
// memory; else reason as given and lease_expired.
func (s *Kills) exhaustForMemory(ctx context.Context, t domain.Task, reason string) (string, domain.ErrorClass) {
	why, killed := s.killedForMemory(ctx, t)
	if !killed {
		return reason, domain.ClassLeaseExpired
	}
	size := t.Memory
	if sp, err := s.CachedSpec(ctx, t.Ref.Job); err == nil && size == 0 {
		size = sp.StageMemory(t.Ref.Stage)
	}
	return kernel.Truncate(fmt.Sprintf("ran out of memory at %s on attempt %d of %d: %s", kernel.SizeString(size), t.Attempt, t.MaxAttempts, why), kernel.MaxErrorLen),
		domain.ClassOutOfMemory
}
