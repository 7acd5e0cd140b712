package statemachine

import (
	"errors"
	"testing"
	"time"
)

// Only the holder of a running task that was never copied may split it.
func TestDecideSplit(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
	claimed := TaskView{State: TaskClaimed, Attempt: 1, MaxAttempts: 3, Token: "tok", LeaseUntil: now.Add(time.Minute)}
	copied := claimed
	copied.Copy = CopyView{Requested: true}
	holder, stale := TaskInput{At: now, Token: "tok"}, TaskInput{At: now, Token: "old"}
	tests := []struct {
		name      string
		task      TaskView
		in        TaskInput
		wantGuard Guard
		wantBad   bool
	}{
		{name: "the holder splits", task: claimed, in: holder},
		{name: "a stale executor does not", task: claimed, in: stale, wantGuard: GuardTokenMatches},
		{name: "a task with a copy does not", task: copied, in: holder, wantGuard: GuardCopyUnrequested},
		{name: "a ready task does not", task: TaskView{State: TaskReady, Token: "tok"}, in: holder, wantBad: true},
		{name: "a succeeded task does not", task: TaskView{State: TaskSucceeded, Token: "tok"}, in: holder, wantBad: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tr, err := Decide(tt.task, TaskSplit, tt.in)
			var ge *GuardError
			switch {
			case tt.wantGuard != "":
				if !errors.As(err, &ge) || ge.Guard != tt.wantGuard {
					t.Fatalf("Decide = %v, want guard %q refused", err, tt.wantGuard)
				}
			case tt.wantBad:
				if !errors.Is(err, ErrInvalidTransition) || errors.As(err, &ge) {
					t.Fatalf("Decide = %v, want no such transition", err)
				}
			case err != nil || tr.To != TaskClaimed:
				t.Fatalf("Decide = %v, %v; want CLAIMED", tr.To, err)
			}
		})
	}
}
