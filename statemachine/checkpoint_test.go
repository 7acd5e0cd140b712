package statemachine

import (
	"errors"
	"testing"
	"time"
)

// A checkpoint is the holder's, fenced by its token; a continuation also
// needs a checkpoint of the holder's own attempt and a continuation left.
func TestDecideCheckpointAndContinue(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
	claimed := TaskView{State: TaskClaimed, Attempt: 2, MaxAttempts: 3, Token: "tok", LeaseUntil: now.Add(time.Minute)}
	saved := claimed
	saved.CheckpointAttempt = 2
	earlier := claimed
	earlier.CheckpointAttempt = 1 // an earlier attempt's checkpoint is no progress of this one
	spent := saved
	spent.Continuations = MaxContinuations
	last := saved
	last.Attempt, last.CheckpointAttempt, last.MaxAttempts = 3, 3, 3
	holder := TaskInput{At: now, Token: "tok"}
	stale := TaskInput{At: now, Token: "old"}
	tests := []struct {
		name      string
		task      TaskView
		ev        Event
		in        TaskInput
		wantTo    TaskState
		wantGuard Guard
		wantBad   bool
	}{
		{name: "checkpoint by holder", task: claimed, ev: TaskCheckpoint, in: holder, wantTo: TaskClaimed},
		{name: "checkpoint by stale executor", task: claimed, ev: TaskCheckpoint, in: stale, wantGuard: GuardTokenMatches},
		{name: "checkpoint of a ready task", task: TaskView{State: TaskReady, Token: "tok"}, ev: TaskCheckpoint, in: holder, wantBad: true},
		{name: "checkpoint of a succeeded task", task: TaskView{State: TaskSucceeded, Token: "tok"}, ev: TaskCheckpoint, in: holder, wantBad: true},
		{name: "continue after a checkpoint", task: saved, ev: TaskContinue, in: holder, wantTo: TaskReady},
		{name: "continue on the last attempt", task: last, ev: TaskContinue, in: holder, wantTo: TaskReady},
		{name: "continue by stale executor", task: saved, ev: TaskContinue, in: stale, wantGuard: GuardTokenMatches},
		{name: "continue without a checkpoint", task: claimed, ev: TaskContinue, in: holder, wantGuard: GuardCheckpointed},
		{name: "continue on an earlier attempt's checkpoint", task: earlier, ev: TaskContinue, in: holder, wantGuard: GuardCheckpointed},
		{name: "continue past the cap", task: spent, ev: TaskContinue, in: holder, wantGuard: GuardContinuationsLeft},
		{name: "continue a ready task", task: TaskView{State: TaskReady, Token: "tok", CheckpointAttempt: 1, Attempt: 1}, ev: TaskContinue, in: holder, wantBad: true},
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
			case err != nil:
				t.Fatalf("want -> %s, got %v", tt.wantTo, err)
			case tr.To != tt.wantTo:
				t.Fatalf("want -> %s, got -> %s", tt.wantTo, tr.To)
			}
		})
	}
}
