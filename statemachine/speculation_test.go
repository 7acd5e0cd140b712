package statemachine

import (
	"errors"
	"testing"
	"time"
)

// The rules of a task with a speculative copy: either live token commits;
// a failure of one claim drops that claim and never retries or fails the
// task while the other lives; nothing replaces a claim wholesale while a
// copy lives; a task is copied once.
func TestSpeculationRules(t *testing.T) {
	t.Parallel()
	now := time.Now()
	live, expired := now.Add(time.Minute), now.Add(-LeaseSkew-time.Second)
	holder := TaskView{State: TaskClaimed, Attempt: 1, MaxAttempts: 3, Token: "h", LeaseUntil: live}
	requested := holder
	requested.Copy = CopyView{Requested: true}
	twin := holder
	twin.Attempt = 2
	twin.MaxAttempts = 4
	twin.Copy = CopyView{Requested: true, Started: true, Token: "c", LeaseUntil: live}
	twinExpired := twin
	twinExpired.LeaseUntil = expired
	deadCopy := twin
	deadCopy.Copy.LeaseUntil = expired
	lastTwin := twin
	lastTwin.Attempt, lastTwin.MaxAttempts = 4, 4
	dropped := holder // a copy ran and was dropped: never copied again
	dropped.Copy = CopyView{Requested: true, Started: true}

	by := func(tok string) TaskInput { return TaskInput{At: now, Token: tok} }
	cases := []struct {
		name      string
		task      TaskView
		ev        Event
		in        TaskInput
		wantTo    TaskState
		wantGuard Guard
	}{
		{"speculate a running task", holder, TaskSpeculate, by(""), TaskClaimed, ""},
		{"speculate twice", requested, TaskSpeculate, by(""), "", GuardCopyUnrequested},
		{"speculate after a dropped copy", dropped, TaskSpeculate, by(""), "", GuardCopyUnrequested},
		{"claim the requested copy", requested, TaskClaimCopy, by(""), TaskClaimed, ""},
		{"claim an unrequested copy", holder, TaskClaimCopy, by(""), "", GuardCopyRequested},
		{"claim a copy twice", twin, TaskClaimCopy, by(""), "", GuardCopyRequested},
		{"holder commits", twin, TaskCommit, by("h"), TaskSucceeded, ""},
		{"copy commits", twin, TaskCommit, by("c"), TaskSucceeded, ""},
		{"stale commits", twin, TaskCommit, by("x"), "", GuardAnyTokenMatches},
		{"copy commits after it was dropped", dropped, TaskCommit, by("c"), "", GuardAnyTokenMatches},
		{"holder heartbeats", twin, TaskHeartbeat, by("h"), TaskClaimed, ""},
		{"copy heartbeats as holder", twin, TaskHeartbeat, by("c"), "", GuardTokenMatches},
		{"copy heartbeats", twin, TaskCopyHeartbeat, by("c"), TaskClaimed, ""},
		{"holder heartbeats as copy", twin, TaskCopyHeartbeat, by("h"), "", GuardCopyTokenMatches},
		{"holder retries beside its copy", twin, TaskRetry, by("h"), "", GuardNoCopy},
		{"holder fails beside its copy", lastTwin, TaskFail, by("h"), "", GuardNoCopy},
		{"holder fails permanently beside its copy", twin, TaskFailPermanent, by("h"), "", GuardNoCopy},
		{"holder yields to its copy", twin, TaskYield, by("h"), TaskClaimed, ""},
		{"holder yields without a copy", holder, TaskYield, by("h"), "", GuardHasCopy},
		{"copy yields", twin, TaskYield, by("c"), "", GuardTokenMatches},
		{"copy fails", twin, TaskCopyFail, by("c"), TaskClaimed, ""},
		{"holder fails as copy", twin, TaskCopyFail, by("h"), "", GuardCopyTokenMatches},
		{"holder's lease expires beside its copy", twinExpired, TaskExpire, by(""), "", GuardNoCopy},
		{"holder's lease reclaimed beside its copy", twinExpired, TaskReclaim, by(""), "", GuardNoCopy},
		{"last holder exhausted beside its copy", lastTwin, TaskExhaust, TaskInput{At: live.Add(time.Hour)}, "", GuardNoCopy},
		{"holder taken over beside its copy", twin, TaskTakeover, TaskInput{At: now}, "", GuardNoCopy},
		{"dead copy dropped", deadCopy, TaskCopyExpire, by(""), TaskClaimed, ""},
		{"live copy kept", twin, TaskCopyExpire, by(""), "", GuardCopyLeaseExpired},
		{"no copy to drop", holder, TaskCopyExpire, by(""), "", GuardHasCopy},
		{"cancel with a copy", twin, TaskCancel, by(""), TaskCancelled, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			tr, err := Decide(c.task, c.ev, c.in)
			if c.wantGuard != "" {
				var ge *GuardError
				if !errors.As(err, &ge) || ge.Guard != c.wantGuard {
					t.Fatalf("Decide = %v, want guard %q refusing", err, c.wantGuard)
				}
				return
			}
			if err != nil || tr.To != c.wantTo {
				t.Fatalf("Decide = %v, %v; want -> %s", tr.To, err, c.wantTo)
			}
		})
	}
}

func TestIsStraggler(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		ran, median time.Duration
		mult        float64
		want        bool
	}{
		{10 * time.Second, 0, 1.5, false},
		{15 * time.Second, 10 * time.Second, 1.5, false},
		{16 * time.Second, 10 * time.Second, 1.5, true},
		{21 * time.Second, 10 * time.Second, 2, true},
	} {
		if got := IsStraggler(c.ran, c.median, c.mult); got != c.want {
			t.Errorf("IsStraggler(%v, %v, %v) = %v, want %v", c.ran, c.median, c.mult, got, c.want)
		}
	}
}
