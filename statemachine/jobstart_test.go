package statemachine

import (
	"errors"
	"testing"
)

// A WAITING job starts once: a second start (a duplicate timer message,
// the sweep racing it) finds it RUNNING and is refused, as is the start of
// a job cancelled while it waited.
func TestJobStartOnce(t *testing.T) {
	t.Parallel()
	if Jobs.IsTerminal(JobWaiting) || !Jobs.IsTerminal(JobCancelled) {
		t.Fatal("WAITING must not be terminal")
	}
	tr, err := Jobs.Lookup(JobWaiting, JobStart)
	if err != nil || tr.To != JobRunning {
		t.Fatalf("start a WAITING job: %v, %v; want -> RUNNING", tr, err)
	}
	for _, s := range []JobState{JobRunning, JobCancelled, JobPublishing, JobSucceeded, JobFailed} {
		if _, err := Jobs.Lookup(s, JobStart); !errors.Is(err, ErrInvalidTransition) {
			t.Errorf("start a %s job: %v; want refused", s, err)
		}
	}
	if tr, err := Jobs.Lookup(JobWaiting, JobCancel); err != nil || tr.To != JobCancelled {
		t.Errorf("cancel a WAITING job: %v, %v; want -> CANCELLED", tr, err)
	}
	for _, ev := range []Event{JobSucceed, JobFail, JobPublish, JobRedrive} {
		if _, err := Jobs.Lookup(JobWaiting, ev); err == nil {
			t.Errorf("a WAITING job takes %s", ev)
		}
	}
}
