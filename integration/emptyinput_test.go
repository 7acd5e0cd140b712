package integration

import (
	"slices"
	"strings"
	"testing"

	"github.com/batchwork/batchwork/shared/blob"
	"github.com/batchwork/batchwork/shared/principal"
	sm "github.com/batchwork/batchwork/statemachine"
)

// An input prefix that matches no object is most often a typo in a data
// path: the job fails at planning, naming the resolved s3:// prefix and
// the opt-in, rather than succeed with nothing read.
func TestEmptyInputFailsNamingThePrefix(t *testing.T) {
	t.Parallel()
	rig := newSweepRig(t, testTimings)
	id := submitTo(t, rig.svc, "typo", `{"name":"typo","stages":[
	  {"name":"read","task":"work","partitions":{"input":{"prefix":"inputs:no-such-corpus/"}},"shuffle":{"partitions":2}},
	  {"name":"after","task":"work","after":["read"]}]}`)
	js := jobState(t, rig.svc, id)
	prefix := "s3://" + rig.e.r.Resources.Bucket + "/" + blob.InputsPrefix(principal.Key("tester")) + "no-such-corpus/"
	if js.State != string(sm.JobFailed) || !strings.Contains(js.Error, prefix+" matches no object") ||
		!strings.Contains(js.Error, "stages[0].partitions.input.allowEmpty") {
		t.Fatalf("job %s (%q), want FAILED naming %s and allowEmpty", js.State, js.Error, prefix)
	}
	if hs := work(t, rig.e, rig.exec); len(hs) != 0 {
		t.Fatalf("handled %v, want no task", bodies(hs))
	}
}

// A stage that opts in with allowEmpty completes with no task, and its
// downstream stages run: a count stage, and a shuffle's reducers over
// empty partitions.
func TestAllowEmptyInputRunsDownstream(t *testing.T) {
	t.Parallel()
	rig := newSweepRig(t, testTimings)
	id := submitTo(t, rig.svc, "empty", `{"name":"empty","stages":[
	  {"name":"read","task":"work","partitions":{"input":{"prefix":"inputs:nothing-here/","allowEmpty":true}},"shuffle":{"partitions":2}},
	  {"name":"reduce","task":"work","after":["read"]},
	  {"name":"after","task":"work","after":["reduce"],"partitions":{"count":1}}]}`)
	if js := jobState(t, rig.svc, id); js.Stages[0].State != string(sm.StageCompleted) {
		t.Fatalf("empty stage is %s after submit, want COMPLETED: %+v", js.Stages[0].State, js)
	}
	var handled []string
	for range 2 {
		handled = append(handled, bodies(work(t, rig.e, rig.exec))...)
	}
	want := append(taskIDs(id, 1, 2), taskIDs(id, 2, 1)...)
	slices.Sort(handled)
	slices.Sort(want)
	if !slices.Equal(handled, want) {
		t.Fatalf("handled %v, want the reducers and the last stage's task %v", handled, want)
	}
	wantSucceeded(t, rig.svc, id)
}
