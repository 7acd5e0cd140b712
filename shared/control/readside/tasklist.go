package readside

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/batchwork/batchwork/shared/control/page"
	"github.com/batchwork/batchwork/shared/domain"
	"github.com/batchwork/batchwork/shared/dynamo"
	"github.com/batchwork/batchwork/shared/spec"
	sm "github.com/batchwork/batchwork/statemachine"
)

// ListTasksRequest asks for a page of a job's tasks, by stage then
// partition.
type ListTasksRequest struct {
	Owner, ID string
	// Stage (a stage name) and State, when set, keep only those tasks.
	Stage  string
	State  string
	Limit  int
	Cursor string
}

// TaskInfo is a task as the API shows it. ErrorClass is LastError's class
// (domain.ErrorClass); Memory the executor size an out-of-memory retry
// raised the task to (failclass.go).
type TaskInfo struct {
	ID               string     `json:"id"`
	Stage            string     `json:"stage"`
	Partition        int        `json:"partition"`
	State            string     `json:"state"`
	Attempt          int        `json:"attempt"`
	MaxAttempts      int        `json:"maxAttempts"`
	LeaseUntil       *time.Time `json:"leaseUntil,omitempty"`
	NotBefore        *time.Time `json:"notBefore,omitempty"`
	CommittedAttempt int        `json:"committedAttempt,omitempty"`
	Outputs          int        `json:"outputs,omitempty"`
	RecordsIn        int64      `json:"recordsIn,omitempty"`
	RecordsOut       int64      `json:"recordsOut,omitempty"`
	LastError        string     `json:"lastError,omitempty"`
	ErrorClass       string     `json:"errorClass,omitempty"`
	// Tolerated: a FAILED task whose failure its stage tolerated.
	Tolerated bool   `json:"tolerated,omitempty"`
	Memory    string `json:"memory,omitempty"`
	// Checkpoint is the task's last checkpoint, if it saved one
	// (checkpoint.go).
	Checkpoint *CheckpointInfo `json:"checkpoint,omitempty"`
	// Copy is the task's speculative copy, if it was copied
	// (speculation.go).
	Copy *CopyInfo `json:"copy,omitempty"`
	// TraceID is the trace its attempts' spans are in (its job's), when
	// it has a span (shared/tracing): the console links to it.
	TraceID  string        `json:"traceId,omitempty"`
	Updated  time.Time     `json:"updated"`
	Attempts []AttemptInfo `json:"attempts"`
}

// Attempt outcomes.
const (
	OutcomeRunning      = "running"
	OutcomeCommitted    = "committed"
	OutcomeRetried      = string(domain.AttemptRetried)
	OutcomeLeaseExpired = string(domain.AttemptLeaseExpired)
	OutcomeFailed       = string(domain.AttemptFailed)
	OutcomeCancelled    = "cancelled"
	// OutcomeUnknown: the attempt ended but no record says how (its
	// recorder crashed between the transition and the record).
	OutcomeUnknown = "unknown"
)

// AttemptInfo is one attempt of a task.
type AttemptInfo struct {
	Attempt int        `json:"attempt"`
	Outcome string     `json:"outcome"`
	At      *time.Time `json:"at,omitempty"`
	Error   string     `json:"error,omitempty"`
	// Executor is the id of the executor that ran the attempt and Started
	// when it claimed it, when known (attempts recorded before they were
	// kept, and some taken over, have neither).
	Executor string     `json:"executor,omitempty"`
	Started  *time.Time `json:"started,omitempty"`
}

// TaskList is a page of tasks. NextCursor is set when there may be more.
type TaskList struct {
	Tasks      []TaskInfo `json:"tasks"`
	NextCursor string     `json:"nextCursor,omitempty"`
}

// ListTasks lists a job's tasks with their attempt history. It reads task
// buckets in order, never more than the page needs plus a bounded number
// of Queries when a filter matches little.
func (r *Reader) ListTasks(ctx context.Context, req ListTasksRequest) (TaskList, error) {
	limit, err := page.CheckLimit(req.Limit)
	if err != nil {
		return TaskList{}, err
	}
	if req.State != "" && !slices.Contains(sm.Tasks.States, sm.TaskState(req.State)) {
		return TaskList{}, &spec.FieldError{Field: "state", Message: fmt.Sprintf("must be one of %v", sm.Tasks.States)}
	}
	j, err := r.kernel.OwnedJob(ctx, req.Owner, req.ID)
	if err != nil {
		return TaskList{}, err
	}
	only := -1
	if req.Stage != "" {
		idx, ok := j.Spec.StageIndex(req.Stage)
		if !ok {
			return TaskList{}, &spec.FieldError{Field: "stage", Message: fmt.Sprintf("job has no stage %q", req.Stage)}
		}
		only = idx
	}
	q := page.Query("tasks", req.Owner, req.ID, req.Stage, req.State)
	stage, after := 0, -1
	if only >= 0 {
		stage = only
	}
	if req.Cursor != "" {
		pos, err := page.Ints(q, req.Cursor, 2)
		if err != nil {
			return TaskList{}, err
		}
		if pos[0] < stage || pos[0] >= len(j.Spec.Stages) || (only >= 0 && pos[0] != only) {
			return TaskList{}, &spec.FieldError{Field: "cursor", Message: "is not a cursor of this query; start again without it"}
		}
		stage, after = pos[0], pos[1]
	}
	stages, err := r.store.StageList(ctx, j.ID)
	if err != nil {
		return TaskList{}, err
	}
	out := TaskList{Tasks: []TaskInfo{}}
	reads := 0
	for ; stage < len(stages); stage, after = stage+1, -1 {
		if only >= 0 && stage != only {
			break
		}
		st := stages[stage]
		if st.Total == 0 {
			continue
		}
		pg, err := r.store.TaskListPage(ctx, dynamo.TaskPageParams{
			Job: j.ID, Stage: stage, Total: st.Total, State: sm.TaskState(req.State), After: after,
			Materialized: st.Enqueued, Sent: st.Sent, MaxAttempts: j.Spec.StageRetry(stage).MaxAttempts,
			Limit: limit - len(out.Tasks), MaxReads: page.MaxReads - reads,
		})
		if err != nil {
			return TaskList{}, err
		}
		reads += pg.Reads
		infos, err := r.taskInfos(ctx, j.Spec, stage, pg.Rows)
		traceIDs(infos, pg.Rows, j.Trace) // tracelink.go
		if err != nil {
			return TaskList{}, err
		}
		out.Tasks = append(out.Tasks, infos...)
		if !pg.Done {
			// The page is full or the read budget is spent: continue here.
			out.NextCursor = page.Encode(q, strconv.Itoa(stage), strconv.Itoa(pg.Next))
			return out, nil
		}
		if len(out.Tasks) >= limit || reads >= page.MaxReads {
			if next := stage + 1; next < len(stages) && only < 0 {
				out.NextCursor = page.Encode(q, strconv.Itoa(next), "-1")
			}
			return out, nil
		}
	}
	return out, nil
}

// taskInfos renders task rows with their attempt histories. Attempt-end
// records are read only for rows that had an attempt end without a
// commit, with one Query per bucket of such rows.
func (r *Reader) taskInfos(ctx context.Context, sp *spec.Job, stage int, rows []domain.TaskRow) ([]TaskInfo, error) {
	lo, hi := -1, -1
	for _, r := range rows {
		if r.Attempt > 1 || r.State == sm.TaskFailed || (r.State == sm.TaskReady && r.Attempt > 0) {
			if lo < 0 {
				lo = r.Ref.Partition
			}
			hi = r.Ref.Partition
		}
	}
	ends := map[[2]int]domain.AttemptEnd{}
	if lo >= 0 {
		recs, err := r.store.AttemptEnds(ctx, rows[0].Ref.Job, stage, lo, hi)
		if err != nil {
			return nil, err
		}
		for _, e := range recs {
			ends[[2]int{e.Ref.Partition, e.Attempt}] = e
		}
	}
	infos := make([]TaskInfo, len(rows))
	for i, r := range rows {
		t := r.Task
		info := TaskInfo{
			ID: t.Ref.String(), Stage: sp.Stages[stage].Name, Partition: t.Ref.Partition, State: string(t.State),
			Attempt: t.Attempt, MaxAttempts: t.MaxAttempts, CommittedAttempt: t.CommittedAttempt, Outputs: t.Outputs,
			RecordsIn: r.RecordsIn, RecordsOut: r.RecordsOut, LastError: t.LastError, ErrorClass: string(t.ErrorClass), Updated: t.Updated, Tolerated: t.Tolerated,
			Attempts: make([]AttemptInfo, 0, t.Attempt),
		}
		if t.State == sm.TaskClaimed {
			info.LeaseUntil = opt(t.LeaseUntil)
		}
		if t.Memory > 0 {
			info.Memory = sizeString(t.Memory)
		}
		info.Checkpoint = checkpointInfo(t.Checkpoint)
		if t.State == sm.TaskReady {
			info.NotBefore = opt(t.NotBefore)
		}
		for a := 1; a <= t.Attempt; a++ {
			ai := AttemptInfo{Attempt: a, Outcome: OutcomeUnknown}
			if e, ok := ends[[2]int{t.Ref.Partition, a}]; ok {
				ai.Outcome, ai.At, ai.Error = string(e.Kind), opt(e.At), e.Err
				ai.Executor, ai.Started = e.Executor, opt(e.Started)
			}
			if a == t.Attempt {
				// The task record is this attempt's claim.
				if !t.Claimed.IsZero() {
					ai.Executor, ai.Started = t.Executor, opt(t.Claimed)
				}
				switch t.State {
				case sm.TaskClaimed:
					ai.Outcome = OutcomeRunning
				case sm.TaskSucceeded:
					ai.Outcome, ai.At = OutcomeCommitted, opt(t.Updated)
				case sm.TaskCancelled:
					ai.Outcome, ai.At, ai.Error = OutcomeCancelled, opt(t.Updated), t.LastError
				case sm.TaskFailed:
					if ai.Outcome == OutcomeUnknown {
						ai.Outcome, ai.At, ai.Error = OutcomeFailed, opt(t.Updated), t.LastError
					}
				}
			}
			info.Attempts = append(info.Attempts, ai)
		}
		copyAttempts(&info, t, ends) // speculationview.go
		infos[i] = info
	}
	return infos, nil
}

// CheckpointInfo is a task's last checkpoint as `batchwork tasks` shows
// it: the attempt that saved it, the input offset it reached, and how
// often the task continued in a new invocation.
type CheckpointInfo struct {
	Attempt       int   `json:"attempt"`
	Offset        int64 `json:"offset"`
	Continuations int   `json:"continuations,omitempty"`
}

func checkpointInfo(r domain.CheckpointRef) *CheckpointInfo {
	if !r.Saved() {
		return nil
	}
	return &CheckpointInfo{Attempt: r.Attempt, Offset: r.Offset, Continuations: r.Continuations}
}

// sizeString renders an executor size as the spec spells it: 2GiB.
func sizeString(z spec.Size) string {
	if z%(1<<30) == 0 {
		return strconv.FormatInt(int64(z)>>30, 10) + "GiB"
	}
	return strconv.FormatInt(int64(z)>>20, 10) + "MiB"
}
