// Package logs reads a job's log lines for GET /jobs/{id}/logs: from
// CloudWatch Logs on AWS (CloudWatch), from the local runner's log file
// (File). Every Batchwork process logs JSON lines through slog, and every
// line about a job carries job_id; a task's lines also carry task (the
// task id, job/stage/partition), attempt and executor_id. A Source finds
// lines by those fields, so the caller never sees another job's lines:
// the API checks the job is the caller's before it asks.
package logs

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"regexp"
	"time"
)

// Query selects a job's lines.
type Query struct {
	// Job is the job's id (required).
	Job string
	// Task, when set, keeps only the lines of that task (its id,
	// job/stage/partition), else every line of the job.
	Task string
	// Since keeps lines at or after it (zero: from the start).
	Since time.Time
	// Cursor continues a previous Page (its Next): the lines after those
	// it returned, including lines written since.
	Cursor string
	// Limit bounds the lines returned (0: DefaultLimit).
	Limit int
}

// DefaultLimit and MaxLimit bound a page of lines.
const (
	DefaultLimit = 500
	MaxLimit     = 10000
)

// Line is one log line.
type Line struct {
	Time time.Time `json:"time"`
	// Fields is the line as its process logged it: a JSON object with at
	// least time, level and msg.
	Fields json.RawMessage `json:"fields"`
}

// Page is a page of lines, oldest first. Next continues after them:
// callers that follow a running job poll with it; it is set even when the
// page is the last line so far.
type Page struct {
	Lines []Line `json:"lines"`
	Next  string `json:"next"`
}

// Source reads a job's lines.
type Source interface {
	Query(ctx context.Context, q Query) (Page, error)
}

// ErrBadCursor means a cursor is not one this source returned.
var ErrBadCursor = errors.New("not a cursor of this log source; start again without it")

// idPattern is what a job id or a task id may contain: ids are made by
// the control plane, and the check keeps them out of filter syntax.
var idPattern = regexp.MustCompile(`^[A-Za-z0-9_.:-]+(/[0-9]+/[0-9]+)?$`)

// Validate checks q's ids and limit, and returns its limit.
func (q Query) Validate() (int, error) {
	if !idPattern.MatchString(q.Job) || bytes.ContainsRune([]byte(q.Job), '/') {
		return 0, errors.New("logs: invalid job id")
	}
	if q.Task != "" && !idPattern.MatchString(q.Task) {
		return 0, errors.New("logs: invalid task id")
	}
	switch {
	case q.Limit <= 0:
		return DefaultLimit, nil
	case q.Limit > MaxLimit:
		return MaxLimit, nil
	}
	return q.Limit, nil
}

// fields are the fields of a line that queries look at.
type fields struct {
	Time  time.Time `json:"time"`
	JobID string    `json:"job_id"`
	Task  string    `json:"task"`
}

// Match parses a log line and reports whether q selects it (its job and
// task; not Since). A line that is not a JSON object never matches.
func Match(raw []byte, q Query) (Line, bool) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || raw[0] != '{' {
		return Line{}, false
	}
	var f fields
	if err := json.Unmarshal(raw, &f); err != nil {
		return Line{}, false
	}
	if f.JobID != q.Job || (q.Task != "" && f.Task != q.Task) {
		return Line{}, false
	}
	return Line{Time: f.Time, Fields: json.RawMessage(bytes.Clone(raw))}, true
}
