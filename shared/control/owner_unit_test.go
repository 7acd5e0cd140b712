package control

import (
	"errors"
	"testing"

	"github.com/batchwork/batchwork/shared/domain"
)

// A job's owner comes from its record, whoever asks: it is what executors
// keep apart, so it must be the submitter's and nothing a message says.
func TestJobOwner(t *testing.T) {
	t.Parallel()
	r := newUnitRig(t)
	mine := r.submit(oneStage(1, 1, ""))
	res, err := r.svc.Submit(r.ctx, SubmitRequest{Owner: "arn:aws:iam::123456789012:role/other", IdempotencyKey: "theirs", Spec: []byte(oneStage(1, 1, ""))})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		job, want string
	}{{mine, "tester"}, {res.JobID, "arn:aws:iam::123456789012:role/other"}} {
		if got, err := r.svc.JobOwner(r.ctx, tc.job); err != nil || got != tc.want {
			t.Errorf("owner of %s: %q, %v; want %q", tc.job, got, err, tc.want)
		}
	}
	if _, err := r.svc.JobOwner(r.ctx, "j000000000000000000000"); !errors.Is(err, domain.ErrNotFound) {
		t.Errorf("owner of a job that does not exist: %v, want batch.ErrNotFound", err)
	}
}
