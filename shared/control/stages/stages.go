package stages

import (
	"strings"

	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/aws/smithy-go"

	"github.com/batchwork/batchwork/shared/blob"
	"github.com/batchwork/batchwork/shared/control/kernel"
	"github.com/batchwork/batchwork/shared/cost/meter"
	"github.com/batchwork/batchwork/shared/domain"
	"github.com/batchwork/batchwork/shared/dynamo"
	"github.com/batchwork/batchwork/shared/events"
	"github.com/batchwork/batchwork/shared/queue"
	"github.com/batchwork/batchwork/shared/spec"
	"github.com/batchwork/batchwork/shared/split"
	"github.com/batchwork/batchwork/shared/tracing"
	sm "github.com/batchwork/batchwork/statemachine"
)

// MaxInputKey bounds an input object's key and its pin (dynamo.PinBytes)
// together, so a task record stays under 1 KB.
const MaxInputKey = dynamo.MaxInputKeyBytes

// StartStage starts a BLOCKED stage whose upstream stages have completed
// and, if this caller won the start, materializes its tasks. The
// manifests of the shuffles it reads exist before it starts: their own
// completers write them after completing, and may not have yet
// (AfterStageCompleted).
func (s *Lifecycle) StartStage(ctx context.Context, job string, sp *spec.Job, idx int) error {
	ctx = meter.WithJob(ctx, job) // its requests are the job's cost
	if err := s.upstreamManifests(ctx, job, sp, idx); err != nil {
		return err
	}
	err := s.store.StageTransition(ctx, dynamo.StageTransitionParams{
		Job: job, Stage: idx, Event: sm.StageStart, Now: s.Now(), Due: s.Now().Add(s.cfg.StartGrace),
	})
	if errors.Is(err, sm.ErrInvalidTransition) {
		return nil // another caller started it and materializes it
	}
	if err != nil {
		return err
	}
	s.log.Info("stage started", "job_id", job, "stage", sp.Stages[idx].Name)
	return s.Materialize(ctx, job, sp, idx)
}

// materialize creates a running stage's counters and tasks and sends their
// messages. Every step is idempotent (a fixed plan, conditional puts,
// deterministic task ids), so the sweep can repeat it after a crash.
func (s *Lifecycle) Materialize(ctx context.Context, job string, sp *spec.Job, idx int) error {
	return s.materializeStage(ctx, job, sp, idx, -1, -1)
}

// materializeStage is materialize. A relay (relay.go) names the
// segment it goes on with and the count it resumes from (others pass
// -1 for both, and work every segment left: segments.go) and yields: it
// stops when another materializer moved the count, which then owns the
// rest, rather than carry on alongside it.
func (s *Lifecycle) materializeStage(ctx context.Context, job string, sp *spec.Job, idx, seg, resume int) (err error) {
	if src, err := s.stageSource(ctx, job, idx); err != nil { // reuse.go
		return err
	} else if src != job {
		return s.adoptStage(ctx, job, idx, src) // a rerun's reused stage runs no task
	}
	yield := resume >= 0
	st := sp.Stages[idx]
	var splits []split.Split
	total := 0
	switch src, fromShuffle := sp.ShuffleSource(idx); {
	case fromShuffle:
		// Every shuffle the stage reads has this count (spec.ShuffleSources).
		total = sp.Stages[src].Shuffle.Partitions
		parts := total
		if total, err = skewTotal(ctx, s, job, sp, idx, total); err != nil { // skew.go
			return err
		}
		if total > parts {
			// The pieces, past what submit counted.
			if done, err := s.chargePlan(ctx, job, idx, total, parts); done || err != nil { // plancharge.go
				return err
			}
		}
	case stageHasSplits(sp, idx):
		var err error
		if splits, err = s.plan(ctx, job, idx, st); errors.Is(err, domain.ErrBadInput) {
			return s.failMaterialize(ctx, job, idx, err)
		} else if err != nil {
			// Throttling, a network error, a timeout: the stage stays due
			// and the sweep plans it again. Only bad input ends a job, or
			// an error that outlasts PlanGiveUp (an input in another
			// region, a key the roles cannot use): the job then fails
			// with it rather than run on with no error to show.
			if started, gerr := s.store.StageGet(ctx, job, idx); gerr == nil && s.Now().Sub(started.Started) > PlanGiveUp {
				return s.failMaterialize(ctx, job, idx, fmt.Errorf("still failing after %s: %w", PlanGiveUp, err))
			}
			return fmt.Errorf("stage %s/%s: plan input: %w", job, st.Name, err)
		}
		total = len(splits)
		if done, err := s.chargePlan(ctx, job, idx, total, 1); done || err != nil { // plancharge.go
			return err
		}
	default:
		total = st.Partitions.Count
	}
	stage, err := s.store.StageSetPlan(ctx, job, idx, total)
	if err != nil {
		return err
	}
	// A span of the job's trace, whose tasks' spans it parents (tracing).
	ctx, span := tracing.Start(tracing.Parent(ctx, stage.Trace), "batchwork.materialize",
		tracing.JobKey.String(job), tracing.StageKey.String(st.Name), tracing.TasksKey.Int(total))
	defer func() { tracing.End(span, err) }()
	if yield && (seg >= stage.SegmentCount() || stage.SegmentNext(seg) != resume) {
		return nil
	}
	if seg <= 0 && stage.Enqueued == 0 {
		// Counters come before the first task, so no commit can find its
		// counter missing; a resumed materialization already has them,
		// and a segment's relay is sent after them (segments.go).
		if err := s.store.ShardPut(ctx, job, idx, stage.Total, stage.Shards); err != nil {
			return err
		}
	}
	c := chain{job: job, idx: idx, name: st.Name, splits: splits, retry: sp.StageRetry(idx), url: s.StageQueue(sp, idx)} // sizedqueues.go
	if seg < 0 {
		if stage, err = segmentStage(ctx, s.store, stage, s.cfg.SegmentTasks); err != nil { // segments.go
			return err
		}
		if stage.SegmentCount() > 1 {
			return s.runSegments(ctx, c, stage)
		}
		seg = 0
	}
	done, err := s.runChain(ctx, c, stage, seg, yield)
	if err != nil || !done {
		return err
	}
	return s.chainDone(ctx, c, stage)
}

// chain is what a materialization chain needs of its stage.
type chain struct {
	job    string
	idx    int
	name   string
	splits []split.Split // nil: the tasks carry no split
	retry  spec.Retry
	url    string
}

// runChain queues segment seg of a stage (the whole stage when it has
// one) chunk after chunk from where its count stands, and says whether
// the segment is all sent. It stops after ChunksPerCall chunks, or while
// another still fits in its deadline, and hands the rest on (leaveRest).
func (s *Lifecycle) runChain(ctx context.Context, c chain, stage domain.Stage, seg int, yield bool) (done bool, err error) {
	_, hi := stage.SegmentRange(seg)
	next := stage.SegmentNext(seg)
	var chunkTook time.Duration
	for chunk := 0; next < hi; chunk++ {
		// A call also stops while another chunk still fits in its
		// deadline (the api's, or the sweep's budget for this stage):
		// stopping between chunks leaves the count right, while running
		// out of time inside one leaves it for the next run to repeat.
		if chunk == s.cfg.ChunksPerCall || !timeLeft(ctx, 2*chunkTook) {
			// Hand the rest on: a relay on the timer queue, or the
			// sweep (relay.go).
			s.log.Info("stage partly materialized", "job_id", c.job, "stage", c.name, "segment", seg, "enqueued", next, "tasks", stage.Total)
			return false, s.leaveRest(ctx, c.job, c.idx, seg, next)
		}
		began := time.Now() // the real clock, as deadlines are
		from, to := next, min(next+s.cfg.ChunkTasks, hi)
		now := s.Now()
		tasks := make([]domain.Task, 0, to-from)
		msgs := make([]queue.Send, 0, to-from)
		for p := from; p < to; p++ {
			ref := domain.TaskRef{Job: c.job, Stage: c.idx, Partition: p}
			t := domain.Task{Ref: ref, State: sm.TaskReady, MaxAttempts: c.retry.MaxAttempts, Updated: now}
			trace := tracing.Mark(ctx, "batchwork.task", tracing.StageKey.String(c.name), tracing.PartitionKey.Int(p))
			t.TraceSpan = tracing.SpanID(trace) // its trace is the job's
			if c.splits != nil {
				t.Input = &c.splits[p]
			}
			tasks = append(tasks, t)
			msgs = append(msgs, queue.Send{Body: ref.String(), Trace: trace})
		}
		// Write before send, and count after both: a crash in between
		// repeats the chunk, whose puts are conditional and whose duplicate
		// messages are dropped at claim.
		if err := s.store.TaskPutMany(ctx, tasks, now.Add(s.cfg.StuckAfter)); err != nil {
			return false, err
		}
		if err := s.queue.SendBatch(ctx, c.url, msgs); err != nil {
			return false, fmt.Errorf("enqueue stage %s/%s: %w", c.job, c.name, err)
		}
		due := s.Now().Add(s.cfg.StartGrace)
		var advanced bool
		if seg == 0 {
			advanced, err = s.store.StageAdvanceEnqueued(ctx, c.job, c.idx, from, to, due)
		} else {
			advanced, err = s.store.StageAdvanceSegment(ctx, c.job, c.idx, seg, from, to, due)
		}
		if err != nil {
			return false, err
		}
		chunkTook = time.Since(began)
		if advanced {
			next = to // nothing else of the plan changes
			continue
		}
		// A concurrent materializer moved the count (or the stage
		// ended): carry on from it, or, continuing, leave the rest to it.
		if yield {
			return false, nil
		}
		if stage, err = s.store.StageGet(ctx, c.job, c.idx); err != nil {
			return false, err
		}
		if stage.State != sm.StageRunning {
			return false, nil
		}
		next = stage.SegmentNext(seg)
	}
	return true, nil
}

// chainDone finishes a stage whose chain has sent its last chunk: once
// every segment is sent, the stage is materialized and may complete.
func (s *Lifecycle) chainDone(ctx context.Context, c chain, stage domain.Stage) error {
	if stage.SegmentCount() > 1 {
		// Read after this chain's last count: of chains finishing at
		// once, the last to count sees every segment sent.
		var err error
		if stage, err = s.store.StageGet(ctx, c.job, c.idx); err != nil {
			return err
		}
		if stage.Materialized || !stage.AllSent() {
			return nil // done by another chain, or another still runs
		}
	}
	if err := s.store.StageMarkMaterialized(ctx, c.job, c.idx, s.Now().Add(s.cfg.CheckEvery)); errors.Is(err, sm.ErrInvalidTransition) {
		return nil // the stage ended (its job was cancelled or failed) meanwhile
	} else if err != nil {
		return err
	}
	s.log.Info("stage materialized", "job_id", c.job, "stage", c.name, "tasks", stage.Total)
	// Fast tasks may all have committed before the mark above, when their
	// committers could not yet complete the stage; and a stage with no
	// tasks has no committer at all. Either way, completing it is ours.
	return s.CheckStageComplete(ctx, c.job, c.idx)
}

// stageHasSplits says whether a stage's tasks each read a split of its
// input, which their records hold: only such tasks are written at
// materialization; the others are written by their first claim
// (sm.TaskUnwritten).
func stageHasSplits(sp *spec.Job, idx int) bool {
	_, ok := UnwrittenTotal(sp, idx)
	return !ok
}

// UnwrittenTotal is the number of tasks of a stage whose tasks are not
// written at materialization (stageHasSplits): fixed by its spec, so a
// claim tells a task of it from a partition it does not have without a
// read.
func UnwrittenTotal(sp *spec.Job, idx int) (int, bool) {
	st := sp.Stages[idx]
	if src, fromShuffle := sp.ShuffleSource(idx); fromShuffle {
		return sp.Stages[src].Shuffle.Partitions, true
	}
	if st.Partitions == nil || st.Partitions.HasInput() {
		return 0, st.Partitions == nil
	}
	return st.Partitions.Count, true
}

// timeLeft reports whether ctx has more than d left before its deadline
// (or has none).
func timeLeft(ctx context.Context, d time.Duration) bool {
	deadline, ok := ctx.Deadline()
	return !ok || time.Until(deadline) > d
}

// plan returns an S3-input stage's splits. The first planner writes them as
// an immutable object; later ones (a retry after a crash) read it back, so
// a changing prefix can never give one stage two different task lists.
//
// Every limit is checked before what it limits is held: the listing stops
// at the blob store's ListLimit, and the splits are counted before they
// are made. Planning runs in the api and sweep functions, whose memory an
// oversized plan would exhaust; a crash is no error, so the stage would
// stay due and crash every sweep after it. Limits passed are bad input,
// which fails the job with the field to change.
func (s *Lifecycle) plan(ctx context.Context, job string, idx int, st spec.Stage) ([]split.Split, error) {
	key := blob.PlanKey(job, st.Name)
	if raw, err := s.blob.Get(ctx, key); err == nil {
		var splits []split.Split
		if err := json.Unmarshal(raw, &splits); err != nil {
			return nil, fmt.Errorf("decode plan %s: %w", key, err)
		}
		return splits, nil
	} else if !errors.Is(err, domain.ErrNotFound) {
		return nil, err
	}
	splits, err := s.planInputs(ctx, idx, st) // planinputs.go
	if err != nil {
		return nil, err
	}
	raw, err := json.Marshal(splits)
	if err != nil {
		return nil, err
	}
	if err := s.blob.PutIfAbsent(ctx, key, raw); errors.Is(err, domain.ErrExists) {
		return s.plan(ctx, job, idx, st) // a concurrent planner won; use its plan
	} else if err != nil {
		return nil, err
	}
	return splits, nil
}

// PlanGiveUp bounds how long a stage's planning may keep failing with
// errors that look transient before its job fails with the error.
const PlanGiveUp = time.Hour

// failMaterialize ends a job whose stage cannot be planned (bad input).
func (s *Lifecycle) failMaterialize(ctx context.Context, job string, idx int, cause error) error {
	sp, err := s.CachedSpec(ctx, job)
	if err != nil {
		return err
	}
	reason := fmt.Sprintf("stage %q: plan input: %s", sp.Stages[idx].Name, publicError(cause))
	return s.FailJob(ctx, job, idx, reason, -1)
}

// publicError is an error as a job's owner may read it: an AWS error is
// cut to its code, because its message and request details can name
// accounts, roles and request ids of the installation.
func publicError(err error) string {
	msg := err.Error()
	var ae smithy.APIError
	if !errors.As(err, &ae) {
		return msg
	}
	if i := strings.Index(msg, "operation error "); i >= 0 {
		msg = msg[:i]
	}
	return msg + ae.ErrorCode()
}

// CheckStageComplete completes a running stage whose counters are all zero.
// Exactly one caller wins the transition and does the follow-up work.
func (s *Lifecycle) CheckStageComplete(ctx context.Context, job string, idx int) error {
	ctx = meter.WithJob(ctx, job) // its requests are the job's cost
	_, err := s.CompleteStage(ctx, job, idx)
	return err
}

// CompleteStage is CheckStageComplete that also says whether the stage has
// left RUNNING: this call completed it (and did the follow-up work), or a
// concurrent caller did, or it ended otherwise. Either way the stage's
// index entry is the business of whoever moved it.
func (s *Lifecycle) CompleteStage(ctx context.Context, job string, idx int) (ended bool, err error) {
	st, err := s.store.StageGet(ctx, job, idx)
	if err != nil {
		return false, err
	}
	if st.State != sm.StageRunning {
		return true, nil
	}
	if !st.Materialized {
		return false, nil
	}
	prog, err := s.store.StageProgress(ctx, st)
	if err != nil {
		return false, err
	}
	if !prog.Complete() {
		return false, nil
	}
	start := time.Now()
	meta, err := s.Meta(ctx, job)
	if err == nil {
		// A shuffle stage's manifest is written after the completion,
		// which holds only while the job runs (AfterStageCompleted):
		// written before it, a cancelled job's stage had a manifest
		// though it never completed.
		now := s.Now()
		err = s.store.StageTransition(ctx, dynamo.StageTransitionParams{
			Job: job, Stage: idx, Event: sm.StageComplete, Now: now, Due: now.Add(s.cfg.StartGrace),
			Outbox: kernel.StageCompletedEvent(job, meta.Owner, meta.Spec, idx, prog, now), // events.go
		})
	}
	if errors.Is(err, sm.ErrInvalidTransition) {
		// A concurrent caller completed it, or its job ended (the stage
		// is then still RUNNING, for the sweep to cancel with its job).
		// This caller completed nothing, so it emits no span: a second
		// one would show a completion that never happened.
		st, err := s.store.StageGet(ctx, job, idx)
		return err == nil && st.State != sm.StageRunning, err
	}
	// The completer's span (or a failed attempt's), back-dated to when
	// it began.
	ctx, span := tracing.StartAt(tracing.Parent(ctx, st.Trace), "batchwork.stage.complete", start,
		tracing.JobKey.String(job), tracing.StageKey.String(st.Name), tracing.TasksKey.Int(st.Total))
	defer func() { tracing.End(span, err) }()
	if err != nil {
		return false, err
	}
	s.log.Info("stage completed", "job_id", job, "stage", st.Name, "tasks", st.Total)
	s.PublishEvents(ctx, events.StageCompletedID(job, idx))
	return true, s.AfterStageCompleted(ctx, job, idx)
}

// AfterStageCompleted writes a shuffle stage's manifest, starts
// downstream stages whose upstream is complete, and ends the job when
// every stage is complete. The completion winner runs it; the sweep
// repeats it if the winner died, so each step is idempotent.
//
// The manifest is what downstream tasks read. A downstream stage that
// also waits on another upstream may be started by that upstream's
// completer the moment both are COMPLETED, before this stage's completer
// (or the sweep, should it have died) writes the manifest: so whoever
// starts a stage first writes the manifest of each shuffle it reads
// (StartStage, upstreamManifests). Every task of a completed stage committed, so any
// writer writes the same list, and the first one's stays.
func (s *Lifecycle) AfterStageCompleted(ctx context.Context, job string, idx int) error {
	sp, err := s.CachedSpec(ctx, job)
	if err != nil {
		return err
	}
	if sp.Stages[idx].Shuffle != nil {
		if err := s.writeManifest(ctx, job, sp, []int{idx}, blob.StageManifestKey(job, sp.Stages[idx].Name)); err != nil {
			return err
		}
	}
	stages, err := s.store.StageList(ctx, job)
	if err != nil {
		return err
	}
	state := func(i int) sm.StageState { return stages[i].State }
	for _, d := range sp.Downstream(idx) {
		if state(d) != sm.StageBlocked || !UpstreamCompleted(sp, d, state) {
			continue
		}
		if err := s.StartStage(ctx, job, sp, d); err != nil {
			return err
		}
	}
	if slices.IndexFunc(stages, func(st domain.Stage) bool { return st.State != sm.StageCompleted }) < 0 {
		var completed time.Time // when the last stage completed
		for _, st := range stages {
			if st.Ended.After(completed) {
				completed = st.Ended
			}
		}
		if err := s.finishJob(ctx, job, sp, completed); err != nil {
			return err
		}
	}
	return s.store.DueSet(ctx, dynamo.DueItem{Kind: dynamo.DueStage, Job: job, Stage: idx}, time.Time{})
}

// upstreamManifests writes the manifests of the shuffle stages that
// stage idx reads (its upstream stages, all completed when it starts)
// where no one has yet: one read each when they exist.
func (s *Lifecycle) upstreamManifests(ctx context.Context, job string, sp *spec.Job, idx int) error {
	for _, name := range sp.Stages[idx].After {
		u, _ := sp.StageIndex(name)
		if sp.Stages[u].Shuffle == nil {
			continue
		}
		if err := s.writeManifest(ctx, job, sp, []int{u}, blob.StageManifestKey(job, name)); err != nil {
			return err
		}
	}
	return nil
}

func UpstreamCompleted(sp *spec.Job, idx int, state func(int) sm.StageState) bool {
	for _, name := range sp.Stages[idx].After {
		u, _ := sp.StageIndex(name)
		if state(u) != sm.StageCompleted {
			return false
		}
	}
	return true
}

// writeManifest lists the committed outputs of stages and writes them once
// to key, in pages (blob.ManifestWriter). It reads the tasks one bucket
// at a time and holds one page of outputs, so its memory does not grow
// with the stage: a stage of 100,000 tasks and 16 shuffle parts is 1.6
// million outputs, which as one list took more than the 1 GB a committer
// has. Pages come first and the manifest last, so a manifest that exists
// is whole: it was written from the same committed records and is kept.
// A writer that died or ran out of time (a sweep step has a budget) left
// pages: the next one goes on after them, so a large manifest is finished
// over several calls rather than started over by each.
func (s *Lifecycle) writeManifest(ctx context.Context, job string, sp *spec.Job, stages []int, key string) error {
	if _, err := s.blob.Get(ctx, key); err == nil {
		return nil
	} else if !errors.Is(err, domain.ErrNotFound) {
		return err
	}
	if done, err := s.copyReusedManifest(ctx, job, sp, stages, key); done || err != nil { // reuse.go
		return err
	}
	head := domain.Manifest{Job: job, Bucket: s.blob.Bucket(), Created: s.Now().Format("2006-01-02T15:04:05.000Z07:00")}
	if len(stages) == 1 {
		head.Stage = sp.Stages[stages[0]].Name
	}
	var err error
	if head.Failed, head.FailedTotal, err = s.failedPartitions(ctx, job, sp, stages, key == blob.JobManifestKey(job)); err != nil { // failedpartitions.go
		return err
	}
	w := blob.NewManifestWriter(s.blob, key, head, s.cfg.ManifestPageSize)
	if len(stages) == 1 {
		if sh := sp.Stages[stages[0]].Shuffle; sh != nil && (sh.Partitions > 1 || sh.Ranged()) {
			// Its map tasks may have written one indexed object each
			// (blob/shuffle.go), or a sorted run (blob/rangerun.go):
			// readers that do not know them must fail.
			w.IndexedShuffle()
		}
	}
	resume, err := w.Resume(ctx, s.blob)
	if err != nil {
		return err
	}
	for _, idx := range stages {
		name := sp.Stages[idx].Name
		// Where this stage's outputs start: all of them, none (the pages
		// written cover it), or those after the last one written.
		after, skipParts := -1, -1
		if resume != nil {
			if resume.Stage != name {
				continue
			}
			after, skipParts = resume.Partition-1, resume.Part
			resume = nil
		}
		// A rerun's reused stage: the tasks of the job that committed it.
		src, err := s.stageSource(ctx, job, idx) // reuse.go
		if err != nil {
			return err
		}
		st, err := s.store.StageGet(ctx, src, idx)
		if err != nil {
			return err
		}
		partial, err := skewPartials(ctx, s, job, sp, idx) // skew.go
		if err != nil {
			return err
		}
		listed, first := 0, after+1
		for after+1 < st.Total {
			pg, err := s.store.TaskListPage(ctx, dynamo.TaskPageParams{
				Job: src, Stage: idx, Total: st.Total, After: after, Limit: dynamo.TaskBucket, MaxReads: 1,
			})
			if err != nil {
				return err
			}
			for _, row := range pg.Rows {
				t := row.Task
				if t.State == sm.TaskFailed && t.Tolerated {
					listed++ // no outputs; head.Failed lists it
					continue
				}
				if t.State != sm.TaskSucceeded {
					return fmt.Errorf("manifest of stage %s: task %s is %s", name, t.Ref, t.State)
				}
				listed++
				if partial(t.Ref.Partition) {
					continue // reduced again by its partition's task
				}
				r := 0
				if t.Ref.Partition == first {
					r = skipParts + 1
				}
				for ; r < t.Outputs; r++ {
					if err := w.Add(ctx, domain.Output{
						Stage: name, Partition: t.Ref.Partition, Attempt: t.CommittedAttempt, Part: r,
						Key: blob.OutputKey(src, name, t.Ref.Partition, t.CommittedAttempt, r),
					}); err != nil {
						return err
					}
				}
			}
			if pg.Next <= after {
				return fmt.Errorf("manifest of stage %s: listing its tasks stopped after partition %d", name, after)
			}
			after = pg.Next
		}
		if listed != st.Total-first {
			// A complete stage has every task committed; one missing would
			// silently leave its outputs out of the manifest.
			return fmt.Errorf("manifest of stage %s: %d of its %d tasks from partition %d listed", name, listed, st.Total-first, first)
		}
	}
	if resume != nil {
		return fmt.Errorf("manifest %s: its pages end in stage %q, which it does not list: %w", key, resume.Stage, blob.ErrBadManifest)
	}
	return w.Close(ctx)
}

// finishJob writes the manifest of a job whose stages have all completed
// and ends it: SUCCEEDED, or, for a job with an output folder, through
// PUBLISHING (publishJob), so the outputs are in their final folder
// before the job succeeds.
func (s *Lifecycle) finishJob(ctx context.Context, job string, sp *spec.Job, completed time.Time) error {
	key := blob.JobManifestKey(job)
	if err := s.writeManifest(ctx, job, sp, sp.Sinks(), key); err != nil {
		return err
	}
	if sp.Output != "" {
		return s.publishJob(ctx, job, sp, key, completed)
	}
	err := s.EndJob(ctx, job, sm.JobSucceed, "", key, s.Now())
	if err == nil {
		s.log.Info("job succeeded", "job_id", job, "manifest", key)
	}
	return kernel.IgnoreInvalid(err)
}

// FailJob fails a stage and its job with reason, and cancels the job's
// other stages so nothing else starts. gen is the job's redrive count
// when the failure was decided (< 0: read here): every write holds only
// while it is still the job's (jobgen.go).
func (s *Lifecycle) FailJob(ctx context.Context, job string, idx int, reason string, gen int) error {
	gen, err := s.RedriveGen(ctx, job, gen)
	if err != nil {
		return err
	}
	now := s.Now()
	if err := kernel.IgnoreInvalid(s.store.StageTransition(ctx, dynamo.StageTransitionParams{
		Job: job, Stage: idx, Event: sm.StageFail, Now: now, Reason: reason, Redrives: kernel.GenRef(gen),
	})); err != nil {
		return err
	}
	err = s.EndJobGen(ctx, job, sm.JobFail, reason, "", now, gen)
	if err == nil {
		s.log.Error("job failed", "job_id", job, "reason", reason)
	} else if err = kernel.IgnoreInvalid(err); err != nil {
		return err
	}
	return s.CancelStages(ctx, job, gen)
}

// CancelStages cancels every stage of an ended job that has not ended,
// while its redrive count is gen (< 0: read here; jobgen.go).
func (s *Lifecycle) CancelStages(ctx context.Context, job string, gen int) error {
	gen, err := s.RedriveGen(ctx, job, gen)
	if err != nil {
		return err
	}
	stages, err := s.store.StageList(ctx, job)
	if err != nil {
		return err
	}
	for _, st := range stages {
		if sm.Stages.IsTerminal(st.State) {
			continue
		}
		if err := kernel.IgnoreInvalid(s.store.StageTransition(ctx, dynamo.StageTransitionParams{
			Job: job, Stage: st.Index, Event: sm.StageCancel, Now: s.Now(), Redrives: kernel.GenRef(gen),
		})); err != nil {
			return err
		}
	}
	return nil
}
