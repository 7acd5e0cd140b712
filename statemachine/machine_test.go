package statemachine

import (
	"errors"
	"flag"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

var update = flag.Bool("update", false, "rewrite docs/lifecycles.md")

// checkExhaustive walks every (state, event) pair: it must be either one
// listed transition or rejected with ErrInvalidTransition, and terminal
// states must reject everything.
func checkExhaustive[S ~string](t *testing.T, m Machine[S], want map[S]map[Event]S) {
	t.Helper()
	for _, s := range m.States {
		for _, ev := range m.Events() {
			tr, err := m.Lookup(s, ev)
			to, allowed := want[s][ev]
			switch {
			case allowed && err != nil:
				t.Errorf("%s %s on %s: want -> %s, got %v", m.Name, s, ev, to, err)
			case allowed && tr.To != to:
				t.Errorf("%s %s on %s: want -> %s, got -> %s", m.Name, s, ev, to, tr.To)
			case !allowed && !errors.Is(err, ErrInvalidTransition):
				t.Errorf("%s %s on %s: want rejected, got -> %s (err %v)", m.Name, s, ev, tr.To, err)
			}
		}
		for ev := range want[s] {
			if m.IsTerminal(s) && !IsRedrive(ev) {
				t.Errorf("%s %s is terminal but the expected table leaves it on %s", m.Name, s, ev)
			}
		}
	}
}

func TestExhaustive(t *testing.T) {
	t.Parallel()
	t.Run("task", func(t *testing.T) {
		checkExhaustive(t, Tasks, map[TaskState]map[Event]TaskState{
			TaskReady:     {TaskClaim: TaskClaimed, TaskCancel: TaskCancelled, TaskRedrive: TaskReady, TaskOwnerCancel: TaskFailed},
			TaskFailed:    {TaskRedrive: TaskReady},
			TaskCancelled: {TaskRedrive: TaskReady},
			TaskClaimed: {
				TaskReclaim: TaskClaimed, TaskHeartbeat: TaskClaimed, TaskCommit: TaskSucceeded,
				TaskRetry: TaskReady, TaskFail: TaskFailed, TaskExpire: TaskReady,
				TaskExhaust: TaskFailed, TaskCancel: TaskCancelled,
				TaskTakeover: TaskClaimed, TaskFailPermanent: TaskFailed,
				TaskSpeculate: TaskClaimed, TaskClaimCopy: TaskClaimed, TaskCopyHeartbeat: TaskClaimed,
				TaskYield: TaskClaimed, TaskCopyFail: TaskClaimed, TaskCopyExpire: TaskClaimed,
				TaskCheckpoint: TaskClaimed, TaskContinue: TaskReady,
				TaskSplit: TaskClaimed, TaskLostForMemory: TaskReady,
				TaskOwnerCancel: TaskFailed,
			},
		})
	})
	t.Run("stage", func(t *testing.T) {
		checkExhaustive(t, Stages, map[StageState]map[Event]StageState{
			StageBlocked:   {StageStart: StageRunning, StageCancel: StageCancelled},
			StageRunning:   {StageComplete: StageCompleted, StageFail: StageFailed, StageCancel: StageCancelled, StageTolerate: StageRunning},
			StageFailed:    {StageRedrive: StageRunning},
			StageCancelled: {StageRedrive: StageRunning, StageRedriveBlocked: StageBlocked},
		})
	})
	t.Run("job", func(t *testing.T) {
		checkExhaustive(t, Jobs, map[JobState]map[Event]JobState{
			JobRunning:    {JobSucceed: JobSucceeded, JobFail: JobFailed, JobCancel: JobCancelled, JobPublish: JobPublishing},
			JobPublishing: {JobPublished: JobSucceeded, JobPublishFail: JobFailed},
			JobFailed:     {JobRedrive: JobRunning},
			JobWaiting:    {JobStart: JobRunning, JobCancel: JobCancelled},
		})
	})
}

// A store builds one conditional write per event, so each event must have a
// single transition row and every state must be listed.
func TestTablesWellFormed(t *testing.T) {
	t.Parallel()
	check := func(name string, events []Event, rows func(Event) int) {
		for _, ev := range events {
			if n := rows(ev); n != 1 {
				t.Errorf("%s event %s has %d transition rows, want 1", name, ev, n)
			}
		}
	}
	count := func(evs []Event) func(Event) int {
		return func(ev Event) int {
			n := 0
			for _, e := range evs {
				if e == ev {
					n++
				}
			}
			return n
		}
	}
	var te, se, je []Event
	for _, tr := range Tasks.Transitions {
		te = append(te, tr.Event)
		for _, f := range tr.From {
			if !slices.Contains(Tasks.States, f) {
				t.Errorf("task state %s not listed", f)
			}
		}
	}
	for _, tr := range Stages.Transitions {
		se = append(se, tr.Event)
	}
	for _, tr := range Jobs.Transitions {
		je = append(je, tr.Event)
	}
	check("task", Tasks.Events(), count(te))
	check("stage", Stages.Events(), count(se))
	check("job", Jobs.Events(), count(je))
}

func TestDecide(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)
	claimed := TaskView{State: TaskClaimed, Attempt: 1, MaxAttempts: 3, Token: "tok", LeaseUntil: now.Add(time.Minute)}
	expired := claimed
	expired.LeaseUntil = now.Add(-LeaseSkew - time.Millisecond)
	justPast := claimed
	justPast.LeaseUntil = now.Add(-LeaseSkew) // within the skew margin
	aliveHolder, deadHolder, skewHolder := claimed, claimed, claimed
	aliveHolder.HolderAlive = now.Add(time.Second)
	deadHolder.HolderAlive = now.Add(-LivenessSkew - time.Millisecond)
	skewHolder.HolderAlive = now.Add(-LivenessSkew)
	lastDeadHolder := deadHolder
	lastDeadHolder.Attempt = 3
	lastExpired := expired
	lastExpired.Attempt = 3
	tests := []struct {
		name      string
		task      TaskView
		ev        Event
		in        TaskInput
		wantTo    TaskState
		wantGuard Guard // set when a guard must refuse
		wantBad   bool  // state refuses the event
	}{
		{name: "claim ready", task: TaskView{State: TaskReady, MaxAttempts: 3}, ev: TaskClaim, in: TaskInput{At: now}, wantTo: TaskClaimed},
		{name: "claim during backoff", task: TaskView{State: TaskReady, MaxAttempts: 3, NotBefore: now.Add(time.Second)}, ev: TaskClaim, in: TaskInput{At: now}, wantGuard: GuardDue},
		{name: "duplicate delivery of live claim", task: claimed, ev: TaskReclaim, in: TaskInput{At: now}, wantGuard: GuardLeaseExpired},
		{name: "reclaim expired", task: expired, ev: TaskReclaim, in: TaskInput{At: now}, wantTo: TaskClaimed},
		{name: "take over from a live executor", task: aliveHolder, ev: TaskTakeover, in: TaskInput{At: now}, wantGuard: GuardHolderDead},
		{name: "take over from a dead executor", task: deadHolder, ev: TaskTakeover, in: TaskInput{At: now}, wantTo: TaskClaimed},
		{name: "take over within the skew margin", task: skewHolder, ev: TaskTakeover, in: TaskInput{At: now}, wantGuard: GuardHolderDead},
		{name: "take over from an executor without a record", task: claimed, ev: TaskTakeover, in: TaskInput{At: now}, wantTo: TaskClaimed},
		{name: "no takeover of a last attempt", task: lastDeadHolder, ev: TaskTakeover, in: TaskInput{At: now}, wantGuard: GuardAttemptsLeft},
		{name: "reclaim within the skew margin", task: justPast, ev: TaskReclaim, in: TaskInput{At: now}, wantGuard: GuardLeaseExpired},
		{name: "expire within the skew margin", task: justPast, ev: TaskExpire, in: TaskInput{At: now}, wantGuard: GuardLeaseExpired},
		{name: "reclaim exhausted", task: lastExpired, ev: TaskReclaim, in: TaskInput{At: now}, wantGuard: GuardAttemptsLeft},
		{name: "exhaust", task: lastExpired, ev: TaskExhaust, in: TaskInput{At: now}, wantTo: TaskFailed},
		{name: "commit by holder", task: claimed, ev: TaskCommit, in: TaskInput{At: now, Token: "tok"}, wantTo: TaskSucceeded},
		{name: "commit by stale executor", task: claimed, ev: TaskCommit, in: TaskInput{At: now, Token: "old"}, wantGuard: GuardAnyTokenMatches},
		{name: "commit with empty token", task: TaskView{State: TaskClaimed}, ev: TaskCommit, in: TaskInput{At: now}, wantGuard: GuardAnyTokenMatches},
		{name: "commit twice", task: TaskView{State: TaskSucceeded, Token: "tok"}, ev: TaskCommit, in: TaskInput{At: now, Token: "tok"}, wantBad: true},
		{name: "retry with attempts left", task: claimed, ev: TaskRetry, in: TaskInput{At: now, Token: "tok"}, wantTo: TaskReady},
		{name: "fail before last attempt", task: claimed, ev: TaskFail, in: TaskInput{At: now, Token: "tok"}, wantGuard: GuardNoAttemptsLeft},
		{name: "permanent failure with attempts left", task: claimed, ev: TaskFailPermanent, in: TaskInput{At: now, Token: "tok"}, wantTo: TaskFailed},
		{name: "permanent failure on the last attempt", task: lastExpired, ev: TaskFailPermanent, in: TaskInput{At: now, Token: "tok"}, wantTo: TaskFailed},
		{name: "permanent failure by stale executor", task: claimed, ev: TaskFailPermanent, in: TaskInput{At: now, Token: "old"}, wantGuard: GuardTokenMatches},
		{name: "permanent failure of a ready task", task: TaskView{State: TaskReady, Token: "tok"}, ev: TaskFailPermanent, in: TaskInput{At: now, Token: "tok"}, wantBad: true},
		{name: "cancel ready", task: TaskView{State: TaskReady}, ev: TaskCancel, in: TaskInput{At: now}, wantTo: TaskCancelled},
		{name: "cancel succeeded", task: TaskView{State: TaskSucceeded}, ev: TaskCancel, in: TaskInput{At: now}, wantBad: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			tr, err := Decide(tt.task, tt.ev, tt.in)
			var ge *GuardError
			switch {
			case tt.wantBad:
				if !errors.Is(err, ErrInvalidTransition) || errors.As(err, &ge) {
					t.Fatalf("want state refusal, got %v", err)
				}
			case tt.wantGuard != "":
				if !errors.As(err, &ge) || ge.Guard != tt.wantGuard {
					t.Fatalf("want guard %q to refuse, got %v", tt.wantGuard, err)
				}
				if !errors.Is(err, ErrInvalidTransition) {
					t.Fatalf("guard error must wrap ErrInvalidTransition")
				}
			default:
				if err != nil {
					t.Fatalf("Decide: %v", err)
				}
				if tr.To != tt.wantTo {
					t.Fatalf("to = %s, want %s", tr.To, tt.wantTo)
				}
			}
		})
	}
}

func TestDiagramUpToDate(t *testing.T) {
	t.Parallel()
	const path = "../docs/lifecycles.md"
	got := Markdown()
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("read %s (run make docs): %v", path, err)
	}
	if diff := cmp.Diff(string(want), got); diff != "" {
		t.Errorf("%s is stale; run make docs (-file +tables):\n%s", path, diff)
	}
}

// A stage tolerates failed tasks strictly below its allowance: with an
// allowance of 2 the third failure is refused, and a stage without one
// (allowance 0) tolerates none.
func TestTolerates(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		failed, allowed int
		want            bool
	}{
		{0, 0, false}, {0, 1, true}, {1, 2, true}, {2, 2, false}, {3, 2, false},
	} {
		if got := Tolerates(c.failed, c.allowed); got != c.want {
			t.Errorf("Tolerates(%d, %d) = %v, want %v", c.failed, c.allowed, got, c.want)
		}
	}
	tr := Stages.Transition(StageTolerate)
	if tr.To != StageRunning || !slices.Contains(tr.Guards, GuardFailuresTolerated) {
		t.Errorf("tolerate: %+v, want RUNNING -> RUNNING guarded by %q", tr, GuardFailuresTolerated)
	}
}

// A redrive reopens what did not finish and nothing else: a committed
// task, a completed stage, a succeeded or cancelled job and a failure its
// stage tolerated stay as they are.
func TestRedrive(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name string
		task TaskView
		want bool
	}{
		{"failed", TaskView{State: TaskFailed, Attempt: 3, MaxAttempts: 3}, true},
		{"cancelled", TaskView{State: TaskCancelled, Attempt: 1, MaxAttempts: 3}, true},
		{"never ran", TaskView{State: TaskReady}, true},
		{"tolerated failure", TaskView{State: TaskFailed, Attempt: 3, MaxAttempts: 3, Tolerated: true}, false},
		{"committed", TaskView{State: TaskSucceeded, Attempt: 1, MaxAttempts: 3}, false},
		{"running", TaskView{State: TaskClaimed, Attempt: 1, MaxAttempts: 3}, false},
	} {
		_, err := Decide(c.task, TaskRedrive, TaskInput{At: time.Now()})
		if got := err == nil; got != c.want {
			t.Errorf("redrive %s task: allowed %v (%v), want %v", c.name, got, err, c.want)
		}
	}
	for _, s := range []StageState{StageBlocked, StageRunning, StageCompleted} {
		if _, err := Stages.Lookup(s, StageRedrive); err == nil {
			t.Errorf("a %s stage can be redriven", s)
		}
	}
	for _, s := range []JobState{JobRunning, JobPublishing, JobSucceeded, JobCancelled} {
		if _, err := Jobs.Lookup(s, JobRedrive); err == nil {
			t.Errorf("a %s job can be redriven", s)
		}
	}
	if !IsRedrive(StageRedriveBlocked) || IsRedrive(TaskCancel) {
		t.Error("IsRedrive")
	}
}
