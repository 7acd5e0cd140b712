package control

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/aws/smithy-go"

	"github.com/batchwork/batchwork/shared/domain"
	sm "github.com/batchwork/batchwork/statemachine"
)

// A planning error ends its job only when it is bad input, or when it has
// lasted PlanGiveUp; either way the job's error names the AWS error by its
// code only: the message of an AWS error can name the installation's
// account and roles.
func TestPlanningErrorsEndJobsWithPublicErrors(t *testing.T) {
	t.Parallel()
	const leak = "User: arn:aws:sts::123456789012:assumed-role/batchwork-sweep/x is not authorized"
	cases := []struct {
		name      string
		err       error
		giveUpNow bool // FAILED at once (bad input) or only after PlanGiveUp
		wantCode  string
	}{
		{"bad input", fmt.Errorf("list s3://in-bucket/data/: %w: operation error S3: ListObjectsV2, https response error StatusCode: 403, api error AccessDenied: %s: %w", domain.ErrBadInput, leak, &smithy.GenericAPIError{Code: "AccessDenied", Message: leak}), true, "AccessDenied"},
		{"transient for an hour", fmt.Errorf("list s3://in-bucket/data/: operation error S3: ListObjectsV2, api error PermanentRedirect: %s: %w", leak, &smithy.GenericAPIError{Code: "PermanentRedirect", Message: leak}), false, "PermanentRedirect"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := newUnitRig(t)
			r.blob.Put("in-bucket", "data/a", make([]byte, 8192))
			r.blob.SetFault(func(m string) error {
				if m == "List" {
					return tc.err
				}
				return nil
			})
			job := r.submit(`{"name":"unit","lease":"10s","stages":[{"name":"s","task":"work","partitions":{"input":{"prefix":"s3://in-bucket/data/","splitSize":4096}}}]}`)
			if !tc.giveUpNow {
				if j := r.job(job); j.State != sm.JobRunning {
					t.Fatalf("job after a first failed plan: %s (%s), want RUNNING", j.State, j.Error)
				}
				for i := 0; i < 20 && r.job(job).State == sm.JobRunning; i++ {
					r.clock.Advance(15 * time.Minute)
					_, _ = r.svc.Sweep(r.ctx) // the planning error is the sweep's to report
				}
			}
			j := r.job(job)
			if j.State != sm.JobFailed || !strings.Contains(j.Error, tc.wantCode) || strings.Contains(j.Error, "arn:aws") || strings.Contains(j.Error, "123456789012") {
				t.Fatalf("job %s with error %q; want FAILED naming %s, without the AWS message", j.State, j.Error, tc.wantCode)
			}
		})
	}
}
