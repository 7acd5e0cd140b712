package control

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/batchwork/batchwork/internal/testdouble"
	"github.com/batchwork/batchwork/shared/blob"
	"github.com/batchwork/batchwork/shared/domain"
	"github.com/batchwork/batchwork/shared/dynamo"
	"github.com/batchwork/batchwork/shared/spec"
	"github.com/batchwork/batchwork/shared/split"
	sm "github.com/batchwork/batchwork/statemachine"
	"github.com/google/go-cmp/cmp"
)

// A stage with several inputs plans every prefix, in order, each with its
// own split size, and marks each split with its input; allowEmpty is per
// input, and an error names the input it is about.
func TestMaterializeSeveralInputs(t *testing.T) {
	t.Parallel()
	inputs := func(second string) string {
		return `{"name":"unit","lease":"10s","stages":[{"name":"s","task":"work","partitions":{"inputs":[` +
			`{"name":"orders","prefix":"s3://in-bucket/orders/","format":"csv","splitSize":4096},` + second + `]}}]}`
	}
	const customers = `{"prefix":"s3://in-bucket/customers/","format":"jsonl","splitSize":8192}`
	cases := []struct {
		name    string
		objects map[string]int // key -> size, in bucket "in-bucket"
		spec    string
		want    []split.Split // the plan; nil when the job fails
		wantErr string        // part of the job's error
	}{{
		name:    "both inputs, in order, each with its split size",
		objects: map[string]int{"orders/a": 2*4096 + 1, "customers/x": 8192 + 1, "other/c": 10},
		spec:    inputs(customers),
		want: []split.Split{
			{Key: "orders/a", Start: 0, End: 2731}, {Key: "orders/a", Start: 2731, End: 5462}, {Key: "orders/a", Start: 5462, End: 8193},
			{Key: "customers/x", Start: 0, End: 4097, Source: 1}, {Key: "customers/x", Start: 4097, End: 8193, Source: 1},
		},
	}, {
		name:    "an empty input allowed empty adds no task",
		objects: map[string]int{"orders/a": 100},
		spec:    inputs(strings.Replace(customers, `"format"`, `"allowEmpty":true,"format"`, 1)),
		want:    []split.Split{{Key: "orders/a", Start: 0, End: 100}},
	}, {
		name:    "an empty input not allowed empty fails the job, naming it",
		objects: map[string]int{"orders/a": 100},
		spec:    inputs(customers),
		wantErr: "stages[0].partitions.inputs[1].prefix: s3://in-bucket/customers/ matches no object; check the path, or set stages[0].partitions.inputs[1].allowEmpty: true",
	}, {
		name:    "the first input empty, not allowed",
		objects: map[string]int{"customers/x": 100},
		spec:    inputs(customers),
		wantErr: "stages[0].partitions.inputs[0].prefix: s3://in-bucket/orders/ matches no object",
	}}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			r := newUnitRig(t)
			for k, size := range c.objects {
				r.blob.Put("in-bucket", k, make([]byte, size))
			}
			job := r.submit(c.spec)
			if c.want == nil {
				if j := r.job(job); j.State != sm.JobFailed || !strings.Contains(j.Error, c.wantErr) {
					t.Fatalf("job %s (%q), want FAILED with %q", j.State, j.Error, c.wantErr)
				}
				return
			}
			// Listed objects carry their ETags: compare the rest.
			tasks, err := r.store.TaskListStage(r.ctx, job, 0, len(c.want)+1)
			if err != nil || len(tasks) != len(c.want) || r.stage(job, 0).Total != len(c.want) {
				t.Fatalf("%d tasks (%v), stage %+v; want %d", len(tasks), err, r.stage(job, 0), len(c.want))
			}
			for i, task := range tasks {
				got := *task.Input
				got.ETag = ""
				if got != c.want[i] {
					t.Errorf("task %d input %+v, want %+v", i, got, c.want[i])
				}
			}
			raw, _ := r.blob.Object(blob.PlanKey(job, "s"))
			var plan []split.Split
			if err := json.Unmarshal(raw, &plan); err != nil {
				t.Fatal(err)
			}
			for i := range plan {
				plan[i].ETag = ""
			}
			if diff := cmp.Diff(c.want, plan); diff != "" {
				t.Errorf("plan object (-want +got):\n%s", diff)
			}
			// A claim hands the executor the split with its input.
			last := r.claim(taskRef(job, 0, len(c.want)-1))
			if last.Task.Input == nil || last.Task.Input.Source != c.want[len(c.want)-1].Source {
				t.Errorf("claimed input %+v, want source %d", last.Task.Input, c.want[len(c.want)-1].Source)
			}
		})
	}
}

// Admission resolves and checks every input's prefix; a refusal names
// the input, and nothing is written.
func TestSeveralInputsAdmission(t *testing.T) {
	t.Parallel()
	r := newUnitRig(t)
	body := `{"name":"in","lease":"10s","stages":[{"name":"s","task":"work","partitions":{"inputs":[` +
		`{"prefix":"inputs:orders/"},{"prefix":%q}]}}]}`
	_, err := r.svc.Submit(r.ctx, SubmitRequest{Owner: "alice", IdempotencyKey: "k", Spec: fmt.Appendf(nil, body, "s3://elsewhere/c/")})
	var fe *spec.FieldError
	if !errors.As(err, &fe) || fe.Field != "stages[0].partitions.inputs[1].prefix" || !strings.Contains(fe.Message, `bucket "elsewhere" is not one`) {
		t.Fatalf("submit: %v, want a field error on inputs[1].prefix", err)
	}
	if n := r.store.JobItems(); n != 0 {
		t.Fatalf("%d records written for a refused spec", n)
	}
	res, err := r.svc.Submit(r.ctx, SubmitRequest{Owner: "alice", IdempotencyKey: "k2", Spec: fmt.Appendf(nil, body, "inputs:customers/")})
	if err != nil {
		t.Fatal(err)
	}
	j, err := r.store.JobGet(r.ctx, res.JobID)
	if err != nil {
		t.Fatal(err)
	}
	area := "s3://" + testdouble.DefaultBucket + "/inputs/"
	for k, want := range []string{"orders/", "customers/"} {
		if got := j.Spec.Stages[0].Partitions.Inputs[k].Prefix; !strings.HasPrefix(got, area) || !strings.HasSuffix(got, "/"+want) {
			t.Errorf("inputs[%d] recorded as %q, want alice's inputs area + %s", k, got, want)
		}
	}
}

// A stage after two shuffles of N partitions has N tasks, started when
// both upstream stages completed.
func TestJoinStageAfterTwoShuffles(t *testing.T) {
	t.Parallel()
	r := newUnitRig(t)
	job := r.submit(`{"name":"unit","lease":"10s","stages":[` +
		`{"name":"orders","task":"work","partitions":{"count":2},"shuffle":{"partitions":3}},` +
		`{"name":"customers","task":"work","partitions":{"count":1},"shuffle":{"partitions":3}},` +
		`{"name":"join","task":"work","after":["orders","customers"]}]}`)
	for p := range 2 {
		r.commit(r.claim(taskRef(job, 0, p)), 3)
	}
	if st := r.stage(job, 2); st.State != sm.StageBlocked {
		t.Fatalf("join stage %s with customers still running, want BLOCKED", st.State)
	}
	r.commit(r.claim(taskRef(job, 1, 0)), 3)
	if st := r.stage(job, 2); st.State != sm.StageRunning || st.Total != 3 {
		t.Fatalf("join stage %+v, want RUNNING with 3 tasks", st)
	}
	for p := range 3 {
		r.commit(r.claim(taskRef(job, 2, p)), 1)
	}
	r.wantState(taskRef(job, 2, 0), sm.TaskSucceeded, sm.StageCompleted, sm.JobSucceeded)
}

// The splits of every input count together against a stage's task limit,
// and the error names the input that passed it. Like TestPlanLimits, the
// job is stored as one submitted before the split size had its floor.
func TestSeveralInputsCountTogether(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		second    int
		wantErr   string
		wantTasks int
	}{
		{second: 40_001, wantErr: "stages[0].partitions.inputs[1].splitSize: s3://in-bucket/c/ in splits of 1 bytes gives 100001 splits with the inputs before it, more than 100000"},
		{second: 40_000, wantTasks: spec.MaxPartitions},
	} {
		t.Run(fmt.Sprint(c.second), func(t *testing.T) {
			t.Parallel()
			r := newUnitRig(t)
			r.blob.Put("in-bucket", "o/a", make([]byte, 60_000))
			r.blob.Put("in-bucket", "c/a", make([]byte, c.second))
			sp, err := spec.Parse([]byte(`{"name":"old","lease":"10s","stages":[{"name":"s","task":"work","partitions":{"inputs":[` +
				`{"prefix":"s3://in-bucket/o/"},{"prefix":"s3://in-bucket/c/"}]}}]}`))
			if err != nil {
				t.Fatal(err)
			}
			for k := range sp.Stages[0].Partitions.Inputs {
				sp.Stages[0].Partitions.Inputs[k].SplitSize = 1
			}
			now := r.clock.Now()
			if _, _, err := r.store.JobCreate(r.ctx, dynamo.CreateJobParams{
				Job:     domain.Job{ID: "jold", Owner: "tester", Spec: sp, SpecHash: sp.Hash(), Created: now},
				IdemKey: "jold", StageDue: now, IdemTTL: time.Hour,
			}); err != nil {
				t.Fatal(err)
			}
			r.sweep()
			if j := r.job("jold"); c.wantErr != "" {
				if j.State != sm.JobFailed || !strings.Contains(j.Error, c.wantErr) {
					t.Fatalf("job %s (%q), want FAILED with %q", j.State, j.Error, c.wantErr)
				}
				return
			}
			if st := r.stage("jold", 0); st.Total != c.wantTasks {
				t.Fatalf("stage %+v, want %d tasks", st, c.wantTasks)
			}
		})
	}
}
