package integration

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/batchwork/batchwork/internal/faults"
	"github.com/batchwork/batchwork/shared/batchwork"
	"github.com/batchwork/batchwork/shared/blob"
	"github.com/batchwork/batchwork/shared/control"
	"github.com/batchwork/batchwork/shared/domain"
	"github.com/batchwork/batchwork/shared/dynamo"
	"github.com/batchwork/batchwork/shared/spec"
	sm "github.com/batchwork/batchwork/statemachine"
)

// A rerun reuses its sources' committed outputs in place: its manifests
// name their objects. Published outputs never change, so a job whose
// outputs a rerun reuses cannot lose them while that rerun has its data:
// deleting the job or its data is a 409 reused_by naming the reruns, and
// is allowed once every rerun reusing it is deleted or has had its data
// deleted. The link is to the job that committed the reused stage, also
// through a rerun of a rerun.

// failedThenRerun runs the fixable spec to a FAILED end (its reduce is
// broken) and reruns it, which reuses the original's map.
func failedThenRerun(t *testing.T, e *env, f *fixable, key string) (orig, rerun string) {
	t.Helper()
	f.reduceBroken.Store(true)
	orig = e.submit(key, []byte(fixableSpec))
	if st := e.waitJob(orig, time.Minute); st.State != string(sm.JobFailed) {
		t.Fatalf("job %s (%s), want FAILED", st.State, st.Error)
	}
	f.reduceBroken.Store(false)
	res, err := e.r.Service.Rerun(context.Background(), control.RerunRequest{Owner: "tester", ID: orig})
	if err != nil {
		t.Fatalf("rerun %s: %v", orig, err)
	}
	if st := e.waitJob(res.JobID, time.Minute); st.State != string(sm.JobSucceeded) {
		t.Fatalf("rerun %s (%s), want SUCCEEDED", st.State, st.Error)
	}
	return orig, res.JobID
}

// reusedBody decodes a 409 reused_by answer.
type reusedBody struct {
	Code     string   `json:"code"`
	Field    string   `json:"field"`
	ReusedBy []string `json:"reusedBy"`
}

func TestReusedOutputsOutliveTheirReruns(t *testing.T) {
	t.Parallel()
	f, reg := newFixable()
	e := newEnv(t, reg, envOptions{})
	ctx := context.Background()
	orig, first := failedThenRerun(t, e, f, "reuse-orig")
	origKeys := keysUnder(t, e, blob.JobPrefix(orig))
	// A rerun of the rerun from its reduce reuses the map the original
	// committed: it links to the original, not to the first rerun.
	second, err := e.r.Service.Rerun(ctx, control.RerunRequest{Owner: "tester", ID: first, From: "reduce"})
	if err != nil {
		t.Fatal(err)
	}
	if st := e.waitJob(second.JobID, time.Minute); st.State != string(sm.JobSucceeded) {
		t.Fatalf("second rerun %s (%s), want SUCCEEDED", st.State, st.Error)
	}

	steps := []struct {
		name, method, path string
		status             int
		reusedBy           []string // for a 409
	}{
		{"the original's data", http.MethodDelete, "/jobs/" + orig + "/data", http.StatusConflict, []string{first, second.JobID}},
		{"the original", http.MethodDelete, "/jobs/" + orig, http.StatusConflict, []string{first, second.JobID}},
		// The first rerun's own stages are reused by nobody.
		{"the first rerun's data", http.MethodDelete, "/jobs/" + first + "/data", http.StatusOK, nil},
		{"the original's data, the second rerun living", http.MethodDelete, "/jobs/" + orig + "/data", http.StatusConflict, []string{second.JobID}},
		{"the second rerun", http.MethodDelete, "/jobs/" + second.JobID, http.StatusOK, nil},
		{"the original's data, no rerun living", http.MethodDelete, "/jobs/" + orig + "/data", http.StatusOK, nil},
		{"the original", http.MethodDelete, "/jobs/" + orig, http.StatusOK, nil},
	}
	for _, s := range steps {
		r := e.call("tester", s.method, s.path, nil)
		if r.Status != s.status {
			t.Fatalf("%s: %s %s: %d %s, want %d", s.name, s.method, s.path, r.Status, r.Body, s.status)
		}
		if s.status != http.StatusConflict {
			continue
		}
		var b reusedBody
		decodeJSON(t, r.Body, &b)
		slices.Sort(b.ReusedBy)
		want := slices.Clone(s.reusedBy)
		slices.Sort(want)
		if b.Code != "reused_by" || b.Field != "id" || !slices.Equal(b.ReusedBy, want) {
			t.Fatalf("%s: refused with %s, want reused_by naming %v", s.name, r.Body, want)
		}
		// Refused means untouched: every object of the original is there.
		if got := keysUnder(t, e, blob.JobPrefix(orig)); !slices.Equal(got, origKeys) {
			t.Fatalf("%s: refused, but the original's objects changed: %v, were %v", s.name, got, origKeys)
		}
		if st := jobState(t, e.r.Service, orig); st.State != string(sm.JobFailed) || st.DataDeleted != nil {
			t.Fatalf("%s: refused, but the original is %s with data deleted at %v", s.name, st.State, st.DataDeleted)
		}
	}
}

// decodeJSON decodes body into v or fails the test.
func decodeJSON(t *testing.T, body []byte, v any) {
	t.Helper()
	if err := json.Unmarshal(body, v); err != nil {
		t.Fatalf("decode %s: %v", body, err)
	}
}

// A deletion and a rerun that would reuse the job's outputs race: the
// deletion reads no living rerun, and the rerun's creation commits before
// the deletion marks the job; or the rerun's checks pass, and the
// deletion marks the job before the rerun's creation commits. Both
// interleavings are forced here (the other write is run just before the
// first one's request goes out). Either the deletion is refused naming the
// rerun, or the rerun is refused (source_deleted) and not created: never
// a rerun whose reused outputs are deleted.
func TestRerunAndDeletionRace(t *testing.T) {
	t.Parallel()
	// markCond says whether a request is a deletion's mark: its condition
	// is the reuse guard (dynamo/reuselinks.go).
	markCond := func(in any) bool {
		switch in := in.(type) {
		case *dynamodb.UpdateItemInput:
			return in.ConditionExpression != nil && strings.Contains(*in.ConditionExpression, "rbv")
		case *dynamodb.TransactWriteItemsInput:
			u := in.TransactItems[0].Update
			return u != nil && u.ConditionExpression != nil && strings.Contains(*u.ConditionExpression, "rbv")
		}
		return false
	}
	// linkTx says whether a request is a rerun's creation linking it to
	// its sources.
	linkTx := func(in any) bool {
		tx, ok := in.(*dynamodb.TransactWriteItemsInput)
		if !ok {
			return false
		}
		return slices.ContainsFunc(tx.TransactItems, func(it types.TransactWriteItem) bool {
			return it.Update != nil && it.Update.UpdateExpression != nil && strings.HasPrefix(*it.Update.UpdateExpression, "ADD rbv")
		})
	}
	deletions := []struct {
		name string
		del  func(svc *control.Service, id string) error
	}{
		{"data", func(svc *control.Service, id string) error {
			_, err := svc.DeleteData(context.Background(), "tester", id)
			return err
		}},
		{"job", func(svc *control.Service, id string) error {
			_, err := svc.DeleteJob(context.Background(), "tester", id)
			return err
		}},
	}
	for _, d := range deletions {
		t.Run("rerun first/"+d.name, func(t *testing.T) {
			t.Parallel()
			f, reg := newFixable()
			inj := faults.New(1)
			e := newEnv(t, reg, envOptions{faults: inj})
			orig, first := failedThenRerun(t, e, f, "race-a")
			// The first rerun must go for the original to be deletable.
			if _, err := e.r.Service.DeleteJob(context.Background(), "tester", first); err != nil {
				t.Fatal(err)
			}
			var fired atomic.Bool
			var rerun control.SubmitResult
			var rerunErr error
			inj.Add(faults.Rule{Service: "DynamoDB", Kind: faults.Throttle, Match: func(_ string, in any) bool {
				if markCond(in) && fired.CompareAndSwap(false, true) {
					rerun, rerunErr = e.r.Service.Rerun(context.Background(), control.RerunRequest{Owner: "tester", ID: orig})
				}
				return false // a hook, never a fault
			}})
			err := d.del(e.r.Service, orig)
			if !fired.Load() || rerunErr != nil || !rerun.Created {
				t.Fatalf("the rerun run before the mark: fired %v, %+v, %v", fired.Load(), rerun, rerunErr)
			}
			var re *domain.ReusedError
			if !errors.As(err, &re) || !slices.Contains(re.By, rerun.JobID) {
				t.Fatalf("deletion after a rerun linked itself: %v; want reused_by naming %s", err, rerun.JobID)
			}
			if st := e.waitJob(rerun.JobID, time.Minute); st.State != string(sm.JobSucceeded) {
				t.Fatalf("the rerun %s (%s), want SUCCEEDED on the outputs it reuses", st.State, st.Error)
			}
		})
		t.Run("deletion first/"+d.name, func(t *testing.T) {
			t.Parallel()
			f, reg := newFixable()
			inj := faults.New(1)
			e := newEnv(t, reg, envOptions{faults: inj})
			orig, first := failedThenRerun(t, e, f, "race-b")
			// The first rerun must go for the original to be deletable.
			if _, err := e.r.Service.DeleteJob(context.Background(), "tester", first); err != nil {
				t.Fatal(err)
			}
			before := listIDs(t, e)
			var fired atomic.Bool
			var delErr error
			inj.Add(faults.Rule{Service: "DynamoDB", Kind: faults.Throttle, Match: func(_ string, in any) bool {
				if linkTx(in) && fired.CompareAndSwap(false, true) {
					delErr = d.del(e.r.Service, orig)
				}
				return false
			}})
			res, err := e.r.Service.Rerun(context.Background(), control.RerunRequest{Owner: "tester", ID: orig})
			if !fired.Load() || delErr != nil {
				t.Fatalf("the deletion run before the rerun's creation: fired %v, %v", fired.Load(), delErr)
			}
			var re *control.RedriveError
			if !errors.As(err, &re) || re.Code != "source_deleted" {
				t.Fatalf("rerun after its source's deletion marked it: %+v, %v; want a source_deleted refusal", res, err)
			}
			if d.name == "job" {
				before = slices.DeleteFunc(before, func(id string) bool { return id == orig })
			}
			if after := listIDs(t, e); !slices.Equal(after, before) {
				t.Fatalf("jobs after the refused rerun %v, want %v: it made a job", after, before)
			}
		})
	}
}

// listIDs lists the tester's jobs.
func listIDs(t *testing.T, e *env) []string {
	t.Helper()
	l, err := e.r.Service.ListJobs(context.Background(), control.ListJobsRequest{Owner: "tester", Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, j := range l.Jobs {
		ids = append(ids, j.ID)
	}
	slices.Sort(ids)
	return ids
}

// With a retention, the sweep expires a job's records the retention after
// it ended, but not while a rerun reusing its outputs lives: it looks
// again later, and expires it once the rerun is gone.
func TestRetentionWaitsForReruns(t *testing.T) {
	t.Parallel()
	const retention = time.Hour
	cfg := testTimings
	cfg.Retention = retention
	rig := newSweepRig(t, cfg)
	e := rig.e
	ctx := context.Background()
	store := dynamo.New(dynamodb.NewFromConfig(e.cfg), e.r.Resources.Table)
	store.JobSetRetention(retention)
	svc := rig.service(store, e.r.Queue)
	exec := rig.executor(svc)
	orig := submitTo(t, svc, "orig", `{"name":"ret","deadline":"10m","stages":[
		{"name":"a","task":"work","partitions":{"count":2},"shuffle":{"partitions":2}},
		{"name":"b","task":"work","after":["a"]}]}`)
	work(t, e, exec)
	wantSucceeded(t, svc, orig)
	rig.clk.Advance(retention / 2)
	res, err := svc.Rerun(ctx, control.RerunRequest{Owner: "tester", ID: orig, From: "b"})
	if err != nil {
		t.Fatal(err)
	}
	work(t, e, exec)
	wantSucceeded(t, svc, res.JobID)
	exists := func(id string) bool { return len(recordsOf(t, e, id)) > 0 }
	sweeps := func() {
		for range 3 {
			mustSweep(t, svc)
		}
	}

	rig.clk.Advance(retention/2 + time.Second) // the original's turn
	sweeps()
	if !exists(orig) || jobState(t, svc, orig).State != string(sm.JobSucceeded) {
		t.Fatalf("the original expired while its rerun %s, reusing its outputs, lives", res.JobID)
	}
	rig.clk.Advance(retention / 2) // the rerun's turn
	sweeps()
	if exists(res.JobID) {
		t.Fatalf("the rerun's records are left after its retention: %v", recordsOf(t, e, res.JobID))
	}
	rig.clk.Advance(retention) // the original's next look
	sweeps()
	if exists(orig) {
		t.Fatalf("the original's records are left after its rerun expired: %v", recordsOf(t, e, orig))
	}
}

// A rerun's links are parts of the transaction that creates it, beside a
// part per stage: a rerun of a 64-stage job that reuses stages committed
// by many jobs (a long chain of reruns) would pass DynamoDB's 100 parts.
// It is refused with an error naming the problem, and nothing is written.
func TestRerunWithTooManySourcesIsRefused(t *testing.T) {
	t.Parallel()
	e := newEnv(t, batchwork.NewRegistry(), envOptions{noRun: true})
	ctx := context.Background()
	var stages []string
	reuse := map[int]string{}
	for i := range 64 {
		stages = append(stages, fmt.Sprintf(`{"name":"s%d","task":"x","partitions":{"count":1}%s}`, i, map[bool]string{true: "", false: fmt.Sprintf(`,"after":["s%d"]`, i-1)}[i == 0]))
		if i < 63 {
			reuse[i] = fmt.Sprintf("jsource%02d", i%20) // 20 jobs committed the reused stages
		}
	}
	sp, err := spec.Parse([]byte(`{"name":"deep","stages":[` + strings.Join(stages, ",") + `]}`))
	if err != nil {
		t.Fatal(err)
	}
	id := "jmanysources000000000"
	_, _, err = e.r.Store.JobCreate(ctx, dynamo.CreateJobParams{
		Job:     domain.Job{ID: id, Owner: "tester", Spec: sp, SpecHash: "h", Created: time.Now()},
		IdemKey: "many-sources", IdemTTL: time.Hour, StageDue: time.Now(),
		Rerun: &dynamo.RerunParams{Of: "jsource00", Reuse: reuse},
	})
	if !errors.Is(err, dynamo.ErrTooManySources) {
		t.Fatalf("rerun reusing 20 jobs' outputs in 64 stages: %v; want ErrTooManySources", err)
	}
	if recs := recordsOf(t, e, id); len(recs) != 0 {
		t.Fatalf("a refused rerun wrote %v", recs)
	}
}
