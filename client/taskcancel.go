package client

import (
	"context"
	"net/http"
	"net/url"
	"time"
)

// TaskCancellation is the answer of CancelTask: the task, FAILED as
// cancelled, whether its stage tolerated the failure, its error, and its
// job's state as the cancel left it (FAILED when the task's failure
// failed it).
type TaskCancellation struct {
	JobID     string    `json:"jobId"`
	Task      string    `json:"task"`
	Stage     string    `json:"stage"`
	Partition int       `json:"partition"`
	State     string    `json:"state"`
	Tolerated bool      `json:"tolerated"`
	Error     string    `json:"error"`
	Cancelled time.Time `json:"cancelled"`
	JobState  string    `json:"jobState"`
}

// Why a task's cancel is refused (409), besides CodeJobEnded.
const (
	// CodeTaskEnded: the task committed (or ended otherwise) first.
	CodeTaskEnded = "task_ended"
	// CodeTaskNotStarted: its stage has not made its tasks yet.
	CodeTaskNotStarted = "task_not_started"
)

// CancelTask cancels one task of a running job, named STAGE/PARTITION
// ("map/3"): its running attempt stops and cannot commit, or, waiting, it
// never starts; it fails without retry, and its job goes on as the
// stage's toleratedFailures allow or fails naming it. Cancelling it again
// answers the same, so a retry after a lost answer is safe. A task that
// committed first is ErrConflict with Code CodeTaskEnded; an unknown task
// ErrNotFound; a job that ended ErrEnded.
func (c *Client) CancelTask(ctx context.Context, id, task string) (TaskCancellation, error) {
	var tc TaskCancellation
	err := c.Call(ctx, http.MethodPost, jobPath(id, "/cancel"), url.Values{"task": {task}}, nil, nil, &tc)
	return tc, err
}
