package tasks

import (
	"context"
	"testing"

	"github.com/batchwork/batchwork/shared/domain"
	sm "github.com/batchwork/batchwork/statemachine"
)

// The job's error counts a stage's failures against its allowance only
// when the failure could have been tolerated: an input that changed is
// never tolerated, and "1 tasks failed, 2 tolerated" would read as if the
// allowance had been passed (or the failure tolerated) when it was not.
func TestOverAllowanceOnlyForTolerableFailures(t *testing.T) {
	t.Parallel()
	sp := parseSpec(t, `{"name":"unit","stages":[{"name":"s","task":"work","partitions":{"count":4},"toleratedFailures":{"count":2}}]}`)
	s := newStubLifecycle(Config{}, stubStore{stage: domain.Stage{Job: "j", Total: 4}})
	const reason = "the input changed"
	for _, c := range []struct {
		class domain.ErrorClass
		want  string
	}{
		{domain.ClassInputChanged, reason},
		{domain.ClassError, `stage "s": 1 tasks failed, 2 tolerated; ` + reason},
	} {
		tk := domain.Task{Ref: domain.TaskRef{Job: "j", Stage: 0, Partition: 1}, State: sm.TaskFailed, ErrorClass: c.class}
		if got := s.overAllowance(context.Background(), sp, tk, reason); got != c.want {
			t.Errorf("class %s: job error %q, want %q", c.class, got, c.want)
		}
	}
}
