package control

import (
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/batchwork/batchwork/shared/control/kernel"
	"github.com/batchwork/batchwork/shared/domain"
	"github.com/batchwork/batchwork/shared/spec"
	sm "github.com/batchwork/batchwork/statemachine"
)

// fakeMetrics records what the control plane reports, by priority.
type fakeMetrics struct {
	mu                                  sync.Mutex
	claimed, committed, retried, failed map[spec.Priority]int
	durations                           []time.Duration
	commits                             int
	jobsFailed                          int
	repairs                             map[Repair]int
}

func newFakeMetrics() *fakeMetrics {
	return &fakeMetrics{claimed: map[spec.Priority]int{}, committed: map[spec.Priority]int{},
		retried: map[spec.Priority]int{}, failed: map[spec.Priority]int{}, repairs: map[Repair]int{}}
}

func (f *fakeMetrics) TaskClaimed(p spec.Priority) { f.mu.Lock(); f.claimed[p]++; f.mu.Unlock() }
func (f *fakeMetrics) TaskCommitted(p spec.Priority, d, c time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.committed[p]++
	f.durations = append(f.durations, d)
	if c >= 0 {
		f.commits++
	}
}
func (f *fakeMetrics) TaskRetried(p spec.Priority) { f.mu.Lock(); f.retried[p]++; f.mu.Unlock() }
func (f *fakeMetrics) TaskFailed(p spec.Priority)  { f.mu.Lock(); f.failed[p]++; f.mu.Unlock() }
func (f *fakeMetrics) JobFailed()                  { f.mu.Lock(); f.jobsFailed++; f.mu.Unlock() }
func (f *fakeMetrics) Repaired(k Repair, n int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if n > 0 {
		f.repairs[k] += n
	}
}

// A claim, a commit, a retry and a failure for good are each counted once,
// under the stage's priority, and the failed job once.
func TestMetricsOfClaimCommitRetryFail(t *testing.T) {
	r := newUnitRig(t)
	m := newFakeMetrics()
	r.svc.Metrics = m
	job := r.submit(oneStage(2, 2, `,"priority":"low"`))
	low := spec.PriorityLow

	c := r.claim(taskRef(job, 0, 0))
	r.clock.Advance(3 * time.Second)
	r.commit(c, 1)

	ref := taskRef(job, 0, 1)
	d, err := r.svc.Fail(r.ctx, r.claim(ref), FailParams{Cause: "boom"})
	if err != nil || !d.Retry {
		t.Fatalf("first failure: %+v, %v; want a retry", d, err)
	}
	r.clock.Advance(d.Delay)
	if d, err := r.svc.Fail(r.ctx, r.claim(ref), FailParams{Cause: "boom again"}); err != nil || d.Retry {
		t.Fatalf("last failure: %+v, %v; want no retry", d, err)
	}
	r.wantState(ref, sm.TaskFailed, sm.StageFailed, sm.JobFailed)

	for name, got := range map[string]map[spec.Priority]int{"claimed": m.claimed, "committed": m.committed, "retried": m.retried, "failed": m.failed} {
		want := map[string]map[spec.Priority]int{
			"claimed": {low: 3}, "committed": {low: 1}, "retried": {low: 1}, "failed": {low: 1},
		}[name]
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("%s (-want +got):\n%s", name, diff)
		}
	}
	if diff := cmp.Diff([]time.Duration{3 * time.Second}, m.durations); diff != "" {
		t.Errorf("task durations (-want +got):\n%s", diff)
	}
	if m.commits != 1 || m.jobsFailed != 1 {
		t.Errorf("commit latencies %d, jobs failed %d; want 1 and 1", m.commits, m.jobsFailed)
	}
}

// An expired last attempt fails its task (and job) for good: counted.
func TestMetricsOfExhaustedTask(t *testing.T) {
	r := newUnitRig(t)
	m := newFakeMetrics()
	r.svc.Metrics = m
	job := r.submit(oneStage(1, 1, ""))
	ref := taskRef(job, 0, 0)
	r.claim(ref)
	r.clock.Advance(unitLease + sm.LeaseSkew + time.Millisecond)
	if _, err := r.svc.Claim(r.ctx, ref); err == nil {
		t.Fatal("claim of an expired last attempt succeeded")
	}
	if m.failed[spec.PriorityNormal] != 1 || m.jobsFailed != 1 || m.claimed[spec.PriorityNormal] != 1 {
		t.Errorf("claimed %v, failed %v, jobs failed %d; want 1 normal claim, 1 normal failure, 1 job", m.claimed, m.failed, m.jobsFailed)
	}
}

// The sweep's repairs are reported by kind, matching its counts.
func TestMetricsOfSweepRepairs(t *testing.T) {
	r := newUnitRig(t)
	m := newFakeMetrics()
	r.svc.Metrics = m
	job := r.submit(oneStage(2, 3, ""))
	// Task 0's executor dies; task 1's message is lost.
	r.claim(taskRef(job, 0, 0))
	r.clock.Advance(unitTimings.StuckAfter + time.Second)
	var total SweepCounts
	for range 3 {
		total.Add(r.sweep())
		r.clock.Advance(time.Second)
	}
	if total.Expired == 0 || total.Requeued == 0 {
		t.Fatalf("sweep counts %+v: want an expired lease and a resend", total)
	}
	want := map[Repair]int{RepairExpiredLease: total.Expired + total.Exhausted, RepairLostMessage: total.Requeued}
	if total.StagesFixed > 0 {
		want[RepairInterruptedStep] = total.StagesFixed
	}
	if diff := cmp.Diff(want, m.repairs); diff != "" {
		t.Errorf("repairs (-want +got):\n%s", diff)
	}
}

// A resend of a retry still in its backoff is a backoff repair; any
// other, a lost message.
func TestResentKind(t *testing.T) {
	now := time.Unix(1000, 0)
	for _, tc := range []struct {
		task domain.Task
		want Repair
	}{
		{domain.Task{Attempt: 1}, RepairLostMessage},
		{domain.Task{Attempt: 2, NotBefore: now.Add(time.Minute)}, RepairBackoffDue},
		{domain.Task{Attempt: 2, NotBefore: now.Add(-time.Second)}, RepairLostMessage},
		{domain.Task{Attempt: 2, NotBefore: now.Add(-time.Hour)}, RepairLostMessage},
	} {
		if got := kernel.Resent(tc.task, now); got != tc.want {
			t.Errorf("resent(%+v) = %s, want %s", tc.task, got, tc.want)
		}
	}
}

// Without metrics (nil), nothing changes: the service records nothing
// and does not read a spec for it.
func TestNoMetricsByDefault(t *testing.T) {
	r := newUnitRig(t)
	if r.svc.Metrics != nil {
		t.Fatal("a new service has metrics")
	}
	r.svc.Meter().TaskClaimed(spec.PriorityNormal) // the no-op: no panic on a nil Metrics
}
