package readside

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/batchwork/batchwork/shared/cost/meter"
	"github.com/batchwork/batchwork/shared/domain"
	sm "github.com/batchwork/batchwork/statemachine"
)

// JobStatus is a job's status as the API shows it.
type JobStatus struct {
	ID       string `json:"id"`
	Name     string `json:"name"`
	State    string `json:"state"`
	Error    string `json:"error,omitempty"`
	Manifest string `json:"manifest,omitempty"`
	// Output is the folder the job publishes its outputs to when it
	// succeeds (its spec's output, resolved; publish.go): complete once it
	// holds _SUCCESS.
	Output  string    `json:"output,omitempty"`
	Created time.Time `json:"created"`
	// StartAt is when a job submitted with a start time starts (it is
	// WAITING until then).
	StartAt  *time.Time `json:"startAt,omitempty"`
	Started  *time.Time `json:"started,omitempty"`
	Ended    *time.Time `json:"ended,omitempty"`
	Progress Progress   `json:"progress"`
	// ETA is when the stages running now are expected to finish, from
	// their smoothed rates; stages still blocked are not included.
	ETA    *time.Time    `json:"eta,omitempty"`
	Stages []StageStatus `json:"stages"`
	// Limits are the concurrency limits a running job's tasks are under
	// (its maxConcurrency, its owner's limit) and how much of each is in
	// use, so a job that seems slow shows when it is waiting on a limit.
	Limits []LimitUse `json:"limits,omitempty"`
	// FailedPartitions counts the tasks that failed for good within their
	// stages' toleratedFailures allowances: a SUCCEEDED job "succeeded
	// with N failed partitions", listed in its manifest.
	FailedPartitions int `json:"failedPartitions,omitempty"`
	// Redrives counts its owner's redrives of it (operations/redrive.go): the count
	// a redrive request names. RerunOf is the job it reruns, if any.
	Redrives int    `json:"redrives,omitempty"`
	RerunOf  string `json:"rerunOf,omitempty"`
	// DataDeleted is when the job's data (its objects: outputs, plans,
	// manifests) was deleted by its owner (DeleteData); its outputs are
	// gone.
	DataDeleted *time.Time `json:"dataDeleted,omitempty"`
	// Params are the job's run parameters as resolved at submit.
	Params map[string]string `json:"params,omitempty"`
	// Cost is what the job's AWS requests cost so far (cost.go).
	Cost *JobCost `json:"cost,omitempty"`
}

// LimitUse is one concurrency limit and its use.
type LimitUse struct {
	// Kind is "job" or "owner" (the owner's limit spans its jobs).
	Kind string `json:"kind"`
	Max  int    `json:"max"`
	// Running counts the slots held: tasks running, or claiming.
	Running int `json:"running"`
}

// Progress sums a job's work so far. Records are what committed tasks
// reported: records in are read by the job's first stages, records out
// written by its last.
type Progress struct {
	TasksDone  int   `json:"tasksDone"`
	TasksTotal int   `json:"tasksTotal"`
	RecordsIn  int64 `json:"recordsIn"`
	RecordsOut int64 `json:"recordsOut"`
	// Rates are smoothed (an exponential moving average) over the stages
	// running now; absent until known.
	TasksPerSec   *float64 `json:"tasksPerSec,omitempty"`
	RecordsPerSec *float64 `json:"recordsPerSec,omitempty"`
}

// StageStatus is one stage's progress, read from its counters: the status
// never reads the tasks of a stage.
type StageStatus struct {
	Name      string `json:"name"`
	State     string `json:"state"`
	Total     int    `json:"total"`
	Committed int    `json:"committed"`
	// Attempts counts attempts that ended (committed or not); Failures
	// those that did not commit (errors and expired leases).
	Attempts      int        `json:"attempts"`
	Failures      int        `json:"failures"`
	RecordsIn     int64      `json:"recordsIn"`
	RecordsOut    int64      `json:"recordsOut"`
	TasksPerSec   *float64   `json:"tasksPerSec,omitempty"`
	RecordsPerSec *float64   `json:"recordsPerSec,omitempty"`
	ETA           *time.Time `json:"eta,omitempty"`
	Started       *time.Time `json:"started,omitempty"`
	Ended         *time.Time `json:"ended,omitempty"`
	Error         string     `json:"error,omitempty"`
	// After names the stages this one runs after (its spec's "after"),
	// and Shuffle is the partition count of the shuffle it writes for
	// them, if any: the job's DAG, for the web console.
	After   []string `json:"after,omitempty"`
	Shuffle int      `json:"shuffle,omitempty"`
	// FailedTasks counts its tasks that failed for good within its
	// toleratedFailures allowance (they are not in Committed).
	FailedTasks int `json:"failedTasks,omitempty"`
	// BadRecords counts the records its committed tasks rejected, within
	// its maxBadRecords (badrecords.go).
	BadRecords int64 `json:"badRecords,omitempty"`
	// Copies counts its speculative copies, when it had any
	// (speculationview.go).
	Copies *CopyCounts `json:"copies,omitempty"`
	// Input is the prefix the stage reads, as resolved at submit.
	Input string `json:"input,omitempty"`
}

// Status reads a job's status. owner must match the job's owner, else the
// job is reported as not found. Its cost does not grow with the number of
// tasks: one read of the job, one Query of its stages and a batch read of
// at most 32 counters per stage.
func (r *Reader) Status(ctx context.Context, owner, id string) (JobStatus, error) {
	ctx = meter.WithJob(ctx, id) // reading a job's status is its cost too
	j, err := r.kernel.OwnedJob(ctx, owner, id)
	if err != nil {
		return JobStatus{}, err
	}
	stats, err := r.store.StageStats(ctx, id)
	if err != nil {
		return JobStatus{}, err
	}
	js := r.status(ctx, j, stats)
	bad, err := r.BadRecordCounts(ctx, j.Spec, id)
	if err != nil {
		return JobStatus{}, err
	}
	noteBadRecords(bad, j.Spec, js.Stages) // badrecords.go
	if j.State == sm.JobRunning {
		if js.Limits, err = r.limitUse(ctx, j); err != nil {
			return JobStatus{}, err
		}
	}
	return js, nil
}

// limitUse reads the slot maps of a job's limits: one consistent read per
// limit, none for a job without limits.
func (r *Reader) limitUse(ctx context.Context, j domain.Job) ([]LimitUse, error) {
	var out []LimitUse
	for _, l := range r.kernel.JobLimits(j) {
		holders, err := r.store.SlotHolders(ctx, l.Slots)
		if err != nil && !errors.Is(err, domain.ErrNotFound) { // no map yet: none held
			return nil, fmt.Errorf("status of job %s: %w", j.ID, err)
		}
		out = append(out, LimitUse{Kind: l.Kind, Max: l.Max, Running: len(holders)})
	}
	return out, nil
}

func (r *Reader) status(ctx context.Context, j domain.Job, stats []domain.StageStats) JobStatus {
	now := r.now()
	js := JobStatus{ID: j.ID, Name: j.Spec.Name, State: string(j.State), Error: j.Error, Manifest: j.Manifest, Output: j.Spec.Output,
		Created: j.Created, StartAt: opt(j.StartAt), Ended: opt(j.Ended), DataDeleted: opt(j.DataDeleted), Stages: make([]StageStatus, 0, len(stats)),
		Redrives: len(j.Redrives), RerunOf: j.RerunOf, Params: j.Spec.RunParams()}
	roots, sinks := map[int]bool{}, map[int]bool{}
	for _, i := range j.Spec.Roots() {
		roots[i] = true
	}
	for _, i := range j.Spec.Sinks() {
		sinks[i] = true
	}
	var taskRate, recRate float64
	rateKnown := false
	for _, st := range stats {
		c := st.Counters
		ss := StageStatus{Name: st.Name, State: string(st.State), Total: st.Total, Committed: c.Committed,
			Attempts: c.Committed + c.Failures, Failures: c.Failures, RecordsIn: c.RecordsIn, RecordsOut: c.RecordsOut,
			Started: opt(st.Started), Ended: opt(st.Ended), Error: st.Error, FailedTasks: st.Tolerated}
		js.FailedPartitions += st.Tolerated
		ss.Copies = copyCounts(st) // speculationview.go
		if st.Index >= 0 && st.Index < len(j.Spec.Stages) {
			if sp := j.Spec.Stages[st.Index]; sp.Name == st.Name {
				ss.After = sp.After
				if sp.Partitions != nil && sp.Partitions.Input != nil {
					ss.Input = sp.Partitions.Input.Prefix
				}
				if sp.Shuffle != nil {
					ss.Shuffle = sp.Shuffle.Partitions
				}
			}
		}
		if !st.Started.IsZero() && (js.Started == nil || st.Started.Before(*js.Started)) {
			js.Started = opt(st.Started)
		}
		if j.State == sm.JobRunning && st.State == sm.StageRunning {
			if r, ok := r.stageRate(ctx, st, now); ok {
				ss.TasksPerSec, ss.RecordsPerSec = &r.TaskRate, &r.RecordRate
				taskRate += r.TaskRate
				recRate += r.RecordRate
				rateKnown = true
				if left := st.Total - c.Committed; r.TaskRate > 0 && st.Materialized {
					eta := now.Add(time.Duration(float64(left) / r.TaskRate * float64(time.Second))).Truncate(time.Second)
					ss.ETA = &eta
					if js.ETA == nil || eta.After(*js.ETA) {
						js.ETA = &eta
					}
				}
			}
		}
		js.Progress.TasksDone += c.Committed
		js.Progress.TasksTotal += st.Total
		if roots[st.Index] {
			js.Progress.RecordsIn += c.RecordsIn
		}
		if sinks[st.Index] {
			js.Progress.RecordsOut += c.RecordsOut
		}
		js.Stages = append(js.Stages, ss)
	}
	if rateKnown {
		js.Progress.TasksPerSec, js.Progress.RecordsPerSec = &taskRate, &recRate
	}
	js.Cost = jobCost(stats) // cost.go
	return js
}

func opt(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	return &t
}
