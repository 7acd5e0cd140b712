package tuning

import (
	"strings"
	"testing"
	"time"

	"github.com/batchwork/batchwork/shared/spec"
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
	if ReceiveVisibility > Lease/6 || ReceiveVisibility < time.Second {
		t.Fatalf("receive visibility %v: want seconds, far under the lease %v", ReceiveVisibility, Lease)
	}
	// A dead executor's long polls (which SQS goes on serving) end before
	// its held messages come back, with a second to spare for the poll's
	// own rounding, so they do not steal its messages.
	if UnclaimedVisibility <= ExecutorBeat || UnclaimedVisibility > HeldVisibility {
		t.Fatalf("unclaimed visibility %v: want more than a beat (%v), at most the held visibility %v", UnclaimedVisibility, ExecutorBeat, HeldVisibility)
	}
	if ReceiveWait+time.Second > HeldVisibility {
		t.Fatalf("receive wait %v: a dead executor's polls outlast its held messages' visibility %v", ReceiveWait, HeldVisibility)
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

// One task at both caps fits in the Lambda executor, in the worst case:
// its whole split read into memory, and its outputs at the cap while a
// buffer grows (a growing buffer is copied into one twice its size, so
// for a moment the old one is live beside the copy: up to twice the cap),
// beside the Go runtime and the SDK clients. That is 832 MiB of the 921
// MiB soft limit. The executor sets the Go runtime's soft memory limit
// (SoftMemoryLimit), so the collector keeps the heap near these live bytes
// instead of letting it grow to twice them first.
func TestOneTaskAtTheCapsFits(t *testing.T) {
	soft := SoftMemoryLimit(ExecutorMemoryMB)
	const runtime = 64 << 20 // an allowance for the Go runtime, the SDK clients and the job caches
	live := int64(spec.MaxSplitSize) + 2*MaxTaskOutput + runtime
	if live > soft {
		t.Fatalf("one task at the caps needs %d MiB, more than the executor's %d MiB soft limit", live>>20, soft>>20)
	}
	if soft >= ExecutorMemoryMB<<20 {
		t.Fatalf("soft limit %d MiB is not under the function's %d MiB", soft>>20, ExecutorMemoryMB)
	}
}
