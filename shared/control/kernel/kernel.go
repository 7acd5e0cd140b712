// Package kernel is what every capability of the control plane stands
// on: the job and stage facts cached per process, the job's state and its
// end, the timeline's writes, events, metrics, concurrency limits and the
// routing of ready messages. It imports nothing of the capabilities above
// it (stages, tasks, admission, operations, schedules, the sweep).
package kernel

import (
	"context"
	crand "crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"time"

	"github.com/batchwork/batchwork/shared/domain"
	"github.com/batchwork/batchwork/shared/lru"
	"github.com/batchwork/batchwork/shared/spec"
	sm "github.com/batchwork/batchwork/statemachine"
)

// Config is what the kernel needs of the control plane's configuration
// (control.Config holds the rest).
type Config struct {
	Queues Queues
	// StuckAfter is how long a READY task may wait unclaimed before the
	// sweep sends it a fresh message; a task put back to READY is due for
	// that look then.
	StuckAfter time.Duration
	// OwnerLimits caps each owner's running tasks across its jobs
	// (limits.go).
	OwnerLimits OwnerLimits
	// JobStateTTL is how long this process trusts a job's state it read
	// (jobstate.go); zero reads it for every claim and check.
	JobStateTTL time.Duration
}

// Kernel holds the ports, the clock and the caches the capabilities
// share. Its exported fields are injected by tests and mains after New,
// through control.Service, which embeds it.
type Kernel struct {
	cfg   Config
	store Store
	queue Queue
	blob  Blob
	log   *slog.Logger

	// Now is injected so tests control time.
	Now func() time.Time
	// Jitter returns a random duration in [0, d).
	Jitter func(d time.Duration) time.Duration
	// Sleep waits for d or until ctx is done; injected so tests on the
	// fake clock do not wait (operations/jobdelete.go).
	Sleep func(ctx context.Context, d time.Duration) error

	// Metrics receives claims, commits, failures and repairs as they are
	// decided (metrics.go); nil: none are recorded.
	Metrics Metrics

	// Events publishes the events this process's transitions wrote to the
	// outbox, right after each transition, and the sweep's leftovers
	// (events.go); nil: they wait in the outbox for a process that has one.
	Events EventPublisher

	// Slots holds the concurrency limits' slots (limits.go).
	Slots *Slots

	// Facts that never change once written, cached so the hot paths
	// (claim, commit) read them once per job; bounded, because a Fargate
	// executor or a local runner lives for weeks and sees every job.
	specs  *lru.Cache[string, JobMeta] // job id
	shards *lru.Cache[stageKey, int]   // once planned
	// jobStates is what this process knows of jobs' states, at most a TTL
	// old (jobstate.go).
	jobStates *jobStates
}

// New returns a kernel over the ports; cfg has its defaults already.
func New(cfg Config, store Store, q Queue, b Blob, log *slog.Logger) *Kernel {
	k := &Kernel{
		cfg: cfg, store: store, queue: q, blob: b, log: log,
		specs:     lru.New[string, JobMeta](specCacheSize),
		shards:    lru.New[stageKey, int](ShardCacheSize),
		jobStates: newJobStates(cfg.JobStateTTL),
		Now:       func() time.Time { return time.Now().UTC() },
		Sleep:     sleep,
		Jitter: func(d time.Duration) time.Duration {
			if d <= 0 {
				return 0
			}
			return time.Duration(rand.Int64N(int64(d)))
		},
	}
	k.Slots = &Slots{k}
	return k
}

// RememberMeta caches a job's meta as its submitter wrote it, sparing the
// job's first claim a read.
func (s *Kernel) RememberMeta(id string, m JobMeta) { s.specs.Put(id, m) }

// NoteJobEnded tells this process's job-state cache that job ended in st
// (or, with st empty, that its state must be read again).
func (s *Kernel) NoteJobEnded(job string, st sm.JobState) { s.jobStates.Ended(job, st) }

// Queues are the ready queues by priority class, and the dead-letter queue.
// Timer is the schedule timer queue (timers.go); empty where this process
// does not hand firings off (it then fires only from the sweep).
type Queues struct {
	High, Normal, Low, DLQ string
	Timer                  string
	// Sized are the ready queues of the executor sizes beyond the default,
	// one per size, without priority classes (sizedqueues.go); a size
	// missing here uses the priority queues.
	Sized map[spec.Size]string
}

// For returns the ready queue of a priority class.
func (q Queues) For(p spec.Priority) string {
	switch p {
	case spec.PriorityHigh:
		return q.High
	case spec.PriorityLow:
		return q.Low
	}
	return q.Normal
}

// Cache sizes (ShardCacheSize also bounds control's per-stage caches):
// a job's meta holds its spec (a few KB at most), so 4,096
// jobs is a few MB; far more jobs than run at once in one process.
const (
	specCacheSize  = 4096
	ShardCacheSize = 16384
)

// NewToken returns a random claim token.
func NewToken() string {
	var b [16]byte
	_, _ = crand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// JobMeta is what a job's tasks need of the job record, none of which
// ever changes: its spec, and its owner (for the owner's limit).
type JobMeta struct {
	Spec  *spec.Job
	Owner string
	// reused maps the stages of a rerun that reuse another job's
	// committed outputs to that job (operations/rerun.go).
	Reused map[int]string
	// Trace is the job's (domain.Job.Trace).
	Trace string
}

// CachedSpec returns a job's spec, cached: specs never change.
func (s *Kernel) CachedSpec(ctx context.Context, id string) (*spec.Job, error) {
	m, err := s.Meta(ctx, id)
	return m.Spec, err
}

// Meta returns a job's spec and owner, cached: one read per job per
// process.
func (s *Kernel) Meta(ctx context.Context, id string) (JobMeta, error) {
	if m, ok := s.specs.Get(id); ok {
		return m, nil
	}
	j, err := s.store.JobGet(ctx, id)
	if err != nil {
		return JobMeta{}, err
	}
	m := JobMeta{Spec: j.Spec, Owner: j.Owner, Reused: j.Reused, Trace: j.Trace}
	s.specs.Put(id, m)
	return m, nil
}

// StageShards is the number of completion counter shards of a planned
// stage, cached: a plan never changes.
func (s *Kernel) StageShards(ctx context.Context, job string, idx int) (int, error) {
	k := stageKey{job, idx} // not a formatted string: asked once per commit
	if n, ok := s.shards.Get(k); ok {
		return n, nil
	}
	st, err := s.store.StageGet(ctx, job, idx)
	if err != nil {
		return 0, err
	}
	if st.Shards == 0 {
		return 0, fmt.Errorf("stage %s/%d has no plan yet", job, idx)
	}
	s.shards.Put(k, st.Shards)
	return st.Shards, nil
}

// stageKey names a stage in the kernel's caches.
type stageKey struct {
	job   string
	stage int
}

// Logger is the logger of a task's control-plane lines, without its
// attempt (TaskLog has it).
func (s *Kernel) Logger(ref domain.TaskRef) *slog.Logger {
	return slog.New(s.log.Handler().WithAttrs(taskAttrs(make([]slog.Attr, 0, 3), ref)))
}

// IgnoreInvalid treats "the record already moved on" as success: the step
// was done by someone else, which is what makes concurrent and repeated
// control-plane steps harmless.
func IgnoreInvalid(err error) error {
	if errors.Is(err, sm.ErrInvalidTransition) {
		return nil
	}
	return err
}

// sleep is Kernel.Sleep's default.
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
