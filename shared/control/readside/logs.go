package readside

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/batchwork/batchwork/shared/domain"
	"github.com/batchwork/batchwork/shared/logs"
	"github.com/batchwork/batchwork/shared/spec"
)

// LogsRequest asks for a page of a job's log lines.
type LogsRequest struct {
	Owner, ID string
	// Task, when set, is STAGE/PARTITION (a stage name or index and a
	// partition): only that task's lines.
	Task   string
	Since  time.Time
	Cursor string
	Limit  int
}

// logsClockSkew is how much earlier than its job's creation a line of
// the job may be timed (the clocks of the processes that log).
const logsClockSkew = time.Minute

// ErrLogsUnavailable means this installation has no log source.
var ErrLogsUnavailable = errors.New("this installation cannot read its logs")

// JobLogs returns a page of the caller's job's log lines: every line a
// Batchwork process logged about it (the executors', the task functions'
// own and the control plane's), read by the job's id from the
// installation's log source on the owner's behalf. Another owner's job is
// not found, so no caller reads another owner's lines, and callers need no
// access to the logs themselves.
func (r *Reader) JobLogs(ctx context.Context, req LogsRequest) (logs.Page, error) {
	if req.Limit < 0 || req.Limit > logs.MaxLimit {
		return logs.Page{}, &spec.FieldError{Field: "limit", Message: fmt.Sprintf("must be 1 to %d", logs.MaxLimit)}
	}
	j, err := r.kernel.OwnedJob(ctx, req.Owner, req.ID)
	if err != nil {
		return logs.Page{}, err
	}
	if r.cfg.Logs == nil {
		return logs.Page{}, ErrLogsUnavailable
	}
	q := logs.Query{Job: j.ID, Since: req.Since, Cursor: req.Cursor, Limit: req.Limit}
	// No line of the job is older than the job: a source need not look
	// further back (CloudWatch Logs scans from there).
	if from := j.Created.Add(-logsClockSkew); q.Since.Before(from) {
		q.Since = from
	}
	if req.Task != "" {
		ref, err := taskOf(j, req.Task)
		if err != nil {
			return logs.Page{}, err
		}
		q.Task = ref.String()
	}
	pg, err := r.cfg.Logs.Query(ctx, q)
	if errors.Is(err, logs.ErrBadCursor) {
		return logs.Page{}, &spec.FieldError{Field: "cursor", Message: err.Error()}
	}
	return pg, err
}

// taskOf resolves STAGE/PARTITION (a stage's name or index) in j.
func taskOf(j domain.Job, task string) (domain.TaskRef, error) {
	bad := func(msg string) error { return &spec.FieldError{Field: "task", Message: msg} }
	stage, part, ok := strings.Cut(task, "/")
	if !ok {
		return domain.TaskRef{}, bad("must be STAGE/PARTITION, e.g. count/3")
	}
	p, err := strconv.Atoi(part)
	if err != nil || p < 0 {
		return domain.TaskRef{}, bad("partition must be a non-negative integer")
	}
	idx, ok := j.Spec.StageIndex(stage)
	if !ok {
		n, err := strconv.Atoi(stage)
		if err != nil || n < 0 || n >= len(j.Spec.Stages) {
			return domain.TaskRef{}, bad(fmt.Sprintf("job has no stage %q", stage))
		}
		idx = n
	}
	return domain.TaskRef{Job: j.ID, Stage: idx, Partition: p}, nil
}

// SetLogSource sets where JobLogs reads lines (Config.Logs), for a main
// that builds its source after the service; call it before serving.
func (r *Reader) SetLogSource(src logs.Source) { r.cfg.Logs = src }
