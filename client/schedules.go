package client

import (
	"context"
	"iter"
	"net/http"
	"net/url"
)

func schedulePath(id string, rest ...string) string {
	p := "/schedules/" + url.PathEscape(id)
	for _, r := range rest {
		p += r
	}
	return p
}

// CreateSchedule creates a schedule from its JSON document: name, spec (a
// job spec object), expression, and optionally timeZone, start, end,
// overlap and catchUp. An invalid one is ErrInvalid naming the field.
func (c *Client) CreateSchedule(ctx context.Context, doc []byte) (Schedule, error) {
	var s Schedule
	err := c.Call(ctx, http.MethodPost, "/schedules", nil, doc, nil, &s)
	return s, err
}

// GetSchedule reads one of the caller's schedules.
func (c *Client) GetSchedule(ctx context.Context, id string) (Schedule, error) {
	var s Schedule
	err := c.Call(ctx, http.MethodGet, schedulePath(id), nil, nil, nil, &s)
	return s, err
}

// PauseSchedule stops a schedule's firings until it is resumed.
func (c *Client) PauseSchedule(ctx context.Context, id string) (Schedule, error) {
	var s Schedule
	err := c.Call(ctx, http.MethodPost, schedulePath(id, "/pause"), nil, nil, nil, &s)
	return s, err
}

// ResumeSchedule lets a paused schedule fire again from now on: the times
// that passed while it was paused are not caught up.
func (c *Client) ResumeSchedule(ctx context.Context, id string) (Schedule, error) {
	var s Schedule
	err := c.Call(ctx, http.MethodPost, schedulePath(id, "/resume"), nil, nil, nil, &s)
	return s, err
}

// DeleteSchedule deletes a schedule; its jobs and history are kept.
func (c *Client) DeleteSchedule(ctx context.Context, id string) error {
	return c.Call(ctx, http.MethodDelete, schedulePath(id), nil, nil, nil, nil)
}

// ListSchedules reads a page of the caller's schedules.
func (c *Client) ListSchedules(ctx context.Context, p Page) (ScheduleList, error) {
	var l ScheduleList
	err := c.Call(ctx, http.MethodGet, "/schedules", p.query(), nil, nil, &l)
	return l, err
}

// Schedules iterates over the caller's schedules.
func (c *Client) Schedules(ctx context.Context, p Page) iter.Seq2[Schedule, error] {
	return items(p.Cursor, func(cursor string) ([]Schedule, string, error) {
		p.Cursor = cursor
		l, err := c.ListSchedules(ctx, p)
		return l.Schedules, l.NextCursor, err
	})
}

// ListScheduleRuns reads a page of a schedule's history, newest first,
// with each run's job's state.
func (c *Client) ListScheduleRuns(ctx context.Context, id string, p Page) (RunList, error) {
	var l RunList
	err := c.Call(ctx, http.MethodGet, schedulePath(id, "/runs"), p.query(), nil, nil, &l)
	return l, err
}

// ScheduleRuns iterates over a schedule's history, newest first.
func (c *Client) ScheduleRuns(ctx context.Context, id string, p Page) iter.Seq2[ScheduleRun, error] {
	return items(p.Cursor, func(cursor string) ([]ScheduleRun, string, error) {
		p.Cursor = cursor
		l, err := c.ListScheduleRuns(ctx, id, p)
		return l.Runs, l.NextCursor, err
	})
}
