package control

import (
	"testing"

	"github.com/batchwork/batchwork/shared/batch"
	sm "github.com/batchwork/batchwork/statemachine"
)

// The job's error counts a stage's failures against its allowance only
// when the failure could have been tolerated: an input that changed is
// never tolerated, and "1 tasks failed, 2 tolerated" would read as if the
// allowance had been passed (or the failure tolerated) when it was not.
func TestOverAllowanceOnlyForTolerableFailures(t *testing.T) {
	t.Parallel()
	r := newUnitRig(t)
	job := r.submit(`{"name":"unit","stages":[{"name":"s","task":"work","partitions":{"count":4},"toleratedFailures":{"count":2}}]}`)
	sp, err := r.svc.CachedSpec(r.ctx, job)
	if err != nil {
		t.Fatal(err)
	}
	const reason = "the input changed"
	for _, c := range []struct {
		class batch.ErrorClass
		want  string
	}{
		{batch.ClassInputChanged, reason},
		{batch.ClassError, `stage "s": 1 tasks failed, 2 tolerated; ` + reason},
	} {
		tk := batch.Task{Ref: taskRef(job, 0, 1), State: sm.TaskFailed, ErrorClass: c.class}
		if got := r.svc.overAllowance(r.ctx, sp, tk, reason); got != c.want {
			t.Errorf("class %s: job error %q, want %q", c.class, got, c.want)
		}
	}
}
