package control

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/batchwork/batchwork/shared/domain"
	"github.com/batchwork/batchwork/shared/logs"
	"github.com/batchwork/batchwork/shared/spec"
)

// Each attempt in a task's history names the executor that ran it and
// when it was claimed: an ended attempt from its end record, the current
// one from the task record.
func TestAttemptsKeepExecutorAndStart(t *testing.T) {
	t.Parallel()
	r := newUnitRig(t)
	job := r.submit(oneStage(1, 3, ""))
	ref := taskRef(job, 0, 0)
	first := r.clock.Now()
	c, err := r.svc.Claim(WithExecutor(r.ctx, "exec-a"), ref)
	if err != nil {
		t.Fatal(err)
	}
	r.clock.Advance(3 * time.Second)
	d, err := r.svc.Fail(WithExecutor(r.ctx, "exec-a"), c, FailParams{Cause: "boom"})
	if err != nil || !d.Retry {
		t.Fatalf("fail = %+v, %v; want a retry", d, err)
	}
	r.clock.Advance(d.Delay)
	second := r.clock.Now()
	if _, err := r.svc.Claim(WithExecutor(r.ctx, "exec-b"), ref); err != nil {
		t.Fatal(err)
	}
	e, ok := r.store.AttemptEnd(ref, 1)
	if !ok || e.Executor != "exec-a" || !e.Started.Equal(first) {
		t.Fatalf("end record of attempt 1 = %+v; want executor exec-a, started %v", e, first)
	}
	list, err := r.svc.ListTasks(r.ctx, ListTasksRequest{Owner: "tester", ID: job})
	if err != nil {
		t.Fatal(err)
	}
	atts := list.Tasks[0].Attempts
	want := []struct {
		outcome, executor string
		started           time.Time
	}{{OutcomeRetried, "exec-a", first}, {OutcomeRunning, "exec-b", second}}
	if len(atts) != len(want) {
		t.Fatalf("attempts %+v, want %d", atts, len(want))
	}
	for i, w := range want {
		a := atts[i]
		if a.Outcome != w.outcome || a.Executor != w.executor || a.Started == nil || !a.Started.Equal(w.started) {
			t.Errorf("attempt %d = %+v (started %v); want %s by %s from %v", a.Attempt, a, a.Started, w.outcome, w.executor, w.started)
		}
	}
}

// sourceFunc is a logs.Source from a function.
type sourceFunc func(context.Context, logs.Query) (logs.Page, error)

func (f sourceFunc) Query(ctx context.Context, q logs.Query) (logs.Page, error) { return f(ctx, q) }

// JobLogs reads the log source only for the caller's own job, and turns
// STAGE/PARTITION into the task id the lines carry.
func TestJobLogs(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name      string
		owner     string
		task      string
		noSource  bool
		wantTask  string // the query's task, "%j" standing for the job id
		wantErr   error
		wantField string
	}{
		{name: "the owner reads the job's lines", owner: "tester"},
		{name: "a task by stage name", owner: "tester", task: "t/0", wantTask: "/1/0"},
		{name: "a task by stage index", owner: "tester", task: "0/3", wantTask: "/0/3"},
		{name: "another owner's job is not found", owner: "mallory", wantErr: domain.ErrNotFound},
		{name: "another owner's job is not found, with a task too", owner: "mallory", task: "s/0", wantErr: domain.ErrNotFound},
		{name: "no such stage", owner: "tester", task: "nope/1", wantField: "task"},
		{name: "no partition", owner: "tester", task: "s", wantField: "task"},
		{name: "a negative partition", owner: "tester", task: "s/-1", wantField: "task"},
		{name: "no log source", owner: "tester", noSource: true, wantErr: ErrLogsUnavailable},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var asked []logs.Query
			src := sourceFunc(func(_ context.Context, q logs.Query) (logs.Page, error) {
				asked = append(asked, q)
				return logs.Page{Lines: []logs.Line{{Fields: []byte(`{"msg":"x"}`)}}, Next: "f1"}, nil
			})
			r := newUnitRig(t, func(c *Config) {
				if !tc.noSource {
					c.Logs = src
				}
			})
			job := r.submit(twoStages(4, 1))
			pg, err := r.svc.JobLogs(r.ctx, LogsRequest{Owner: tc.owner, ID: job, Task: tc.task, Limit: 10})
			var fe *spec.FieldError
			switch {
			case tc.wantField != "":
				if !errors.As(err, &fe) || fe.Field != tc.wantField {
					t.Fatalf("err %v, want a field error on %s", err, tc.wantField)
				}
			case tc.wantErr != nil:
				if !errors.Is(err, tc.wantErr) {
					t.Fatalf("err %v, want %v", err, tc.wantErr)
				}
			case err != nil:
				t.Fatal(err)
			default:
				if len(pg.Lines) != 1 || len(asked) != 1 {
					t.Fatalf("page %+v after %d queries", pg, len(asked))
				}
				want := logs.Query{Job: job, Limit: 10, Since: r.job(job).Created.Add(-time.Minute)}
				if tc.wantTask != "" {
					want.Task = job + tc.wantTask
				}
				if asked[0] != want {
					t.Fatalf("query %+v, want %+v", asked[0], want)
				}
			}
			if err != nil && len(asked) > 0 {
				t.Fatalf("the source was read (%+v) although the request failed", asked)
			}
		})
	}
}
