package api

import (
	"context"
	"encoding/json"
	"strings"
	"time"

	"github.com/batchwork/batchwork/shared/control"
	"github.com/batchwork/batchwork/shared/dynamo"
	"github.com/batchwork/batchwork/shared/schedule"
	"github.com/batchwork/batchwork/shared/spec"
)

// The scripted control plane's schedules: every field filled, so the
// document's schemas are checked against a full response.

const fakeScheduleID = "s0123456789a0123456789"

func fullSchedule() control.ScheduleView {
	return control.ScheduleView{
		Schedule: schedule.Schedule{
			ID: fakeScheduleID, Owner: "alice", Name: "nightly",
			Spec:       json.RawMessage(`{"name":"x","stages":[{"name":"a","task":"t","partitions":{"count":1}}]}`),
			Expression: "30 2 * * *", TimeZone: "Europe/Paris", Start: t0, End: t0.Add(24 * time.Hour),
			Overlap: schedule.OverlapSkip, CatchUp: schedule.CatchUpFireOnce, Paused: true, CreatedAt: t0,
		},
		LastFired: ptr(t0), Next: ptr(t0.Add(time.Hour)), LastJobID: fakeID,
	}
}

func (s *scripted) CreateSchedule(_ context.Context, owner string, body []byte) (control.ScheduleView, error) {
	s.last = [2]string{owner, string(body)}
	if s.err != nil {
		return control.ScheduleView{}, s.err
	}
	if _, err := schedule.Parse(body); err != nil {
		return control.ScheduleView{}, err
	}
	return fullSchedule(), nil
}

func (s *scripted) GetSchedule(_ context.Context, owner, id string) (control.ScheduleView, error) {
	s.last = [2]string{owner, id}
	return fullSchedule(), s.err
}

func (s *scripted) ListSchedules(_ context.Context, owner string, limit int, cursor string) (control.ScheduleList, error) {
	s.last = []any{owner, limit, cursor}
	return control.ScheduleList{Schedules: []control.ScheduleView{fullSchedule()}, NextCursor: fakeScheduleID}, s.err
}

func (s *scripted) PauseSchedule(_ context.Context, owner, id string) (control.ScheduleView, error) {
	s.last = [2]string{owner, id}
	return fullSchedule(), s.err
}

func (s *scripted) ResumeSchedule(_ context.Context, owner, id string) (control.ScheduleView, error) {
	s.last = [2]string{owner, id}
	v := fullSchedule()
	v.Paused = false
	return v, s.err
}

func (s *scripted) DeleteSchedule(_ context.Context, owner, id string) error {
	s.last = [2]string{owner, id}
	return s.err
}

func (s *scripted) ScheduleRuns(_ context.Context, owner, id string, limit int, cursor string) (control.RunList, error) {
	s.last = []any{owner, id, limit, cursor}
	return control.RunList{Runs: []control.ScheduleRun{
		{Scheduled: t0, Action: string(dynamo.RunStarted), StartedAt: ptr(t0.Add(time.Second)), JobID: fakeID, Status: "RUNNING",
			CatchUp: true, Through: ptr(t0.Add(2 * time.Hour)), MissedCount: 3, Note: "caught up"},
		{Scheduled: t0.Add(-time.Hour), Action: string(dynamo.RunMissed), MissedCount: 2},
	}, NextCursor: t0.Format(time.RFC3339)}, s.err
}

var errBadScheduleID = &spec.FieldError{Field: "id", Message: "is not a schedule id"}

// scheduleCases drive the /schedules routes to each documented response
// (see TestHandlersHonourDocument).
var scheduleCases = func() []struct {
	err            error
	method, target string
	owner, body    string
	header         []string
	status         int
} {
	type tc = struct {
		err            error
		method, target string
		owner, body    string
		header         []string
		status         int
	}
	valid := `{"name":"nightly","expression":"30 2 * * *","timeZone":"Europe/Paris","spec":{"name":"x","stages":[{"name":"a","task":"t","partitions":{"count":1}}]}}`
	jsonCT := []string{"Content-Type", "application/json"}
	id := "/schedules/" + fakeScheduleID
	out := []tc{
		{nil, "POST", "/schedules", "alice", valid, jsonCT, 201},
		{nil, "POST", "/schedules", "alice", `{"name":"n","expression":"61 * * * *","spec":{"name":"x","stages":[{"name":"a","task":"t","partitions":{"count":1}}]}}`, jsonCT, 400},
		{nil, "POST", "/schedules", "", valid, jsonCT, 401},
		{nil, "POST", "/schedules", "alice", `{"name":"` + strings.Repeat("x", schedule.MaxScheduleBytes) + `"}`, jsonCT, 413},
		{&control.QuotaError{Quota: "schedules", Max: 1}, "POST", "/schedules", "alice", valid, jsonCT, 429},
		{errInternal, "POST", "/schedules", "alice", valid, jsonCT, 500},

		{nil, "GET", "/schedules?limit=5&cursor=" + fakeScheduleID, "alice", "", nil, 200},
		{nil, "GET", "/schedules?limit=ten", "alice", "", nil, 400},
		{nil, "GET", "/schedules", "", "", nil, 401},
		{errInternal, "GET", "/schedules", "alice", "", nil, 500},

		{nil, "GET", id + "/runs?limit=5&cursor=2026-11-21T10:00:00Z", "alice", "", nil, 200},
		{nil, "GET", id + "/runs?limit=0", "alice", "", nil, 400},
		{nil, "GET", id + "/runs", "", "", nil, 401},
		{errNotFound, "GET", id + "/runs", "alice", "", nil, 404},
		{errInternal, "GET", id + "/runs", "alice", "", nil, 500},

		{nil, "DELETE", id, "alice", "", nil, 204},
		{errBadScheduleID, "DELETE", id, "alice", "", nil, 400},
		{nil, "DELETE", id, "", "", nil, 401},
		{errNotFound, "DELETE", id, "alice", "", nil, 404},
		{errInternal, "DELETE", id, "alice", "", nil, 500},
	}
	for _, p := range []struct{ method, path string }{{"GET", id}, {"POST", id + "/pause"}, {"POST", id + "/resume"}} {
		out = append(out,
			tc{nil, p.method, p.path, "alice", "", nil, 200},
			tc{errBadScheduleID, p.method, p.path, "alice", "", nil, 400},
			tc{nil, p.method, p.path, "", "", nil, 401},
			tc{errNotFound, p.method, p.path, "alice", "", nil, 404},
			tc{errInternal, p.method, p.path, "alice", "", nil, 500},
		)
	}
	return out
}()
