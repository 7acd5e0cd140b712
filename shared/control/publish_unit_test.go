package control

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/batchwork/batchwork/internal/testdouble"
	"github.com/batchwork/batchwork/shared/blob"
	"github.com/batchwork/batchwork/shared/control/operations"
	"github.com/batchwork/batchwork/shared/principal"
	"github.com/batchwork/batchwork/shared/spec"
	sm "github.com/batchwork/batchwork/statemachine"
)

// pubBlob is the rig's blob, which publishes (Blob's publishing
// methods): conditional puts and copies into any bucket, reads and paged
// listings. Its listing pages hold two keys, so a publish reads several.
type pubBlob struct {
	*testdouble.Blob
}

// newPublishRig is a unit rig whose blob store publishes.
func newPublishRig(t *testing.T, opts ...func(*Config)) (*unitRig, *pubBlob) {
	r := newUnitRig(t, opts...)
	pb := &pubBlob{Blob: r.blob}
	cfg := unitTimings
	for _, o := range opts {
		o(&cfg)
	}
	r.svc = New(cfg, r.store, r.queue, pb, testLogger(t))
	r.svc.Now = r.clock.Now
	r.svc.Jitter = func(time.Duration) time.Duration { return 0 }
	return r, pb
}

// An output folder names the submitter's own outputs area (in full, or as
// outputs:<path>/, recorded resolved) or a folder under the submitter's
// key in a bucket the operator allows for outputs; anything else is a 400
// on "output", and nothing is written.
func TestOutputFolderIsScopedToTheOwner(t *testing.T) {
	t.Parallel()
	const allowed = "corp-results"
	key := principal.Key("tester")
	own := "s3://" + testdouble.DefaultBucket + "/" + blob.OutputsPrefix(key)
	other := "s3://" + testdouble.DefaultBucket + "/" + blob.OutputsPrefix(principal.Key("bob"))
	cases := []struct {
		name, output string
		want         string // recorded; "" when refused
		msg          string // part of the refusal's message
	}{
		{name: "shorthand", output: "outputs:wc/2026/", want: own + "wc/2026/"},
		{name: "own outputs area in full", output: own + "wc/", want: own + "wc/"},
		{name: "allowed bucket under own key", output: "s3://" + allowed + "/" + key + "/wc/", want: "s3://" + allowed + "/" + key + "/wc/"},

		{name: "another owner's outputs area", output: other + "wc/", msg: "is not a folder in your outputs area"},
		{name: "the whole outputs area", output: own, msg: "is not a folder in your outputs area"},
		{name: "every owner's outputs", output: "s3://" + testdouble.DefaultBucket + "/outputs/", msg: "is not a folder in your outputs area"},
		{name: "the job area", output: "s3://" + testdouble.DefaultBucket + "/jobs/x/", msg: "is not a folder in your outputs area"},
		{name: "own inputs area", output: "s3://" + testdouble.DefaultBucket + "/" + blob.InputsPrefix(key), msg: "is not a folder in your outputs area"},
		{name: "allowed bucket under another key", output: "s3://" + allowed + "/" + principal.Key("bob") + "/wc/", msg: "your outputs go in folders under your owner key"},
		{name: "allowed bucket, own key alone", output: "s3://" + allowed + "/" + key + "/", msg: "your outputs go in folders under your owner key"},
		{name: "a bucket not allowed", output: "s3://elsewhere/" + key + "/wc/", msg: `bucket "elsewhere" is not one this installation publishes outputs to`},
		{name: "not a folder", output: "outputs:wc", msg: "must end with '/'"},
		{name: "a whole bucket", output: "s3://" + allowed, msg: "names a whole bucket"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			r, _ := newPublishRig(t, func(cfg *Config) { cfg.OutputBuckets = []string{allowed} })
			body := oneStage(1, 1, fmt.Sprintf(`,"output":%q`, c.output))
			res, err := r.svc.Submit(r.ctx, SubmitRequest{Owner: "tester", IdempotencyKey: "k", Spec: []byte(body)})
			if c.want == "" {
				var fe *spec.FieldError
				if !errors.As(err, &fe) || fe.Field != "output" || !strings.Contains(fe.Message, c.msg) {
					t.Fatalf("submit: %v, want a field error on output containing %q", err, c.msg)
				}
				if n := r.store.JobItems(); n != 0 {
					t.Fatalf("%d records written for a refused spec", n)
				}
				return
			}
			if err != nil {
				t.Fatalf("submit: %v", err)
			}
			if got := r.job(res.JobID).Spec.Output; got != c.want {
				t.Fatalf("recorded output %q, want %q", got, c.want)
			}
		})
	}
}

// A succeeded job's outputs are copied from the attempts its manifest
// lists to their final names, after the folder's claim and before
// _SUCCESS, and only then does the job succeed. A publish cut short is
// finished by the sweep, which copies only what is missing; another job's
// claim on the folder, or a refusal, fails the job with an error naming
// the folder.
func TestPublishOutputs(t *testing.T) {
	t.Parallel()
	const folder = "s3://" + testdouble.DefaultBucket + "/outputs/"
	cases := []struct {
		name string
		// before runs after submit, before the tasks commit.
		before func(r *unitRig, pb *pubBlob, job, folder string)
		// fault is set on the blob before the last commit.
		fault testdouble.Hook
		// sweeps after the last commit.
		sweep bool

		wantState sm.JobState
		wantErr   string
		// wantCopies is how many copies the whole run made; -1: any.
		wantCopies int
	}{
		{name: "publishes every output, claim first and _SUCCESS last", wantState: sm.JobSucceeded, wantCopies: 3},
		{name: "an interrupted publish is finished by the sweep, copying only what is missing",
			fault: failNth("CopyIfAbsent", 2), sweep: true, wantState: sm.JobSucceeded, wantCopies: 3},
		{name: "a retry finds its own claim", before: func(r *unitRig, pb *pubBlob, job, folder string) {
			pb.Put(testdouble.DefaultBucket, strings.TrimPrefix(folder, "s3://"+testdouble.DefaultBucket+"/")+blob.ClaimName, []byte(`{"job":"`+job+`"}`))
		}, wantState: sm.JobSucceeded, wantCopies: 3},
		{name: "another job's claim fails the job", before: func(r *unitRig, pb *pubBlob, job, folder string) {
			pb.Put(testdouble.DefaultBucket, strings.TrimPrefix(folder, "s3://"+testdouble.DefaultBucket+"/")+blob.ClaimName, []byte(`{"job":"jOTHER"}`))
		}, wantState: sm.JobFailed, wantErr: "already holds the outputs of job jOTHER", wantCopies: 0},
		{name: "a refusal fails the job", before: func(r *unitRig, pb *pubBlob, job, folder string) {
			pb.Refuse(testdouble.DefaultBucket)
		}, wantState: sm.JobFailed, wantErr: "publish outputs to " + folder, wantCopies: 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			r, pb := newPublishRig(t)
			out := folder + principal.Key("tester") + "/wc/"
			job := r.submit(oneStage(3, 1, `,"output":"outputs:wc/"`))
			area := strings.TrimPrefix(out, "s3://"+testdouble.DefaultBucket+"/")
			if c.before != nil {
				c.before(r, pb, job, out)
			}
			for p := range 3 {
				cl := r.claim(taskRef(job, 0, p))
				r.output(cl, 1)
				pb.Put(testdouble.DefaultBucket, blob.OutputKey(job, "s", p, cl.Task.Attempt, 0), []byte(fmt.Sprintf("part %d\n", p)))
				if p == 2 {
					pb.SetFault(c.fault)
				}
				err := r.svc.Commit(r.ctx, cl, CommitResult{Outputs: 1})
				if err != nil && (c.fault == nil || p != 2) {
					t.Fatalf("commit %d: %v", p, err)
				}
			}
			pb.SetFault(nil)
			if c.sweep {
				if st := r.job(job).State; st != sm.JobPublishing {
					t.Fatalf("job %s after an interrupted publish, want PUBLISHING until it is finished", st)
				}
				r.clock.Advance(time.Minute)
				r.sweep()
			}
			j := r.job(job)
			if j.State != c.wantState || !strings.Contains(j.Error, c.wantErr) {
				t.Fatalf("job %s (%q), want %s with an error containing %q", j.State, j.Error, c.wantState, c.wantErr)
			}
			entries := r.log.All()
			copies := 0
			for _, e := range entries {
				if strings.HasPrefix(e, "copy ") {
					copies++
				}
			}
			if copies != c.wantCopies {
				t.Errorf("%d copies, want %d:\n%s", copies, c.wantCopies, strings.Join(entries, "\n"))
			}
			success := area + blob.SuccessName
			_, hasSuccess := pb.Object(success)
			if c.wantState != sm.JobSucceeded {
				if hasSuccess {
					t.Errorf("%s written for a failed job", success)
				}
				return
			}
			claim := r.log.Index("publish put s3://" + testdouble.DefaultBucket + "/" + area + blob.ClaimName)
			last := r.log.Index("publish put s3://" + testdouble.DefaultBucket + "/" + success)
			if c.before == nil && claim < 0 {
				t.Errorf("no claim written")
			}
			if last < 0 || last < claim {
				t.Fatalf("_SUCCESS at %d, claim at %d: want _SUCCESS written after the claim", last, claim)
			}
			for i, e := range entries {
				if strings.HasPrefix(e, "copy ") && i > last {
					t.Errorf("%q after _SUCCESS", e)
				}
			}
			for p := range 3 {
				got, ok := pb.Object(blob.PublishedKey(area, "s", p, 0))
				if want := fmt.Sprintf("part %d\n", p); !ok || string(got) != want {
					t.Errorf("published part %d: %q, want %q", p, got, want)
				}
			}
		})
	}
}

// failNth fails the n-th call (from 1) of method.
func failNth(method string, n int) testdouble.Hook {
	var mu sync.Mutex // copies run at once
	calls := 0
	return func(m string) error {
		if m != method {
			return nil
		}
		mu.Lock()
		defer mu.Unlock()
		calls++
		if calls == n {
			return testdouble.ErrInjected
		}
		return nil
	}
}

// Jobs without an output publish nothing.
func TestNoOutputPublishesNothing(t *testing.T) {
	t.Parallel()
	r, _ := newPublishRig(t)
	job := r.submit(oneStage(1, 1, ""))
	r.commit(r.claim(taskRef(job, 0, 0)), 1)
	if st := r.job(job).State; st != sm.JobSucceeded {
		t.Fatalf("job %s, want SUCCEEDED", st)
	}
	for _, e := range r.log.All() {
		if strings.HasPrefix(e, "publish") || strings.HasPrefix(e, "copy") {
			t.Errorf("%q for a job without an output", e)
		}
	}
}

// The outputs area's prefix is as long as spec's limits assume.
func TestOutputsAreaPrefixBytes(t *testing.T) {
	t.Parallel()
	if got, want := len(blob.OutputsPrefix(principal.Key("any owner"))), spec.OutputsAreaPrefixBytes; got != want {
		t.Fatalf("outputs area prefix is %d bytes, spec.OutputsAreaPrefixBytes %d", got, want)
	}
}

// A job may read a folder of its owner's outputs area as its input, never
// another owner's, and its planner skips the folder's claim and _SUCCESS,
// which are not data.
func TestPublishedFolderIsAnInput(t *testing.T) {
	t.Parallel()
	r, pb := newPublishRig(t)
	folder := blob.OutputsPrefix(principal.Key("tester")) + "wc/"
	pb.Put(testdouble.DefaultBucket, folder+blob.ClaimName, []byte(`{"job":"j"}`))
	pb.Put(testdouble.DefaultBucket, folder+"reduce/part-00000", []byte("a\t1\n"))
	pb.Put(testdouble.DefaultBucket, folder+"reduce/part-00001", []byte("b\t2\n"))
	pb.Put(testdouble.DefaultBucket, folder+blob.SuccessName, []byte(`{}`))
	in := func(prefix string) string {
		return fmt.Sprintf(`{"name":"in","lease":"10s","stages":[{"name":"s","task":"work","partitions":{"input":{"prefix":%q}}}]}`, prefix)
	}
	job := r.submit(in("s3://" + testdouble.DefaultBucket + "/" + folder))
	st := r.stage(job, 0)
	if st.Total != 2 {
		t.Fatalf("stage planned into %d tasks, want 2 (the two parts, not the markers)", st.Total)
	}
	for p := range 2 {
		if k := r.task(taskRef(job, 0, p)).Input.Key; blob.IsPublishMarker(k) {
			t.Errorf("task %d reads %s", p, k)
		}
	}
	bob := "s3://" + testdouble.DefaultBucket + "/" + blob.OutputsPrefix(principal.Key("bob")) + "wc/"
	_, err := r.svc.Submit(r.ctx, SubmitRequest{Owner: "tester", IdempotencyKey: "bob", Spec: []byte(in(bob))})
	var fe *spec.FieldError
	if !errors.As(err, &fe) || fe.Field != "stages[0].partitions.input.prefix" {
		t.Fatalf("submit reading another owner's outputs: %v, want a field error on the prefix", err)
	}
}

// A job is never left with a complete published folder (_SUCCESS) unless
// it SUCCEEDED: readers take _SUCCESS to mean "this job succeeded and this
// is all of it". A cancel that comes while the outputs are copied finds
// the job PUBLISHING, which only the publisher ends: the store refuses the
// cancel, and the API answers 409 "publishing its outputs", and the job
// then succeeds with its folder whole. (Before the PUBLISHING state, the
// cancel won, the copies and _SUCCESS went on, and a CANCELLED job had a
// complete folder.)
func TestCancelDuringPublishingLeavesNoSuccessMarker(t *testing.T) {
	t.Parallel()
	r, pb := newPublishRig(t)
	job := r.submit(oneStage(3, 1, `,"output":"outputs:wc/"`))
	area := blob.OutputsPrefix(principal.Key("tester")) + "wc/"
	for p := range 3 {
		cl := r.claim(taskRef(job, 0, p))
		r.output(cl, 1)
		if p == 2 {
			// The owner cancels the job while the first output is copied.
			// (Service.Cancel's own write: its Status read is not faked.)
			var once sync.Once
			pb.SetFault(func(m string) error {
				if m == "CopyIfAbsent" {
					once.Do(func() {
						if err := r.store.EndJob(r.ctx, job, sm.JobCancel, operations.CancelReason, "", r.clock.Now()); !errors.Is(err, sm.ErrInvalidTransition) {
							t.Errorf("cancel of a PUBLISHING job in the store: %v, want it refused", err)
						}
						_, err := r.svc.Cancel(r.ctx, "tester", job)
						var ended *JobEndedError
						if !errors.As(err, &ended) || ended.State != sm.JobPublishing || !strings.Contains(err.Error(), "publishing its outputs") {
							t.Errorf("Cancel of a PUBLISHING job: %v, want a *JobEndedError saying it is publishing its outputs", err)
						}
					})
				}
				return nil
			})
		}
		if err := r.svc.Commit(r.ctx, cl, CommitResult{Outputs: 1}); err != nil {
			t.Fatalf("commit %d: %v", p, err)
		}
	}
	pb.SetFault(nil)
	j := r.job(job)
	_, hasSuccess := pb.Object(area + blob.SuccessName)
	if j.State != sm.JobSucceeded && hasSuccess {
		t.Fatalf("job is %s (%q) but its output folder holds %s: a reader takes the folder as a succeeded job's complete output",
			j.State, j.Error, blob.SuccessName)
	}
	if j.State != sm.JobSucceeded || !hasSuccess {
		t.Fatalf("job %s (%q), %s written %v: want the cancel refused and the job SUCCEEDED with its folder whole", j.State, j.Error, blob.SuccessName, hasSuccess)
	}
}

// An output folder nested inside another job's published folder, or
// holding one, would change that folder after its _SUCCESS: job B
// publishing to outputs:wc/s/, inside job A's stage folder outputs:wc/s/,
// would make a reader of A's stage folder read B's outputs too. Submit
// refuses a folder with a claim (_batchwork.json) at it, above it up to
// the owner's area or under it (OutputClaimedError, 409 output_claimed);
// publishing checks again, for a job submitted before the claim, and fails
// the job naming both folders, without writing into the other's.
func TestNestedOutputFolderIsRefused(t *testing.T) {
	t.Parallel()
	r, pb := newPublishRig(t)
	area := blob.OutputsPrefix(principal.Key("tester"))
	a := r.submit(oneStage(1, 1, `,"output":"outputs:wc/"`))
	r.commit(r.claim(taskRef(a, 0, 0)), 1)
	if st := r.job(a).State; st != sm.JobSucceeded {
		t.Fatalf("job A %s", st)
	}
	before := pb.Keys(area + "wc/")
	// Refused at submit: A's claim is above B's folder.
	_, err := r.svc.Submit(r.ctx, SubmitRequest{Owner: "tester", IdempotencyKey: "nested", Spec: []byte(oneStage(1, 1, `,"output":"outputs:wc/s/"`))})
	var oc *OutputClaimedError
	if !errors.As(err, &oc) || oc.Job != a || !strings.Contains(oc.Error(), "is inside s3://"+testdouble.DefaultBucket+"/"+area+"wc/, the output folder of job "+a) {
		t.Errorf("submit of B: %v, want output_claimed naming job A's folder", err)
	}
	// And at publish, for a job submitted before A claimed its folder (or
	// that got past the submit check).
	claimKey := area + "wc/" + blob.ClaimName
	claim, _ := pb.Object(claimKey)
	pb.Delete(claimKey)
	b := r.submit(oneStage(1, 1, `,"output":"outputs:wc/s/"`))
	pb.Put(testdouble.DefaultBucket, claimKey, claim)
	r.commit(r.claim(taskRef(b, 0, 0)), 1)
	after := pb.Keys(area + "wc/")
	if st := r.job(b).State; st == sm.JobSucceeded && len(after) != len(before) {
		t.Fatalf("job B published into job A's completed folder; A's folder held %d objects at its _SUCCESS, now %d:\nbefore %v\nafter  %v",
			len(before), len(after), before, after)
	}
	if j := r.job(b); j.State != sm.JobFailed || !strings.Contains(j.Error, "nested with the output folder") || !strings.Contains(j.Error, "wc/ of job "+a) {
		t.Fatalf("job B %s (%q), want FAILED naming job A's folder", j.State, j.Error)
	}
	if len(after) != len(before) {
		t.Fatalf("job B wrote into job A's folder: before %v, after %v", before, after)
	}
	// And the other way round: C publishes to outputs:up/, above B2's
	// published outputs:up/b/: refused at submit, and at publish for a C
	// submitted before B2 published.
	c := r.submit(oneStage(1, 1, `,"output":"outputs:up/"`))
	b2 := r.submit(oneStage(1, 1, `,"output":"outputs:up/b/"`))
	r.commit(r.claim(taskRef(b2, 0, 0)), 1)
	_, err = r.svc.Submit(r.ctx, SubmitRequest{Owner: "tester", IdempotencyKey: "holding", Spec: []byte(oneStage(1, 1, `,"output":"outputs:up/"`))})
	if !errors.As(err, &oc) || oc.Job != b2 || !strings.Contains(oc.Error(), "holds s3://"+testdouble.DefaultBucket+"/"+area+"up/b/, the output folder of job "+b2) {
		t.Errorf("submit of a folder holding B2's: %v, want output_claimed naming job B2's folder", err)
	}
	r.commit(r.claim(taskRef(c, 0, 0)), 1)
	if j := r.job(c); j.State != sm.JobFailed || !strings.Contains(j.Error, "up/b/ of job "+b2) {
		t.Fatalf("job C %s (%q), want FAILED naming job B2's folder", j.State, j.Error)
	}
	if _, ok := pb.Object(area + "up/" + blob.ClaimName); ok {
		t.Fatalf("job C claimed a folder holding another job's published folder")
	}
}

// A publish failure that no retry changes but that is not classified as
// permanent (blob.permanentPublish classifies S3's own 4xx answers; this
// one is an opaque error) is not retried by the sweep for ever, with the
// job PUBLISHING and no error to show (holding its owner's active-job
// quota): past PublishGiveUp from its stages' completion, a try that
// copied nothing fails the job with the error.
func TestPublishThatNeverSucceedsEndsTheJob(t *testing.T) {
	t.Parallel()
	r, pb := newPublishRig(t)
	job := r.submit(oneStage(1, 1, `,"output":"outputs:wc/"`))
	redirect := errors.New("copy: api error PermanentRedirect: The bucket you are attempting to access must be addressed using the specified endpoint")
	pb.SetFault(func(m string) error {
		if m == "CopyIfAbsent" {
			return redirect
		}
		return nil
	})
	cl := r.claim(taskRef(job, 0, 0))
	r.output(cl, 1)
	_ = r.svc.Commit(r.ctx, cl, CommitResult{Outputs: 1})
	sweepErrs := 0
	for range 48 { // a day of sweeps, every half hour
		r.clock.Advance(30 * time.Minute)
		if _, err := r.svc.Sweep(r.ctx); err != nil {
			sweepErrs++
		}
	}
	if j := r.job(job); j.State != sm.JobFailed || !strings.Contains(j.Error, "PermanentRedirect") {
		t.Fatalf("job still %s with error %q after a day of sweeps (%d of 48 erred) retrying a publish that cannot succeed", j.State, j.Error, sweepErrs)
	}
}
