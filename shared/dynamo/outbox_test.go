package dynamo

import (
	"testing"
	"time"

	"github.com/batchwork/batchwork/shared/domain"
	"github.com/batchwork/batchwork/shared/events"
	"github.com/batchwork/batchwork/shared/spec"
	sm "github.com/batchwork/batchwork/statemachine"
)

func TestOutboxKeysAreInTheSweepIndex(t *testing.T) {
	s := New(nil, "t")
	at := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
	ev := events.New(events.EndedID("j1"), events.JobFailed, at, events.Detail{Owner: "o", JobID: "j1"})
	put, err := s.outboxPut(ev)
	if err != nil {
		t.Fatal(err)
	}
	it := put.Put.Item
	pk, sk := getS(it, attrPK), getS(it, attrSK)
	if pk != "OBX#j1.ended" || sk != outboxSK {
		t.Errorf("key %s/%s", pk, sk)
	}
	if got := getT(it, attrDue); !got.Equal(at.Add(OutboxGrace)) || getS(it, attrGPK) != duePK(pk+sk) {
		t.Errorf("due %v in %s, want %v in %s", got, getS(it, attrGPK), at.Add(OutboxGrace), duePK(pk+sk))
	}
	d, err := parseDueKey(pk, sk)
	if err != nil || d.Kind != DueEvent || d.Event != "j1.ended" {
		t.Fatalf("parseDueKey: %+v, %v", d, err)
	}
	if p, k := dueItemKey(d); p != pk || k != sk {
		t.Errorf("dueItemKey %s/%s, want %s/%s", p, k, pk, sk)
	}
}

func TestJobEvents(t *testing.T) {
	at := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
	sp := &spec.Job{Name: "n", Stages: []spec.Stage{{Name: "a"}, {Name: "b"}}}
	sub := SubmittedEvent(domain.Job{ID: "j1", Owner: "o", Spec: sp, Created: at})
	if sub.ID != "j1.submitted" || sub.DetailType != events.JobSubmitted || sub.Detail.Counts.Stages != 2 || sub.Detail.State != "RUNNING" || sub.Detail.EventID != sub.ID {
		t.Errorf("submitted %+v", sub)
	}
	stages := []domain.Stage{{State: sm.StageCompleted, Total: 3}, {State: sm.StageCancelled, Total: 2}}
	for _, c := range []struct {
		to   sm.JobState
		typ  string
		want events.Counts
	}{
		{sm.JobSucceeded, events.JobSucceeded, events.Counts{Stages: 2, StagesCompleted: 1, Tasks: 5, TasksCommitted: 3}},
		{sm.JobFailed, events.JobFailed, events.Counts{Stages: 2, StagesCompleted: 1, Tasks: 5, TasksCommitted: 3}},
		{sm.JobCancelled, events.JobCancelled, events.Counts{Stages: 2, StagesCompleted: 1, Tasks: 5, TasksCommitted: 3}},
	} {
		ev := JobEndedEvent("j1", "o", "n", c.to, "why", "", stages, at)
		if ev.ID != "j1.ended" || ev.DetailType != c.typ || *ev.Detail.Counts != c.want || ev.Detail.Error != "why" || ev.Detail.State != string(c.to) {
			t.Errorf("%s: %+v (%+v)", c.to, ev, *ev.Detail.Counts)
		}
	}
	// A job that succeeded with failed partitions (toleratedFailures) says
	// so: they are not committed tasks.
	tolerant := []domain.Stage{{State: sm.StageCompleted, Total: 10, Tolerated: 2}, {State: sm.StageCompleted, Total: 4}}
	ev := JobEndedEvent("j1", "o", "n", sm.JobSucceeded, "", "m", tolerant, at)
	if want := (events.Counts{Stages: 2, StagesCompleted: 2, Tasks: 14, TasksCommitted: 12, TasksFailed: 2}); *ev.Detail.Counts != want {
		t.Errorf("succeeded with failed partitions: counts %+v, want %+v", *ev.Detail.Counts, want)
	}
}
