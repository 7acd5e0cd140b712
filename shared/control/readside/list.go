package readside

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/batchwork/batchwork/shared/control/jobid"
	"github.com/batchwork/batchwork/shared/control/page"
	"github.com/batchwork/batchwork/shared/dynamo"
	"github.com/batchwork/batchwork/shared/spec"
	sm "github.com/batchwork/batchwork/statemachine"
)

// ListJobsRequest asks for a page of the caller's jobs, newest first.
type ListJobsRequest struct {
	Owner string
	// State and Name, when set, keep only jobs with that status or exactly
	// that name.
	State  string
	Name   string
	Limit  int
	Cursor string
}

// JobSummary is one job of a job list.
type JobSummary struct {
	ID      string     `json:"id"`
	Name    string     `json:"name"`
	State   string     `json:"state"`
	Created time.Time  `json:"created"`
	Ended   *time.Time `json:"ended,omitempty"`
}

// JobList is a page of jobs. NextCursor is set when there may be more.
type JobList struct {
	Jobs       []JobSummary `json:"jobs"`
	NextCursor string       `json:"nextCursor,omitempty"`
}

// ListJobs lists the owner's jobs from the per-owner index, which the
// job's create and end transactions keep in step with the job.
func (r *Reader) ListJobs(ctx context.Context, req ListJobsRequest) (JobList, error) {
	limit, err := page.CheckLimit(req.Limit)
	if err != nil {
		return JobList{}, err
	}
	if req.State != "" && !slices.Contains(sm.Jobs.States, sm.JobState(req.State)) {
		return JobList{}, &spec.FieldError{Field: "status", Message: fmt.Sprintf("must be one of %v", sm.Jobs.States)}
	}
	if len(req.Name) > spec.MaxNameLen {
		return JobList{}, &spec.FieldError{Field: "name", Message: fmt.Sprintf("is longer than %d characters", spec.MaxNameLen)}
	}
	q := page.Query("jobs", req.Owner, req.State, req.Name)
	after := ""
	if req.Cursor != "" {
		pos, err := page.Decode(q, req.Cursor, 1)
		if err != nil {
			return JobList{}, err
		}
		if !jobid.Pattern.MatchString(pos[0]) {
			return JobList{}, &spec.FieldError{Field: "cursor", Message: "is not a cursor of this query; start again without it"}
		}
		after = pos[0]
	}
	jobs, next, err := r.store.JobListByOwner(ctx, dynamo.ListJobsParams{
		Owner: req.Owner, State: sm.JobState(req.State), Name: req.Name, After: after, Limit: limit, MaxReads: page.MaxReads,
	})
	if err != nil {
		return JobList{}, err
	}
	out := JobList{Jobs: make([]JobSummary, len(jobs))}
	for i, j := range jobs {
		out.Jobs[i] = JobSummary{ID: j.ID, Name: j.Name, State: string(j.State), Created: j.Created, Ended: opt(j.Ended)}
	}
	if next != "" {
		out.NextCursor = page.Encode(q, next)
	}
	return out, nil
}
