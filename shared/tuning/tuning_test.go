package tuning

import (
	"strings"
	"testing"
	"time"
)

func TestDefaultsAgree(t *testing.T) {
	if err := Check(QueueVisibility, ExecutorTimeout, MaxReceiveCount); err != nil {
		t.Fatalf("the defaults disagree: %v", err)
	}
	if QueueVisibility != QueueVisibilityFor(ExecutorTimeout) {
		t.Fatalf("QueueVisibility %v, QueueVisibilityFor(%v) = %v", QueueVisibility, ExecutorTimeout, QueueVisibilityFor(ExecutorTimeout))
	}
	// Before its claim a message is hidden briefly, so one received by an
	// executor that dies comes back in seconds; the claim then sets the
	// lease.
	if ReceiveVisibility > Lease/6 || ReceiveVisibility < 2*time.Second {
		t.Fatalf("receive visibility %v: want seconds, far under the lease %v", ReceiveVisibility, Lease)
	}
	if SweepTimeout > SweepRate {
		t.Fatalf("a sweep (%v) may outlast its period (%v)", SweepTimeout, SweepRate)
	}
	if APITimeout >= 30*time.Second {
		t.Fatalf("API timeout %v: API Gateway gives up at 30 s", APITimeout)
	}
	if UncommittedOutputExpiry <= Lease {
		t.Fatalf("uncommitted outputs expire (%v) within a lease (%v)", UncommittedOutputExpiry, Lease)
	}
}

func TestCheck(t *testing.T) {
	cases := []struct {
		name             string
		vis, timeout     time.Duration
		receives         int
		wantErrSubstring string
	}{
		{"defaults", QueueVisibility, ExecutorTimeout, MaxReceiveCount, ""},
		{"exactly six times", 6 * time.Minute, time.Minute, 5, ""},
		{"visibility below six times", 5 * time.Minute, time.Minute, 10, "less than 6 x the executor timeout"},
		{"timeout beyond Lambda", 12 * time.Hour, 16 * time.Minute, 10, "exceeds Lambda's 15 minutes"},
		{"visibility beyond SQS", 13 * time.Hour, time.Minute, 10, "exceeds SQS's 12 hours"},
		{"receives below AWS floor", time.Hour, time.Minute, 4, "below AWS's floor of 5"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := Check(c.vis, c.timeout, c.receives)
			switch {
			case c.wantErrSubstring == "" && err != nil:
				t.Fatalf("unexpected error: %v", err)
			case c.wantErrSubstring != "" && (err == nil || !strings.Contains(err.Error(), c.wantErrSubstring)):
				t.Fatalf("got %v, want an error containing %q", err, c.wantErrSubstring)
			}
		})
	}
}
