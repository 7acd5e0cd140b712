package integration

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"testing"

	"github.com/batchwork/batchwork/shared/batchwork"
	"github.com/batchwork/batchwork/shared/control"
)

// Owners' quotas: no one owner can fill the installation with running
// jobs, declared tasks or schedules, and priority "high" is the
// operator's to give. Each refusal writes nothing and says which quota.
func TestOwnerQuotas(t *testing.T) {
	t.Parallel()
	cfg := testTimings
	cfg.Quotas = control.Quotas{
		ActiveJobs:   control.OwnerLimits{Default: 2},
		Tasks:        control.OwnerLimits{Default: 100, Owners: map[string]int{"big": 0}},
		Schedules:    control.OwnerLimits{Default: 1},
		HighPriority: []string{"ops"},
	}
	e := newEnv(t, batchwork.NewRegistry(), envOptions{noRun: true, control: &cfg})
	ctx := context.Background()
	submit := func(owner, key, body string) (control.SubmitResult, error) {
		return e.r.Service.Submit(ctx, control.SubmitRequest{Owner: owner, IdempotencyKey: key, Spec: []byte(body)})
	}
	quota := func(err error) string {
		var qe *control.QuotaError
		if !errors.As(err, &qe) || !errors.Is(err, control.ErrQuota) {
			return fmt.Sprintf("not a quota error: %v", err)
		}
		return qe.Quota
	}

	t.Run("active jobs", func(t *testing.T) {
		first, err := submit("alice", "j1", oneStage("a", "x", 1))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := submit("alice", "j2", oneStage("a", "x", 1)); err != nil {
			t.Fatal(err)
		}
		if _, err := submit("alice", "j3", oneStage("a", "x", 1)); quota(err) != "active jobs" {
			t.Fatalf("third running job: %v, want the active jobs quota", err)
		}
		// A resubmission of a counted job is not a new job.
		if again, err := submit("alice", "j1", oneStage("a", "x", 1)); err != nil || again.JobID != first.JobID {
			t.Fatalf("resubmission at the quota: %+v %v, want job %s", again, err, first.JobID)
		}
		// The API says 429, with the quota.
		resp := e.call("alice", http.MethodPost, "/jobs", []byte(oneStage("a", "x", 1)), "Idempotency-Key", "j4")
		if resp.Status != http.StatusTooManyRequests || resp.apiErr(t).Code != "quota" {
			t.Fatalf("POST /jobs at the quota: %d %s, want 429 quota", resp.Status, resp.Body)
		}
		// Another owner is not held back, and an ended job makes room.
		if _, err := submit("bob", "j1", oneStage("a", "x", 1)); err != nil {
			t.Fatalf("another owner: %v", err)
		}
		if _, err := e.r.Service.Cancel(ctx, "alice", first.JobID); err != nil {
			t.Fatal(err)
		}
		if _, err := submit("alice", "j5", oneStage("a", "x", 1)); err != nil {
			t.Fatalf("after a cancel: %v", err)
		}
	})
	t.Run("tasks", func(t *testing.T) {
		// A first job larger than the quota, before the owner has counters.
		if _, err := submit("frank", "t0", oneStage("t", "x", 101)); quota(err) != "tasks" {
			t.Fatalf("a first job of 101 tasks over a quota of 100: %v, want the tasks quota", err)
		}
		if _, err := submit("carol", "t1", oneStage("t", "x", 80)); err != nil {
			t.Fatal(err)
		}
		if _, err := submit("carol", "t2", oneStage("t", "x", 21)); quota(err) != "tasks" {
			t.Fatalf("21 tasks over 80 of 100: %v, want the tasks quota", err)
		}
		if _, err := submit("carol", "t3", oneStage("t", "x", 20)); err != nil {
			t.Fatalf("20 tasks up to 100: %v", err)
		}
		if _, err := submit("big", "t1", oneStage("t", "x", 1000)); err != nil {
			t.Fatalf("an owner without a tasks quota: %v", err)
		}
	})
	t.Run("schedules", func(t *testing.T) {
		sched := `{"name":"s","expression":"0 * * * *","spec":` + oneStage("s", "x", 1) + `}`
		first, err := e.r.Service.CreateSchedule(ctx, "dave", []byte(sched))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := e.r.Service.CreateSchedule(ctx, "dave", []byte(sched)); quota(err) != "schedules" {
			t.Fatalf("second schedule: %v, want the schedules quota", err)
		}
		if err := e.r.Service.DeleteSchedule(ctx, "dave", first.ID); err != nil {
			t.Fatal(err)
		}
		if _, err := e.r.Service.CreateSchedule(ctx, "dave", []byte(sched)); err != nil {
			t.Fatalf("after a delete: %v", err)
		}
	})
	t.Run("high priority", func(t *testing.T) {
		high := `{"name":"h","priority":"high","stages":[{"name":"s","task":"x","partitions":{"count":1}}]}`
		resp := e.call("erin", http.MethodPost, "/jobs", []byte(high), "Idempotency-Key", "h1")
		if resp.Status != http.StatusBadRequest || resp.apiErr(t).Field != "priority" {
			t.Fatalf("priority high by an owner not allowed it: %d %s, want 400 on priority", resp.Status, resp.Body)
		}
		if _, err := submit("ops", "h1", high); err != nil {
			t.Fatalf("priority high by an allowed owner: %v", err)
		}
	})
}
