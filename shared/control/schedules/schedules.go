package schedules

import (
	"context"
	crand "crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"regexp"
	"sync"
	"time"

	"github.com/batchwork/batchwork/shared/control/kernel"
	"github.com/batchwork/batchwork/shared/control/page"
	"github.com/batchwork/batchwork/shared/domain"
	"github.com/batchwork/batchwork/shared/dynamo"
	"github.com/batchwork/batchwork/shared/schedule"
	"github.com/batchwork/batchwork/shared/spec"
	sm "github.com/batchwork/batchwork/statemachine"
)

// ScheduleIDPattern is the form of a schedule id (see NewScheduleID).
var ScheduleIDPattern = regexp.MustCompile(`^s[0-9a-f]{11}[0-9a-f]{10}$`)

// NewScheduleID returns a schedule id that sorts by creation time.
func NewScheduleID() string {
	var b [5]byte
	_, _ = crand.Read(b[:])
	return fmt.Sprintf("s%011x%s", time.Now().UnixMilli(), hex.EncodeToString(b[:]))
}

// ScheduleView is a schedule as the API shows it.
type ScheduleView struct {
	schedule.Schedule
	// LastFired is the latest scheduled time handled; Next the upcoming
	// firing as of the last sweep that looked at the schedule.
	LastFired *time.Time `json:"lastFired,omitempty"`
	Next      *time.Time `json:"next,omitempty"`
	LastJobID string     `json:"lastJobId,omitempty"`
}

func viewOf(r dynamo.ScheduleRecord) ScheduleView {
	v := ScheduleView{Schedule: r.Schedule, LastJobID: r.LastJob}
	if !r.Cursor.IsZero() {
		v.LastFired = &r.Cursor
	}
	if !r.Next.IsZero() {
		v.Next = &r.Next
	}
	return v
}

// CreateSchedule validates a schedule document (see schedule.Parse) and
// stores it; validation errors are *spec.ValidationError naming the field,
// and nothing is written for them.
func (s *Firer) CreateSchedule(ctx context.Context, owner string, body []byte) (ScheduleView, error) {
	if err := s.admission.CheckOwner(owner); err != nil {
		return ScheduleView{}, err
	}
	sc, err := schedule.Parse(body)
	if err != nil {
		return ScheduleView{}, err
	}
	now := s.now()
	sc.ID = NewScheduleID()
	sc.Owner = owner
	// Whole seconds: rate firings are anchored at the creation time, and
	// keys and cursors then carry no sub-second noise.
	sc.CreatedAt = now.UTC().Truncate(time.Second)
	if err := sc.Validate(); err != nil { // end after creation
		return ScheduleView{}, err
	}
	if sp, err := spec.Parse(sc.Spec); err == nil { // valid: Validate parsed it
		if err := s.admission.CheckScheduleSpec(ctx, owner, sp); err != nil {
			return ScheduleView{}, err
		}
	}
	limit := s.cfg.ScheduleQuota.For(owner)
	if err := s.store.ScheduleCreate(ctx, *sc, now, limit); errors.Is(err, dynamo.ErrQuotaReached) {
		return ScheduleView{}, &kernel.QuotaError{Quota: "schedules", Max: limit}
	} else if err != nil {
		return ScheduleView{}, err
	}
	s.log.Info("schedule created", "schedule_id", sc.ID, "owner", owner, "expression", sc.Expression)
	return ScheduleView{Schedule: *sc}, nil
}

func (s *Firer) ownedSchedule(ctx context.Context, owner, id string) (dynamo.ScheduleRecord, error) {
	if !ScheduleIDPattern.MatchString(id) {
		return dynamo.ScheduleRecord{}, &spec.FieldError{Field: "id", Message: "is not a schedule id"}
	}
	// Schedules are keyed by owner, so another owner's schedule is simply
	// not found: its existence does not leak.
	r, err := s.store.ScheduleGet(ctx, owner, id)
	return r, err
}

// GetSchedule returns one of the owner's schedules.
func (s *Firer) GetSchedule(ctx context.Context, owner, id string) (ScheduleView, error) {
	r, err := s.ownedSchedule(ctx, owner, id)
	if err != nil {
		return ScheduleView{}, err
	}
	return viewOf(r), nil
}

// ScheduleList is a page of schedules, by id (creation order).
type ScheduleList struct {
	Schedules  []ScheduleView `json:"schedules"`
	NextCursor string         `json:"nextCursor,omitempty"`
}

// ListSchedules lists the owner's schedules. The cursor is the last id of
// the previous page.
func (s *Firer) ListSchedules(ctx context.Context, owner string, limit int, cursor string) (ScheduleList, error) {
	limit, err := page.CheckLimit(limit)
	if err != nil {
		return ScheduleList{}, err
	}
	if cursor != "" && !ScheduleIDPattern.MatchString(cursor) {
		return ScheduleList{}, &spec.FieldError{Field: "cursor", Message: "is not a cursor of this list"}
	}
	recs, next, err := s.store.ScheduleList(ctx, owner, cursor, limit)
	if err != nil {
		return ScheduleList{}, err
	}
	out := ScheduleList{Schedules: make([]ScheduleView, 0, len(recs)), NextCursor: next}
	for _, r := range recs {
		out.Schedules = append(out.Schedules, viewOf(r))
	}
	return out, nil
}

// PauseSchedule stops a schedule's firings until it is resumed. It is
// idempotent. The firing step re-reads the schedule, so an index entry
// already due does not fire.
func (s *Firer) PauseSchedule(ctx context.Context, owner, id string) (ScheduleView, error) {
	return s.setPaused(ctx, owner, id, true)
}

// ResumeSchedule lets a paused schedule fire again from now on: times that
// passed while it was paused are not caught up. It is idempotent.
func (s *Firer) ResumeSchedule(ctx context.Context, owner, id string) (ScheduleView, error) {
	return s.setPaused(ctx, owner, id, false)
}

func (s *Firer) setPaused(ctx context.Context, owner, id string, paused bool) (ScheduleView, error) {
	_, err := s.ownedSchedule(ctx, owner, id)
	if err != nil {
		return ScheduleView{}, err
	}
	changed, err := s.store.ScheduleSetPaused(ctx, owner, id, paused, s.now())
	if err != nil {
		return ScheduleView{}, err
	}
	if changed {
		s.log.Info("schedule paused", "schedule_id", id, "paused", paused)
	}
	return s.GetSchedule(ctx, owner, id)
}

// DeleteSchedule deletes a schedule; it fires no more. Its jobs and run
// history are kept.
func (s *Firer) DeleteSchedule(ctx context.Context, owner, id string) error {
	_, err := s.ownedSchedule(ctx, owner, id)
	if err != nil {
		return err
	}
	if err := s.store.ScheduleDelete(ctx, owner, id); err != nil {
		return err
	}
	s.log.Info("schedule deleted", "schedule_id", id)
	return nil
}

// ScheduleRun is one entry of a schedule's history.
type ScheduleRun struct {
	Scheduled time.Time `json:"scheduled"`
	// Action is started, skipped (the overlap policy, or a spec the
	// control plane refused at firing, e.g. naming a task or program no
	// executor runs or a function no longer allowed: see Note) or missed
	// (downtime under skipMissed).
	Action    string     `json:"action"`
	StartedAt *time.Time `json:"startedAt,omitempty"`
	JobID     string     `json:"jobId,omitempty"`
	// Status is the job's current (eventually final) status.
	Status string `json:"status,omitempty"`
	// CatchUp marks the run fireOnce made for missed times, from Scheduled
	// through Through; MissedCount is how many times it covers (or, for a
	// missed entry, how many were skipped).
	CatchUp     bool       `json:"catchUp,omitempty"`
	Through     *time.Time `json:"through,omitempty"`
	MissedCount int64      `json:"missedCount,omitempty"`
	Note        string     `json:"note,omitempty"`
}

// RunList is a page of a schedule's history, newest first.
type RunList struct {
	Runs       []ScheduleRun `json:"runs"`
	NextCursor string        `json:"nextCursor,omitempty"`
}

// ScheduleRuns lists a schedule's history, newest first, with each job's
// status read from the job. The cursor is the scheduled time (RFC 3339)
// of the previous page's last entry.
func (s *Firer) ScheduleRuns(ctx context.Context, owner, id string, limit int, cursor string) (RunList, error) {
	limit, err := page.CheckLimit(limit)
	if err != nil {
		return RunList{}, err
	}
	var before time.Time
	if cursor != "" {
		if before, err = time.Parse(time.RFC3339Nano, cursor); err != nil {
			return RunList{}, &spec.FieldError{Field: "cursor", Message: "is not a cursor of this list"}
		}
	}
	if _, err := s.ownedSchedule(ctx, owner, id); err != nil {
		return RunList{}, err
	}
	runs, err := s.store.ScheduleRuns(ctx, id, before, limit)
	if err != nil {
		return RunList{}, err
	}
	out := RunList{Runs: make([]ScheduleRun, 0, len(runs))}
	for _, r := range runs {
		v := ScheduleRun{Scheduled: r.Scheduled, Action: string(r.Action), JobID: r.JobID, CatchUp: r.CatchUp, MissedCount: r.Missed, Note: r.Note}
		if !r.Started.IsZero() {
			v.StartedAt = &r.Started
		}
		if !r.Through.IsZero() {
			v.Through = &r.Through
		}
		if r.JobID != "" {
			st, err := s.store.JobState(ctx, r.JobID)
			if err != nil && !errors.Is(err, domain.ErrNotFound) {
				return RunList{}, err
			}
			v.Status = string(st)
		}
		out.Runs = append(out.Runs, v)
	}
	if len(runs) == limit {
		out.NextCursor = runs[len(runs)-1].Scheduled.Format(time.RFC3339Nano)
	}
	return out, nil
}

// ---- firing ----------------------------------------------------------------

// Firing limits: one shard run walks at most fireMinutes minutes of its
// shard and handles at most fireSchedules index entries, fireWorkers at a
// time, so a long downtime or a busy minute is worked off over several
// runs (shards.go).
const (
	fireMinutes   = 30
	fireSchedules = 500
	fireWorkers   = 8
)

// FireCounts says what one FireDue run (or shard run) did.
type FireCounts struct {
	Buckets  int `json:"buckets"`
	Examined int `json:"examined"`
	Started  int `json:"started"`
	Skipped  int `json:"skipped"`
	Missed   int `json:"missed"`
	// Dropped counts entries of paused or deleted schedules.
	Dropped int `json:"dropped"`
	Errors  int `json:"errors"`
	// Shards counts the shards fired (their leases taken); Leased those
	// left to another run holding them; Lost the runs whose lease expired
	// before their watermark moved; Relayed the shards sent on to another
	// run with work left.
	Shards  int `json:"shards,omitempty"`
	Leased  int `json:"leased,omitempty"`
	Lost    int `json:"lost,omitempty"`
	Relayed int `json:"relayed,omitempty"`
	// HandedOff counts the firings handed to the timer queue.
	HandedOff int `json:"handedOff,omitempty"`
}

// FireDue fires the schedules whose index entries are due at now, shard
// by shard, each shard a run holding its lease (shards.go); a shard
// another run holds is left to it. A shard run Queries the buckets of the
// minutes after the shard's watermark up to now (never scanning), plans
// each schedule, applies its overlap policy, submits the jobs (each with
// the idempotency key schedule.FiringKey, so racing runs create one job
// per scheduled time), records the runs, advances the schedule's cursor
// conditionally and moves its index entry to its next firing. A shard's
// watermark moves past a minute only when its bucket of that minute was
// drained, and never past the minute before now, so an entry written
// into the current minute is still found. FireDue hands nothing off and
// relays nothing: the next call goes on where this one stopped.
func (s *Firer) FireDue(ctx context.Context, now time.Time) (FireCounts, error) {
	global, ok, err := s.store.ScheduleWatermark(ctx)
	if err != nil || !ok {
		return FireCounts{}, err
	}
	c, err := s.fireShards(ctx, now, shardRun{run: newRunID(), global: global, stopBy: runStop(ctx)}, false)
	if c.Examined > 0 || c.Errors > 0 {
		s.log.Info("schedules fired", "counts", c)
	}
	if err != nil {
		return c, fmt.Errorf("fire schedules: %d errors, first: %w", c.Errors, err)
	}
	return c, nil
}

// queryBuckets reads the entries of each bucket (at most limit each),
// fireWorkers at a time; entries[i] and errs[i] are buckets[i]'s.
func queryBuckets(ctx context.Context, ss Store, buckets []schedule.Bucket, limit int) ([][]dynamo.IndexEntry, []error) {
	entries := make([][]dynamo.IndexEntry, len(buckets))
	errs := make([]error, len(buckets))
	var wg sync.WaitGroup
	sem := make(chan struct{}, fireWorkers)
	for i, b := range buckets {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			entries[i], errs[i] = ss.ScheduleDueEntries(ctx, b, limit)
		}()
	}
	wg.Wait()
	return entries, errs
}

// fireEntry handles one index entry. Every step is safe to repeat: the
// submission is idempotent, the run record's first write wins, and only
// one sweep advances the cursor from the value it planned with. rec is
// the schedule if the caller has read it already (a timer reads it before
// waiting for the time), else nil. A job is created only if the schedule
// is still as read (dynamo.FiringGuard, checked in the job's own
// transaction), so a schedule paused or deleted after the read fires no
// job, and a read that went stale is simply read again.
func (s *Firer) fireEntry(ctx context.Context, e dynamo.IndexEntry, rec *dynamo.ScheduleRecord, now time.Time, c *FireCounts, retries int) error {
	if e.Job != "" {
		if e.At.After(now) {
			// Its minute is being read before its time: the watermark
			// stays before the current minute, so a later pass (or the
			// timer) starts it, never early.
			return nil
		}
		return s.fireStart(ctx, e, nil, now, c) // starts.go
	}
	if rec == nil {
		r, err := s.store.ScheduleGet(ctx, e.Owner, e.ScheduleID)
		if errors.Is(err, domain.ErrNotFound) {
			c.Dropped++
			return s.store.ScheduleMoveEntry(ctx, e, time.Time{}, now) // deleted: drop the entry
		}
		if err != nil {
			return err
		}
		rec = &r
	}
	// The runs of the times handled are recorded with the cursor's move
	// (ScheduleAdvanceCursor), in its one request.
	var runs []dynamo.Run
	// again re-reads the schedule after another firer moved it on (or a
	// pause, resume or delete changed it) and handles this entry from its
	// new state: the jobs the other firer started exist once whatever
	// happens, by their idempotency keys. A job this firer started is
	// recorded first, on its own: of two firers that planned one time
	// with different overlap verdicts, the one whose cursor moved may
	// have recorded it skipped, or missed (catchUp=skipMissed, planned
	// past the grace), and the history must name the job that exists (a
	// started run replaces a skipped or missed one, SchedulePutRun).
	again := func() error {
		for _, r := range runs {
			if r.Action == dynamo.RunStarted {
				if err := s.store.SchedulePutRun(ctx, e.ScheduleID, r); err != nil {
					return err
				}
			}
		}
		if retries == 0 {
			return fmt.Errorf("schedule %s: cursor keeps moving", e.ScheduleID)
		}
		return s.fireEntry(ctx, e, nil, now, c, retries-1)
	}
	sc := rec.Schedule
	if sc.Paused {
		c.Dropped++
		return s.store.ScheduleMoveEntry(ctx, e, time.Time{}, now) // resuming puts it back
	}
	plan, err := sc.Plan(schedule.PlanParams{LastFired: rec.Cursor, Now: now})
	if err != nil {
		return fmt.Errorf("schedule %s: %w", sc.ID, err)
	}
	log := s.log.With("schedule_id", sc.ID)
	lastJob := rec.LastJob
	started := ""
	if plan.Missed.Count > 0 && sc.CatchUp == schedule.CatchUpSkipMissed {
		c.Missed++
		runs = append(runs, dynamo.Run{
			Scheduled: plan.Missed.First, Through: plan.Missed.Last, Missed: plan.Missed.Count, Action: dynamo.RunMissed,
			Note: fmt.Sprintf("%d scheduled times missed during downtime; skipped by catchUp=skipMissed", plan.Missed.Count),
		})
	}
	for _, f := range plan.Fire {
		run := dynamo.Run{Scheduled: f.Scheduled, CatchUp: f.CatchUp}
		if f.CatchUp {
			run.Through, run.Missed = f.Through, plan.Missed.Count
			run.Note = fmt.Sprintf("one run for %d scheduled times missed during downtime (catchUp=fireOnce)", plan.Missed.Count)
		}
		running := false
		if lastJob != "" && sc.Overlap != schedule.OverlapAllow { // allow starts either way: no read
			st, err := s.store.JobState(ctx, lastJob)
			if err != nil && !errors.Is(err, domain.ErrNotFound) {
				return err
			}
			running = st == sm.JobRunning || st == sm.JobPublishing // not ended
		}
		switch sc.Overlap.Decide(running) {
		case schedule.ActionSkip:
			c.Skipped++
			run.Action = dynamo.RunSkipped
			run.Note = "previous run " + lastJob + " still running (overlap=skip)"
			runs = append(runs, run)
			continue
		case schedule.ActionCancelPreviousAndStart:
			if err := s.admission.CancelPrevious(ctx, sc.Owner, lastJob); err != nil {
				return fmt.Errorf("schedule %s: cancel previous run %s: %w", sc.ID, lastJob, err)
			}
			run.Note = "cancelled previous run " + lastJob + " (overlap=cancelPrevious)"
		}
		res, err := s.admission.SubmitFiring(ctx, Firing{Owner: sc.Owner, IdempotencyKey: schedule.FiringKey(sc.ID, f.Scheduled), Spec: sc.Spec,
			Params: sc.FiringParams(f.Scheduled), // the slot's, so every retry of the key submits the same
			Guard:  dynamo.FiringGuard{Owner: sc.Owner, ScheduleID: sc.ID, Cursor: rec.Cursor}})
		if errors.Is(err, dynamo.ErrCursorMoved) {
			return again()
		}
		if RefusedForGood(err) {
			// A spec the control plane refuses now (a task or program no
			// executor runs, a function the operator no longer allows, an
			// input bucket no longer allowed, a job larger than the
			// owner's quota) is refused on every retry, and a firing that
			// kept erring would hold the shared watermark back, and with
			// it every owner's schedules: the time is recorded as
			// skipped, with why, and the schedule moves on.
			c.Skipped++
			note := "not started: " + err.Error()
			if run.Note != "" { // a catch-up's
				note = run.Note + "; " + note
			}
			run.Action, run.Note = dynamo.RunSkipped, note
			log.Warn("schedule firing skipped", "scheduled", f.Scheduled, "err", err)
			runs = append(runs, run)
			continue
		}
		if err != nil {
			return fmt.Errorf("schedule %s: submit firing %s: %w", sc.ID, f.Scheduled.Format(time.RFC3339), err)
		}
		created := res.CreatedAt
		if !res.Created { // an earlier firer's job: its own creation time
			job, err := s.store.JobGet(ctx, res.JobID)
			if err != nil {
				return err
			}
			created = job.Created
		}
		run.Action, run.JobID, run.Started = dynamo.RunStarted, res.JobID, created
		runs = append(runs, run)
		if res.Created {
			c.Started++
			log.Info("schedule fired", "scheduled", f.Scheduled, "job_id", res.JobID, "late", now.Sub(f.Scheduled))
		}
		lastJob, started = res.JobID, res.JobID
	}
	err = s.store.ScheduleAdvanceCursor(ctx, sc.Owner, sc.ID, rec.Cursor, plan.Cursor, started, plan.Next, e, runs, now)
	if errors.Is(err, dynamo.ErrCursorMoved) {
		// Another sweep handled these times (or the schedule was paused,
		// resumed or deleted).
		return again()
	}
	return err
}

// RefusedForGood says whether a firing's submit error is a refusal that
// no retry changes: the spec's or a request field's validation (a
// *spec.ValidationError, which control's *UnknownTaskError wraps, or a
// *spec.FieldError), an idempotency conflict, or a quota the job alone
// exceeds. Anything else (DynamoDB or S3 failing, an owner at a quota
// its running jobs will free) is retried by the next sweep.
func RefusedForGood(err error) bool {
	var ve *spec.ValidationError
	var fe *spec.FieldError
	var qe *kernel.QuotaError
	switch {
	case err == nil:
		return false
	case errors.As(err, &ve), errors.As(err, &fe), errors.Is(err, domain.ErrIdempotencyConflict):
		return true
	case errors.As(err, &qe):
		return qe.Alone
	}
	return false
}

// Sweep is the sweep's firing step: fire what is due, then hand
// what is due soon to the timer queue (timers.go). Handing off after
// firing finds the entries this run just moved to their next firing.
//
// Every shard whose lease is free is run here, shardRuns at once, each
// handing off its own window; a shard left unfinished is relayed to the
// timer queue's consumer (shards.go).
func (s *Firer) Sweep(ctx context.Context, now time.Time, c *kernel.SweepCounts) error {
	global, ok, err := s.store.ScheduleWatermark(ctx)
	if err != nil || !ok {
		return err
	}
	r := shardRun{run: newRunID(), global: global, handOff: s.cfg.TimerQueue != "", stopBy: runStop(ctx)}
	fc, err := s.fireShards(ctx, now, r, true)
	c.Fired += fc.Started
	c.HandedOff += fc.HandedOff
	if fc.Examined > 0 || fc.Errors > 0 || fc.Relayed > 0 {
		s.log.Info("schedules fired", "counts", fc)
	}
	return err
}
