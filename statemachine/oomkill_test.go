package statemachine

import (
	"errors"
	"testing"
	"time"
)

func TestLostForMemoryGuards(t *testing.T) {
	t.Parallel()
	now := time.Now()
	claimed := TaskView{State: TaskClaimed, Attempt: 1, MaxAttempts: 3, Token: "a", LeaseUntil: now.Add(time.Minute)}
	dead, alive, last, copied := claimed, claimed, claimed, claimed
	dead.HolderAlive = now.Add(-LivenessSkew - time.Millisecond)
	alive.HolderAlive = now.Add(time.Second)
	last.HolderAlive, last.Attempt = dead.HolderAlive, 3
	copied.HolderAlive = dead.HolderAlive
	copied.Copy = CopyView{Requested: true, Started: true, Token: "c", LeaseUntil: now.Add(time.Minute)}
	ready := TaskView{State: TaskReady, Attempt: 1, MaxAttempts: 3}
	for _, tc := range []struct {
		name  string
		view  TaskView
		guard Guard // "" when allowed
		state bool  // refused by state
	}{
		{"dead holder with attempts left", dead, "", false},
		{"live holder", alive, GuardHolderDead, false},
		{"last attempt", last, GuardAttemptsLeft, false},
		{"live copy", copied, GuardNoCopy, false},
		{"not claimed", ready, "", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tr, err := Decide(tc.view, TaskLostForMemory, TaskInput{At: now})
			var ge *GuardError
			switch {
			case tc.state:
				if !errors.Is(err, ErrInvalidTransition) || errors.As(err, &ge) {
					t.Fatalf("err %v, want refused by state", err)
				}
			case tc.guard == "":
				if err != nil || tr.To != TaskReady {
					t.Fatalf("got %+v, %v; want READY", tr, err)
				}
			default:
				if !errors.As(err, &ge) || ge.Guard != tc.guard {
					t.Fatalf("err %v, want guard %q", err, tc.guard)
				}
			}
		})
	}
}
