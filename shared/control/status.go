package control

import (
	"context"
	"time"

	"github.com/batchwork/batchwork/shared/batch"
)

// JobStatus is a job's status as the API shows it.
type JobStatus struct {
	ID       string        `json:"id"`
	Name     string        `json:"name"`
	State    string        `json:"state"`
	Error    string        `json:"error,omitempty"`
	Manifest string        `json:"manifest,omitempty"`
	Created  time.Time     `json:"created"`
	Ended    *time.Time    `json:"ended,omitempty"`
	Stages   []StageStatus `json:"stages"`
}

// StageStatus is one stage's progress, read from its counters: the status
// never reads the tasks of a stage.
type StageStatus struct {
	Name      string     `json:"name"`
	State     string     `json:"state"`
	Total     int        `json:"total"`
	Committed int        `json:"committed"`
	Started   *time.Time `json:"started,omitempty"`
	Ended     *time.Time `json:"ended,omitempty"`
	Error     string     `json:"error,omitempty"`
}

// Status reads a job's status. owner must match the job's owner, else the
// job is reported as not found.
func (s *Service) Status(ctx context.Context, owner, id string) (JobStatus, error) {
	j, err := s.store.GetJob(ctx, id)
	if err != nil {
		return JobStatus{}, err
	}
	if j.Owner != owner {
		return JobStatus{}, batch.ErrNotFound
	}
	stages, err := s.store.ListStages(ctx, id)
	if err != nil {
		return JobStatus{}, err
	}
	js := JobStatus{ID: j.ID, Name: j.Spec.Name, State: string(j.State), Error: j.Error, Manifest: j.Manifest, Created: j.Created, Ended: opt(j.Ended)}
	for _, st := range stages {
		ss := StageStatus{Name: st.Name, State: string(st.State), Total: st.Total, Started: opt(st.Started), Ended: opt(st.Ended), Error: st.Error}
		if st.Shards > 0 {
			p, err := s.store.Progress(ctx, st)
			if err != nil {
				return JobStatus{}, err
			}
			ss.Committed = p.Committed
		}
		js.Stages = append(js.Stages, ss)
	}
	return js, nil
}

func opt(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	return &t
}
