package integration

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/batchwork/batchwork/internal/executor"
	"github.com/batchwork/batchwork/internal/executor/feed"
	"github.com/batchwork/batchwork/internal/iamrec"
	"github.com/batchwork/batchwork/shared/batchwork"
	"github.com/batchwork/batchwork/shared/blob"
	"github.com/batchwork/batchwork/shared/control"
	"github.com/batchwork/batchwork/shared/domain"
	"github.com/batchwork/batchwork/shared/principal"
	"github.com/batchwork/batchwork/shared/queue"
	"github.com/batchwork/batchwork/shared/tuning"
	sm "github.com/batchwork/batchwork/statemachine"
)

// The code paths of each function that the rest of the suite runs only
// on untagged contexts (services the tests drive by hand) or not at all
// (the claim and commit functions, which serve remote executors), run here
// on a context tagged with the function, so the IAM check (iam_test.go)
// sees every action each role needs. Setup and assertions use untagged
// contexts and so are not counted. The claim and commit cases call what
// functions/claim and functions/commit call (RemoteClaim; RemoteCommitRequest.CommitArgs and Commit).

// iamRig is one case's installation with a hand-driven control plane on
// a test clock.
type iamRig struct {
	e    *env
	clk  *testClock
	logs *logCounter
	svc  *control.Service
}

// remoteCommit commits as the commit function does: the request's claim
// and result, its outputs checked against S3.
func remoteCommit(ctx context.Context, svc *control.Service, req control.RemoteCommitRequest) error {
	c, res, err := req.CommitArgs(ctx, svc.CachedSpec)
	if err != nil {
		return err
	}
	return svc.Commit(ctx, c, res)
}

func newIAMRig(t *testing.T) *iamRig {
	t.Helper()
	reg := batchwork.NewRegistry()
	reg.Register("work", func(ctx context.Context, t *batchwork.Task) error {
		_, err := fmt.Fprintf(t.Out, "%s/%s/%d attempt %d\n", t.Job, t.Stage, t.Partition, t.Attempt)
		return err
	})
	r := &iamRig{clk: newTestClock(), logs: newLogCounter()}
	r.e = newEnv(t, reg, envOptions{noRun: true})
	r.svc = newService(r.e, testTimings, r.e.r.Store, r.e.r.Queue, r.clk, r.logs.logger())
	return r
}

// iamSpec is a one-task job with a 10 s lease and attempts attempts.
func iamSpec(attempts int) string {
	return fmt.Sprintf(`{"name":"iam","lease":"10s","stages":[{"name":"s","task":"work","partitions":{"count":1},"retry":{"maxAttempts":%d}}]}`, attempts)
}

const iamLease = 10 * time.Second

// lostAttempt submits a one-task job, claims its task as an executor that
// then dies after writing its output, and moves the clock past the lease.
func (r *iamRig) lostAttempt(t *testing.T, attempts int) (domain.TaskRef, control.Claim) {
	t.Helper()
	id := submitTo(t, r.svc, "lost", iamSpec(attempts))
	ref := domain.TaskRef{Job: id, Stage: 0, Partition: 0}
	c := mustClaim(t, r.svc, ref)
	putOutput(t, r.e, c, "lost\n")
	r.clk.Advance(iamLease + sm.LeaseSkew + time.Second)
	return ref, c
}

// wantTagged checks that the claim's output is tagged for expiry.
func (r *iamRig) wantTagged(t *testing.T, c control.Claim) {
	t.Helper()
	key := blob.OutputKey(c.Task.Ref.Job, c.StageName(), c.Task.Ref.Partition, c.Task.Attempt, 0)
	if got := objectTags(t, r.e, key)[tuning.UncommittedTagKey]; got != tuning.UncommittedTagValue {
		t.Errorf("%s: tag %s=%q, want %q", key, tuning.UncommittedTagKey, got, tuning.UncommittedTagValue)
	}
}

// publishedFolder writes a folder that a job of owner published, at
// name/ in its outputs area: its claim, its success marker and one output
// under s/. A job reading a folder below it as input has its planner read
// the claim and the marker (control.checkPublishedInputs).
func (r *iamRig) publishedFolder(t *testing.T, owner, name string) (outputs string) {
	t.Helper()
	folder := blob.OutputsPrefix(principal.Key(owner)) + name + "/"
	for key, body := range map[string]string{
		folder + blob.ClaimName: `{"job":"published"}`, folder + blob.SuccessName: `{"job":"published"}`, folder + "s/part-00000": "one\ntwo\n",
	} {
		if err := r.e.r.Blob.PutIfAbsent(context.Background(), key, []byte(body)); err != nil {
			t.Fatal(err)
		}
	}
	return "s3://" + r.e.r.Resources.Bucket + "/" + folder + "s/"
}

func (r *iamRig) remoteClaim(t *testing.T, ctx context.Context, ref domain.TaskRef) control.RemoteClaim {
	t.Helper()
	c, err := r.svc.RemoteClaim(ctx, control.RemoteClaimRequest{Task: ref.String()})
	if err != nil {
		t.Fatalf("claim %s: %v", ref, err)
	}
	return c
}

func TestIAMPathsOfEachFunction(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		fn   string
		run  func(t *testing.T, r *iamRig, ctx context.Context)
	}{
		{"claim takes over an expired lease and tags the lost attempt's outputs", iamrec.FnClaim, func(t *testing.T, r *iamRig, ctx context.Context) {
			ref, lost := r.lostAttempt(t, 2)
			if c := r.remoteClaim(t, ctx, ref); c.Attempt != 2 || c.Token == "" {
				t.Fatalf("claim %+v, want attempt 2", c)
			}
			r.wantTagged(t, lost)
		}},
		{"claim takes over the task of a dead executor", iamrec.FnClaim, func(t *testing.T, r *iamRig, ctx context.Context) {
			id := submitTo(t, r.svc, "dead", iamSpec(2))
			ref := domain.TaskRef{Job: id, Stage: 0, Partition: 0}
			// The holder never renews its liveness record: it is dead at
			// once, while its lease still runs.
			if _, err := r.svc.Claim(control.WithExecutor(context.Background(), control.NewExecutorID()), ref); err != nil {
				t.Fatalf("claim by the executor that dies: %v", err)
			}
			r.clk.Advance(sm.LeaseSkew + time.Second)
			if c := r.remoteClaim(t, ctx, ref); c.Attempt != 2 {
				t.Fatalf("claim %+v, want attempt 2 (taken over)", c)
			}
		}},
		{"claim fails the job when the last attempt's lease expired", iamrec.FnClaim, func(t *testing.T, r *iamRig, ctx context.Context) {
			ref, _ := r.lostAttempt(t, 1)
			if _, err := r.svc.RemoteClaim(ctx, control.RemoteClaimRequest{Task: ref.String()}); !errors.Is(err, domain.ErrAlreadyDone) {
				t.Fatalf("claim after the last attempt's lease: %v, want ErrAlreadyDone", err)
			}
			if js := jobState(t, r.svc, ref.Job); js.State != string(sm.JobFailed) {
				t.Fatalf("job %s, want FAILED", js.State)
			}
		}},
		{"commit completes a stage, plans the downstream input stage and ends the job", iamrec.FnCommit, func(t *testing.T, r *iamRig, ctx context.Context) {
			bg := context.Background()
			// Two inputs: the downstream stage's two tasks are a chunk,
			// written as PartiQL inserts with a ready marker.
			r.e.putInput("tester", "in/iam/a.txt", []byte("one\ntwo\n"))
			r.e.putInput("tester", "in/iam/b.txt", []byte("three\n"))
			id := submitTo(t, r.svc, "commit", `{"name":"iam","stages":[{"name":"a","task":"work","partitions":{"count":1}},
			  {"name":"b","task":"work","after":["a"],"partitions":{"input":{"prefix":"inputs:in/iam/"}}}]}`)
			for _, ref := range []domain.TaskRef{{Job: id, Stage: 0, Partition: 0}, {Job: id, Stage: 1, Partition: 0}, {Job: id, Stage: 1, Partition: 1}} {
				stage := ref.Stage
				c, err := r.svc.RemoteClaim(bg, control.RemoteClaimRequest{Task: ref.String()})
				if err != nil {
					t.Fatalf("claim %s: %v", ref, err)
				}
				key := blob.OutputKey(id, []string{"a", "b"}[stage], ref.Partition, c.Attempt, 0)
				if err := r.e.r.Blob.PutIfAbsent(bg, key, []byte("out\n")); err != nil {
					t.Fatal(err)
				}
				if err := remoteCommit(ctx, r.svc, control.RemoteCommitRequest{Claim: c, Outputs: 1}); err != nil {
					t.Fatalf("commit %s: %v", ref, err)
				}
			}
			if js := jobState(t, r.svc, id); js.State != string(sm.JobSucceeded) {
				t.Fatalf("job %s (%s), want SUCCEEDED", js.State, js.Error)
			}
		}},
		{"commit of a fenced attempt tags its outputs", iamrec.FnCommit, func(t *testing.T, r *iamRig, ctx context.Context) {
			ref, lost := r.lostAttempt(t, 2)
			mustClaim(t, r.svc, ref) // another executor's attempt 2
			stale := control.RemoteClaim{Task: ref.String(), Token: lost.Task.Token, Attempt: lost.Task.Attempt, Lease: lost.Lease}
			if err := remoteCommit(ctx, r.svc, control.RemoteCommitRequest{Claim: stale, Outputs: 1}); !errors.Is(err, domain.ErrStaleClaim) {
				t.Fatalf("late commit: %v, want a stale claim", err)
			}
			r.wantTagged(t, lost)
		}},
		{"sweep expires a lease and tags the lost attempt's outputs", iamrec.FnSweep, func(t *testing.T, r *iamRig, ctx context.Context) {
			_, lost := r.lostAttempt(t, 2)
			r.clk.Advance(iamLease) // the claim's grace, after which it is due
			if c, err := r.svc.Sweep(ctx); err != nil || c.Expired != 1 {
				t.Fatalf("sweep: %+v, %v; want one lease expired", c, err)
			}
			r.wantTagged(t, lost)
		}},
		{"sweep plans an input stage whose planning failed", iamrec.FnSweep, func(t *testing.T, r *iamRig, ctx context.Context) {
			e := r.e
			// Two inputs: the stage's two tasks are a chunk, written as
			// PartiQL inserts (a stage partitioned by count writes none).
			e.putInput("tester", "in/a.txt", []byte("one\ntwo\n"))
			e.putInput("tester", "in/b.txt", []byte("three\n"))
			svc := newServiceWithBlob(e, testTimings, e.r.Store, &flakyList{Blob: e.r.Blob, n: 1}, r.clk, r.logs)
			id := submitTo(t, svc, "plan", `{"name":"plan","stages":[{"name":"s","task":"work","partitions":{"input":{"prefix":"inputs:in/"}}}]}`)
			r.clk.Advance(testTimings.StartGrace + time.Second)
			if _, err := svc.Sweep(ctx); err != nil {
				t.Fatalf("sweep: %v", err)
			}
			if n := len(stageTasks(t, e, id, 0)); n != 2 {
				t.Fatalf("stage planned into %d tasks, want 2", n)
			}
		}},
		{"commit plans a downstream stage over a published folder, reading its claim and success marker", iamrec.FnCommit, func(t *testing.T, r *iamRig, ctx context.Context) {
			in := r.publishedFolder(t, "tester", "pub")
			id := submitTo(t, r.svc, "published", fmt.Sprintf(`{"name":"iam","stages":[{"name":"a","task":"work","partitions":{"count":1}},
			  {"name":"b","task":"work","after":["a"],"partitions":{"input":{"prefix":%q}}}]}`, in))
			c := r.remoteClaim(t, context.Background(), domain.TaskRef{Job: id, Stage: 0, Partition: 0})
			if err := r.e.r.Blob.PutIfAbsent(context.Background(), blob.OutputKey(id, "a", 0, c.Attempt, 0), []byte("out\n")); err != nil {
				t.Fatal(err)
			}
			if err := remoteCommit(ctx, r.svc, control.RemoteCommitRequest{Claim: c, Outputs: 1}); err != nil {
				t.Fatalf("commit: %v", err)
			}
			if n := len(stageTasks(t, r.e, id, 1)); n != 1 {
				t.Fatalf("stage b planned into %d tasks, want 1", n)
			}
		}},
		{"sweep plans an input stage over a published folder, reading its claim and success marker", iamrec.FnSweep, func(t *testing.T, r *iamRig, ctx context.Context) {
			e := r.e
			in := r.publishedFolder(t, "tester", "pub")
			svc := newServiceWithBlob(e, testTimings, e.r.Store, &flakyList{Blob: e.r.Blob, n: 1}, r.clk, r.logs)
			id := submitTo(t, svc, "plan", fmt.Sprintf(`{"name":"plan","stages":[{"name":"s","task":"work","partitions":{"input":{"prefix":%q}}}]}`, in))
			r.clk.Advance(testTimings.StartGrace + time.Second)
			if _, err := svc.Sweep(ctx); err != nil {
				t.Fatalf("sweep: %v", err)
			}
			if n := len(stageTasks(t, e, id, 0)); n != 1 {
				t.Fatalf("stage planned into %d tasks, want 1", n)
			}
		}},
		{"sweep sends a live task's dead letter back", iamrec.FnSweep, func(t *testing.T, r *iamRig, ctx context.Context) {
			q := r.e.r.Resources.Queues
			id := submitTo(t, r.svc, "dlq", iamSpec(2))
			if msgs := receiveVisible(t, r.e, q.Normal); len(msgs) != 1 {
				t.Fatalf("%d messages after submit, want 1", len(msgs))
			}
			body := domain.TaskRef{Job: id, Stage: 0, Partition: 0}.String()
			if err := r.e.r.Queue.SendBatch(context.Background(), q.DLQ, []queue.Send{{Body: body}}); err != nil {
				t.Fatal(err)
			}
			if c, err := r.svc.Sweep(ctx); err != nil || c.DeadLettered != 1 {
				t.Fatalf("sweep: %+v, %v; want one dead letter handled", c, err)
			}
			if n := messagesIn(t, r.e, q.DLQ); n != 0 {
				t.Errorf("dead-letter queue holds %d messages, want 0", n)
			}
		}},
		{"sweep hands a schedule's firing to the timer queue and fires it from there", iamrec.FnSweep, func(t *testing.T, r *iamRig, ctx context.Context) {
			// The timer queue's delays are real: the real clock.
			svc, bg := r.e.r.Service, context.Background()
			sc, at := timerSchedule(t, svc, "alice", 8*time.Second)
			if c, err := svc.Sweep(ctx); err != nil || c.HandedOff != 1 {
				t.Fatalf("sweep: %+v, %v; want one firing handed off", c, err)
			}
			// As the sweep function's event source mapping would (RunTimers
			// attributes its work to the sweep itself).
			timers, stop := context.WithCancel(bg)
			done := make(chan struct{})
			go func() { defer close(done); r.e.r.RunTimers(timers) }()
			defer func() { stop(); <-done }()
			waitFor(t, time.Until(at)+15*time.Second, "the firing's job and the timer message's delete", func() bool {
				l, err := svc.ScheduleRuns(bg, "alice", sc.ID, 10, "")
				return err == nil && len(l.Runs) == 1 && l.Runs[0].JobID != "" && messagesIn(t, r.e, r.e.r.Resources.Queues.Timer) == 0
			})
		}},
		{"api plans an input job, reads its status and deletes a schedule", iamrec.FnAPI, func(t *testing.T, r *iamRig, _ context.Context) {
			// Through the runner's API server, which attributes its requests
			// to the api function itself.
			e := r.e
			e.putInput("alice", "in/api/a.txt", []byte("one\ntwo\n"))
			id := e.submitAs("alice", "api", []byte(`{"name":"api","stages":[{"name":"s","task":"work","partitions":{"input":{"prefix":"inputs:in/api/"}}}]}`))
			var st control.JobStatus
			e.callJSON("alice", http.MethodGet, "/jobs/"+id, nil, http.StatusOK, &st)
			if st.State != string(sm.JobRunning) {
				t.Fatalf("job %s, want RUNNING", st.State)
			}
			var sc control.ScheduleView
			e.callJSON("alice", http.MethodPost, "/schedules", []byte(`{"name":"nightly","expression":"30 2 * * *","spec":`+schedJobSpec+`}`),
				http.StatusCreated, &sc, "Content-Type", "application/json")
			if resp := e.call("alice", http.MethodDelete, "/schedules/"+sc.ID, nil); resp.Status != http.StatusNoContent {
				t.Fatalf("delete schedule: status %d: %s", resp.Status, resp.Body)
			}
		}},
		{"api deletes an ended job's data", iamrec.FnAPI, func(t *testing.T, r *iamRig, _ context.Context) {
			// Through the runner's API server, as above.
			e := r.e
			id := e.submitAs("alice", "delete", []byte(iamSpec(1)))
			var st control.JobStatus
			e.callJSON("alice", http.MethodPost, "/jobs/"+id+"/cancel", nil, http.StatusOK, &st)
			key := blob.OutputKey(id, "s", 0, 1, 0) // an attempt's output, written before the cancel
			if err := e.r.Blob.PutIfAbsent(context.Background(), key, []byte("out\n")); err != nil {
				t.Fatal(err)
			}
			var d control.DataDeletion
			e.callJSON("alice", http.MethodDelete, "/jobs/"+id+"/data", nil, http.StatusOK, &d)
			if d.Deleted != 1 || !d.Complete {
				t.Fatalf("deletion %+v, want the one object deleted", d)
			}
		}},
		{"executor takes over an expired lease and tags the lost attempt's outputs", iamrec.FnExecutor, func(t *testing.T, r *iamRig, ctx context.Context) {
			ref, lost := r.lostAttempt(t, 2)
			c, err := r.svc.Claim(control.WithExecutor(ctx, control.NewExecutorID()), ref)
			if err != nil || c.Task.Attempt != 2 {
				t.Fatalf("claim: %+v, %v; want attempt 2", c.Task, err)
			}
			r.wantTagged(t, lost)
		}},
		{"lambda executor runs a two-stage job and hides a held task's message", iamrec.FnExecutor, func(t *testing.T, r *iamRig, ctx context.Context) {
			e, url := r.e, r.e.r.Resources.Queues.Normal
			e.putInput("tester", "in/lambda/a.txt", []byte("one\ntwo\n"))
			e.putInput("tester", "in/lambda/b.txt", []byte("three\n"))
			// The executor completes stage a, plans and enqueues stage b
			// (its two tasks a chunk of PartiQL inserts), reads b's input
			// and completes the job.
			id := e.submit("lambda", []byte(fmt.Sprintf(`{"name":"lambda","stages":[{"name":"a","task":"work","partitions":{"count":1}},
			  {"name":"b","task":"work","after":["a"],"partitions":{"input":{"prefix":"%sin/lambda/"}}}]}`, e.inputsURI("tester"))))
			held := e.submit("held", []byte(iamSpec(2)))
			mustClaim(t, e.r.Service, domain.TaskRef{Job: held, Stage: 0, Partition: 0}) // by a live executor elsewhere
			run := &executor.Runner{CP: e.r.Service, Blob: e.r.Blob, Registry: executor.PublicRegistry(e.reg), Log: r.logs.logger()}
			h := &feed.LambdaHandler{
				Handler: run, CP: run.CP, Log: run.Log,
				Queue: e.r.Queue, QueueURLs: map[string]string{queueName(url): url},
			}
			kept := 0
			for round := 0; jobState(t, e.r.Service, id).State == string(sm.JobRunning); round++ {
				if round == 10 {
					t.Fatalf("job %s still running after %d batches", id, round)
				}
				// Lambda's poller receives and deletes with the function's role.
				msgs, err := e.r.Queue.Receive(ctx, url, 10, time.Second, time.Minute)
				if err != nil {
					t.Fatal(err)
				}
				if len(msgs) == 0 {
					continue
				}
				resp, err := h.Handle(ctx, sqsEvent(t, e, url, msgs))
				if err != nil {
					t.Fatal(err)
				}
				failed := map[string]bool{}
				for _, f := range resp.BatchItemFailures {
					failed[f.ItemIdentifier] = true
				}
				kept += len(failed)
				for _, m := range msgs {
					if !failed[m.ID] {
						if err := e.r.Queue.DeleteBatch(ctx, url, []string{m.Receipt}); err != nil {
							t.Fatal(err)
						}
					}
				}
			}
			if js := jobState(t, e.r.Service, id); js.State != string(sm.JobSucceeded) || kept == 0 {
				t.Fatalf("job %s (%s), %d messages kept; want SUCCEEDED and the held task's message kept", js.State, js.Error, kept)
			}
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			c.run(t, newIAMRig(t), iamrec.WithFunction(context.Background(), c.fn))
		})
	}
}
