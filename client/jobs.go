package client

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/batchwork/batchwork/shared/spec"
)

// Page selects one page of a list: at most Limit items (0: the API's
// default; it takes 1 to 200) after Cursor, a previous page's NextCursor
// ("" for the first page).
type Page struct {
	Limit  int
	Cursor string
}

func (p Page) query(kv ...string) url.Values {
	q := url.Values{}
	for i := 0; i+1 < len(kv); i += 2 {
		if kv[i+1] != "" {
			q.Set(kv[i], kv[i+1])
		}
	}
	if p.Limit != 0 {
		q.Set("limit", strconv.Itoa(p.Limit))
	}
	if p.Cursor != "" {
		q.Set("cursor", p.Cursor)
	}
	return q
}

// SubmitOptions are a submission's options. IdempotencyKey makes it safe
// to repeat: the same key returns the same job and never makes a second
// one; "" is a fresh key for this call, which its retries share.
type SubmitOptions struct {
	IdempotencyKey string
	// Params are the run parameters' values (the spec's params:), sent as
	// param=NAME=VALUE query parameters.
	Params map[string]string
	// At, when set, is when the job starts: until then it is WAITING
	// (listed, cancellable, no stage started). At most a year ahead.
	At time.Time
}

// Submit submits a job spec, JSON or YAML (anything not starting with
// "{" is sent as YAML). An invalid spec is an *APIError matching
// ErrInvalid whose Errors list every problem; a key already used with
// another spec matches ErrConflict.
func (c *Client) Submit(ctx context.Context, specDoc []byte, opts SubmitOptions) (SubmitResult, error) {
	h := http.Header{"Idempotency-Key": {keyOr(opts.IdempotencyKey)}}
	if !strings.HasPrefix(strings.TrimSpace(string(specDoc)), "{") {
		h.Set("Content-Type", "application/yaml")
	}
	var q url.Values
	if !opts.At.IsZero() {
		q = url.Values{"at": {opts.At.UTC().Format(time.RFC3339Nano)}}
	}
	var res SubmitResult
	err := c.Call(ctx, http.MethodPost, "/jobs", paramsQuery(q, opts.Params), specDoc, h, &res)
	return res, err
}

// SubmitSpec submits a job spec built in Go, as its JSON.
func (c *Client) SubmitSpec(ctx context.Context, job *spec.Job, opts SubmitOptions) (SubmitResult, error) {
	doc, err := json.Marshal(job)
	if err != nil {
		return SubmitResult{}, fmt.Errorf("encode the spec: %w", err)
	}
	return c.Submit(ctx, doc, opts)
}

// keyOr is key, or a fresh idempotency key.
func keyOr(key string) string {
	if key != "" {
		return key
	}
	var b [12]byte
	_, _ = rand.Read(b[:])
	return "go-" + hex.EncodeToString(b[:])
}

func jobPath(id string, rest ...string) string {
	return "/jobs/" + url.PathEscape(id) + strings.Join(rest, "")
}

// Status reads a job's status. Another owner's job is ErrNotFound.
func (c *Client) Status(ctx context.Context, id string) (JobStatus, error) {
	var st JobStatus
	err := c.Call(ctx, http.MethodGet, jobPath(id), nil, nil, nil, &st)
	return st, err
}

// WatchOptions say how Watch polls. Interval is the time between polls (0:
// a second). EveryPoll yields every status read, also one that did not
// change, for a display that redraws its clock.
type WatchOptions struct {
	Interval  time.Duration
	EveryPoll bool
}

// Watch follows a job until it ends: it reads the job's status every
// Interval and yields the first, each that differs from the one before
// (every one with EveryPoll) and the last, the job's end (JobStatus.Done).
// It stops after the end, at the first error, which it yields, and when
// ctx ends (yielding ctx's error).
func (c *Client) Watch(ctx context.Context, id string, opts WatchOptions) iter.Seq2[JobStatus, error] {
	interval := opts.Interval
	if interval <= 0 {
		interval = time.Second
	}
	return func(yield func(JobStatus, error) bool) {
		var last []byte
		for {
			st, err := c.Status(ctx, id)
			if err != nil {
				yield(JobStatus{}, err)
				return
			}
			raw, _ := json.Marshal(st)
			changed := last == nil || string(raw) != string(last)
			last = raw
			if (changed || opts.EveryPoll || st.Done()) && !yield(st, nil) {
				return
			}
			if st.Done() {
				return
			}
			if err := c.sleep()(ctx, interval); err != nil {
				yield(JobStatus{}, err)
				return
			}
		}
	}
}

// Cancel cancels a running job: no new task of it starts, running ones
// stop at their next heartbeat, committed outputs are kept. Cancelling a
// cancelled job is fine; one that succeeded, failed or is publishing is
// ErrEnded.
func (c *Client) Cancel(ctx context.Context, id string) (JobStatus, error) {
	var st JobStatus
	err := c.Call(ctx, http.MethodPost, jobPath(id, "/cancel"), nil, nil, nil, &st)
	return st, err
}

// JobsOptions select the jobs a list shows: in State (RUNNING,
// PUBLISHING, SUCCEEDED, FAILED or CANCELLED) and with Name, when set.
type JobsOptions struct {
	State, Name string
	Page
}

// ListJobs reads a page of the caller's jobs, newest first.
func (c *Client) ListJobs(ctx context.Context, opts JobsOptions) (JobList, error) {
	var l JobList
	err := c.Call(ctx, http.MethodGet, "/jobs", opts.query("status", opts.State, "name", opts.Name), nil, nil, &l)
	return l, err
}

// Jobs iterates over the caller's jobs, newest first, from opts.Cursor.
func (c *Client) Jobs(ctx context.Context, opts JobsOptions) iter.Seq2[JobSummary, error] {
	return items(opts.Cursor, func(cursor string) ([]JobSummary, string, error) {
		opts.Cursor = cursor
		l, err := c.ListJobs(ctx, opts)
		return l.Jobs, l.NextCursor, err
	})
}

// TasksOptions select a job's tasks: of Stage and in State (READY,
// CLAIMED, SUCCEEDED, FAILED or CANCELLED), when set.
type TasksOptions struct {
	Stage, State string
	Page
}

// ListTasks reads a page of a job's tasks, by stage and partition, with
// their attempts.
func (c *Client) ListTasks(ctx context.Context, id string, opts TasksOptions) (TaskList, error) {
	var l TaskList
	err := c.Call(ctx, http.MethodGet, jobPath(id, "/tasks"), opts.query("stage", opts.Stage, "state", opts.State), nil, nil, &l)
	return l, err
}

// Tasks iterates over a job's tasks.
func (c *Client) Tasks(ctx context.Context, id string, opts TasksOptions) iter.Seq2[Task, error] {
	return items(opts.Cursor, func(cursor string) ([]Task, string, error) {
		opts.Cursor = cursor
		l, err := c.ListTasks(ctx, id, opts)
		return l.Tasks, l.NextCursor, err
	})
}

// ListHistory reads a page of a job's timeline, oldest first.
func (c *Client) ListHistory(ctx context.Context, id string, p Page) (History, error) {
	var h History
	err := c.Call(ctx, http.MethodGet, jobPath(id, "/history"), p.query(), nil, nil, &h)
	return h, err
}

// History iterates over a job's timeline.
func (c *Client) History(ctx context.Context, id string, p Page) iter.Seq2[Event, error] {
	return items(p.Cursor, func(cursor string) ([]Event, string, error) {
		p.Cursor = cursor
		h, err := c.ListHistory(ctx, id, p)
		return h.Events, h.NextCursor, err
	})
}

// OutputsOptions select a job's outputs: of Stage only, when set (its
// committed outputs), and with presigned GET URLs when Presign (an
// installation that cannot presign answers ErrUnavailable).
type OutputsOptions struct {
	Stage   string
	Presign bool
	Page
}

func (o OutputsOptions) query() url.Values {
	q := o.Page.query("stage", o.Stage)
	if o.Presign {
		q.Set("presign", "true")
	}
	return q
}

// ListOutputs reads a page of a job's committed outputs: a succeeded
// job's manifest, or what committed so far (OutputList.Complete says
// which). A job whose data was deleted is ErrDataDeleted.
func (c *Client) ListOutputs(ctx context.Context, id string, opts OutputsOptions) (OutputList, error) {
	var l OutputList
	err := c.Call(ctx, http.MethodGet, jobPath(id, "/manifest"), opts.query(), nil, nil, &l)
	return l, err
}

// Outputs iterates over a job's committed outputs.
func (c *Client) Outputs(ctx context.Context, id string, opts OutputsOptions) iter.Seq2[Output, error] {
	return items(opts.Cursor, func(cursor string) ([]Output, string, error) {
		opts.Cursor = cursor
		l, err := c.ListOutputs(ctx, id, opts)
		return l.Outputs, l.NextCursor, err
	})
}

// Result reads every page of a job's outputs into one list, whose other
// fields are the last page's (so Complete and State are the latest).
func (c *Client) Result(ctx context.Context, id string, opts OutputsOptions) (OutputList, error) {
	all := OutputList{Outputs: []Output{}}
	for {
		l, err := c.ListOutputs(ctx, id, opts)
		if err != nil {
			return OutputList{}, err
		}
		outs := append(all.Outputs, l.Outputs...)
		all, all.Outputs = l, outs
		if l.NextCursor == "" {
			return all, nil
		}
		opts.Cursor = l.NextCursor
	}
}

// BadRecordsOptions select a job's bad records: of Stage, when set.
type BadRecordsOptions struct {
	Stage string
	Page
}

// ListBadRecords reads a page of the records a job's committed tasks
// rejected, by stage, partition and order.
func (c *Client) ListBadRecords(ctx context.Context, id string, opts BadRecordsOptions) (BadRecordPage, error) {
	var p BadRecordPage
	err := c.Call(ctx, http.MethodGet, jobPath(id, "/bad-records"), opts.query("stage", opts.Stage), nil, nil, &p)
	return p, err
}

// BadRecords iterates over the records a job's committed tasks rejected.
func (c *Client) BadRecords(ctx context.Context, id string, opts BadRecordsOptions) iter.Seq2[BadRecord, error] {
	return items(opts.Cursor, func(cursor string) ([]BadRecord, string, error) {
		opts.Cursor = cursor
		p, err := c.ListBadRecords(ctx, id, opts)
		return p.Records, p.NextCursor, err
	})
}

// LogsOptions select a job's log lines: of Task (STAGE/PARTITION, a
// stage's name or index) and since Since, when set. Limit and Cursor page
// them as a Page does, with LogPage.Next as the cursor.
type LogsOptions struct {
	Task  string
	Since time.Time
	Page
}

// ListLogs reads a page of a job's log lines: its tasks', its executors'
// and the control plane's, oldest first. An installation without a log
// source answers ErrUnavailable.
func (c *Client) ListLogs(ctx context.Context, id string, opts LogsOptions) (LogPage, error) {
	q := opts.query("task", opts.Task)
	if !opts.Since.IsZero() {
		q.Set("since", opts.Since.UTC().Format(time.RFC3339Nano))
	}
	var p LogPage
	err := c.Call(ctx, http.MethodGet, jobPath(id, "/logs"), q, nil, nil, &p)
	return p, err
}

// Logs iterates over a job's log lines written so far; it ends at the
// first page that brings none. To follow a running job, call ListLogs
// again with the last page's Next.
func (c *Client) Logs(ctx context.Context, id string, opts LogsOptions) iter.Seq2[LogLine, error] {
	return func(yield func(LogLine, error) bool) {
		for {
			p, err := c.ListLogs(ctx, id, opts)
			if err != nil {
				yield(LogLine{}, err)
				return
			}
			if len(p.Lines) == 0 {
				return
			}
			for _, l := range p.Lines {
				if !yield(l, nil) {
					return
				}
			}
			opts.Cursor = p.Next
		}
	}
}

// Redrive retries a FAILED job in place: its unfinished tasks run again.
// redrives is the job's redrive count as its status showed it
// (JobStatus.Redrives): a retry of a redrive that went through is then
// recognised and does not redrive twice. A job the redrive does not apply
// to is ErrConflict, with the reason in Code.
func (c *Client) Redrive(ctx context.Context, id string, redrives int) (JobStatus, error) {
	body, _ := json.Marshal(struct {
		Redrives int `json:"redrives"`
	}{redrives})
	var st JobStatus
	err := c.Call(ctx, http.MethodPost, jobPath(id, "/redrive"), nil, body, http.Header{"Content-Type": {"application/json"}}, &st)
	return st, err
}

// RerunOptions are a rerun's options: From runs that stage and the stages
// after it and reuses the others' committed outputs ("": rerun the stages
// that did not complete); IdempotencyKey works as Submit's.
type RerunOptions struct {
	From           string
	IdempotencyKey string
}

// Rerun submits a new job with an ended job's spec that reuses the
// committed outputs of the stages it does not run.
func (c *Client) Rerun(ctx context.Context, id string, opts RerunOptions) (SubmitResult, error) {
	body, _ := json.Marshal(struct {
		From string `json:"from,omitempty"`
	}{opts.From})
	h := http.Header{"Idempotency-Key": {keyOr(opts.IdempotencyKey)}, "Content-Type": {"application/json"}}
	var res SubmitResult
	err := c.Call(ctx, http.MethodPost, jobPath(id, "/rerun"), nil, body, h, &res)
	return res, err
}

// DeleteJob deletes an ended job, its records and its data, calling the
// API until nothing is left (a call deletes a bounded amount); the counts
// are the sum of the calls'. A job that has not ended is ErrRunning; no
// such job is ErrNotFound, unless an earlier call of this one may have
// finished the deletion (its answer lost, or a later call's 404): then the
// job is gone as asked, and the deletion is Complete with State "" when
// no answer came back.
func (c *Client) DeleteJob(ctx context.Context, id string) (JobDeletion, error) {
	var total JobDeletion
	for call := 0; ; call++ {
		var d JobDeletion
		lost, err := c.call(ctx, http.MethodDelete, jobPath(id), nil, nil, nil, &d)
		if (call > 0 || lost) && errors.Is(err, ErrNotFound) {
			total.Job, total.Complete = id, true
			return total, nil
		}
		if err != nil {
			return JobDeletion{}, err
		}
		objects, records := total.Objects+d.Objects, total.Records+d.Records
		total, total.Objects, total.Records = d, objects, records
		if d.Complete {
			return total, nil
		}
		if d.Objects == 0 && d.Records == 0 {
			return JobDeletion{}, fmt.Errorf("job %s: %w", id, ErrNoProgress)
		}
	}
}

// DeleteData deletes an ended job's data (outputs, plans, manifests),
// calling the API until nothing is left; Deleted sums the calls'. The
// job's records stay. A running job is ErrRunning.
func (c *Client) DeleteData(ctx context.Context, id string) (DataDeletion, error) {
	var total DataDeletion
	for {
		var d DataDeletion
		if err := c.Call(ctx, http.MethodDelete, jobPath(id, "/data"), nil, nil, nil, &d); err != nil {
			return DataDeletion{}, err
		}
		deleted := total.Deleted + d.Deleted
		total, total.Deleted = d, deleted
		if d.Complete {
			return total, nil
		}
		if d.Deleted == 0 {
			return DataDeletion{}, fmt.Errorf("job %s: %w", id, ErrNoProgress)
		}
	}
}

// WhoAmI reads the caller's identity: its owner and inputs area.
func (c *Client) WhoAmI(ctx context.Context) (Identity, error) {
	var id Identity
	err := c.Call(ctx, http.MethodGet, "/whoami", nil, nil, nil, &id)
	return id, err
}

// items iterates over the items of a list's pages from cursor on; fetch
// reads the page at a cursor and returns its items and next cursor.
func items[T any](cursor string, fetch func(cursor string) ([]T, string, error)) iter.Seq2[T, error] {
	return func(yield func(T, error) bool) {
		for {
			page, next, err := fetch(cursor)
			if err != nil {
				var zero T
				yield(zero, err)
				return
			}
			for _, it := range page {
				if !yield(it, nil) {
					return
				}
			}
			if next == "" {
				return
			}
			cursor = next
		}
	}
}
