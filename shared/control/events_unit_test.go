package control

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge"
	ebtypes "github.com/aws/aws-sdk-go-v2/service/eventbridge/types"

	"github.com/batchwork/batchwork/internal/testdouble"
	"github.com/batchwork/batchwork/shared/control/operations"
	"github.com/batchwork/batchwork/shared/domain"
	"github.com/batchwork/batchwork/shared/dynamo"
	"github.com/batchwork/batchwork/shared/events"
	sm "github.com/batchwork/batchwork/statemachine"
)

// outboxStore is the in-memory store with the event outbox of shared/dynamo:
// each transition that has an event writes it when (and only when) the
// transition applies, as the store's transactions do; the sweep's index
// lists it from dynamo.OutboxGrace on.
type outboxStore struct {
	*testdouble.Store
	mu      sync.Mutex
	pending map[string]events.Event
	written []string
}

func newOutboxStore(f *testdouble.Store) *outboxStore {
	return &outboxStore{Store: f, pending: map[string]events.Event{}}
}

func (s *outboxStore) write(ev events.Event) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.pending[ev.ID] = ev
	s.written = append(s.written, ev.ID)
}

func (s *outboxStore) JobCreate(ctx context.Context, p dynamo.CreateJobParams) (string, bool, error) {
	id, created, err := s.Store.JobCreate(ctx, p)
	if err == nil && created {
		j := p.Job
		j.StartAt = p.StartAt
		s.write(dynamo.SubmittedEvent(j))
	}
	return id, created, err
}

func (s *outboxStore) JobStart(ctx context.Context, p dynamo.JobStartParams) error {
	err := s.Store.JobStart(ctx, p)
	if err == nil && p.Outbox != nil {
		s.write(*p.Outbox)
	}
	return err
}

func (s *outboxStore) JobEndEvent(ctx context.Context, id string, ev sm.Event, reason, manifest string, now time.Time) (string, error) {
	return s.JobEndGen(ctx, id, ev, reason, manifest, now, -1)
}

func (s *outboxStore) JobEndGen(ctx context.Context, id string, ev sm.Event, reason, manifest string, now time.Time, gen int) (string, error) {
	j, jerr := s.Store.JobGet(ctx, id)
	stages, serr := s.Store.StageList(ctx, id)
	eid, err := s.Store.JobEndGen(ctx, id, ev, reason, manifest, now, gen)
	if err == nil && jerr == nil && serr == nil {
		s.write(dynamo.JobEndedEvent(id, j.Owner, j.Spec.Name, sm.Jobs.Transition(ev).To, reason, manifest, stages, now))
	}
	return eid, err
}

func (s *outboxStore) StageTransition(ctx context.Context, p dynamo.StageTransitionParams) error {
	err := s.Store.StageTransition(ctx, p)
	if err == nil && p.Outbox != nil {
		s.write(*p.Outbox)
	}
	return err
}

func (s *outboxStore) TaskRelease(ctx context.Context, p dynamo.ReleaseParams) (domain.Task, error) {
	t, err := s.Store.TaskRelease(ctx, p)
	if err == nil && p.Outbox != nil {
		s.write(*p.Outbox)
	}
	return t, err
}

func (s *outboxStore) TaskSweep(ctx context.Context, p dynamo.SweepTaskParams) error {
	err := s.Store.TaskSweep(ctx, p)
	if err == nil && p.Outbox != nil {
		s.write(*p.Outbox)
	}
	return err
}

func (s *outboxStore) DueList(ctx context.Context, shard int, now time.Time, limit int) ([]dynamo.DueItem, error) {
	items, err := s.Store.DueList(ctx, shard, now, limit)
	if err != nil || shard != 0 {
		return items, err
	}
	return s.withEvents(items, now), nil
}

// DueScan reads the outbox's records with the rest of a small index.
func (s *outboxStore) DueScan(ctx context.Context, now time.Time, limit int) ([]dynamo.DueItem, bool, error) {
	items, whole, err := s.Store.DueScan(ctx, now, limit)
	if err != nil || !whole {
		return items, whole, err
	}
	return s.withEvents(items, now), true, nil
}

// withEvents adds the outbox records due at now to items: the adapter
// keeps them in the index (shard 0 here).
func (s *outboxStore) withEvents(items []dynamo.DueItem, now time.Time) []dynamo.DueItem {
	s.mu.Lock()
	defer s.mu.Unlock()
	for id, ev := range s.pending {
		if !ev.Time.Add(dynamo.OutboxGrace).After(now) {
			items = append(items, dynamo.DueItem{Kind: dynamo.DueEvent, Event: id})
		}
	}
	return items
}

func (s *outboxStore) OutboxEvent(_ context.Context, id string) (events.Event, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ev, ok := s.pending[id]
	return ev, ok, nil
}

func (s *outboxStore) OutboxDelete(_ context.Context, id string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.pending, id)
	return nil
}

func (s *outboxStore) OutboxDelivered(_ context.Context, id, to string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if ev, ok := s.pending[id]; ok && !slices.Contains(ev.Delivered, to) {
		ev.Delivered = append(slices.Clone(ev.Delivered), to)
		s.pending[id] = ev
	}
	return nil
}

// recordingBus is an EventBridge that keeps what it accepted, and fails
// every PutEvents while err is set.
type recordingBus struct {
	mu   sync.Mutex
	err  error
	got  []events.Detail
	typs []string
}

func (b *recordingBus) PutEvents(_ context.Context, in *eventbridge.PutEventsInput, _ ...func(*eventbridge.Options)) (*eventbridge.PutEventsOutput, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.err != nil {
		return nil, b.err
	}
	out := &eventbridge.PutEventsOutput{}
	for _, e := range in.Entries {
		var d events.Detail
		if err := json.Unmarshal([]byte(aws.ToString(e.Detail)), &d); err != nil {
			return nil, err
		}
		b.got = append(b.got, d)
		b.typs = append(b.typs, aws.ToString(e.DetailType))
		out.Entries = append(out.Entries, ebtypes.PutEventsResultEntry{EventId: aws.String(d.EventID)})
	}
	return out, nil
}

// newEventsRig is a unit rig whose store has the outbox and whose service
// publishes to a recording bus.
func newEventsRig(t *testing.T) (*unitRig, *outboxStore, *recordingBus) {
	r := newUnitRig(t)
	os := newOutboxStore(r.store)
	bus := &recordingBus{}
	r.svc = New(unitTimings, os, r.queue, r.blob, testLogger(t))
	r.svc.Now = r.clock.Now
	r.svc.Jitter = func(time.Duration) time.Duration { return 0 }
	r.svc.Events = events.NewPublisher(bus, "bus", os)
	return r, os, bus
}

// eventLine is what a test checks of an event.
func eventLine(typ string, d events.Detail) string {
	s := typ
	if d.Stage != "" {
		s += " stage=" + d.Stage
	}
	if d.Partition != nil {
		s += fmt.Sprintf(" partition=%d attempts=%d", *d.Partition, d.Attempts)
	}
	if d.State != "" {
		s += " state=" + d.State
	}
	if c := d.Counts; c != nil {
		s += fmt.Sprintf(" counts=%d/%d/%d/%d", c.Stages, c.StagesCompleted, c.Tasks, c.TasksCommitted)
	}
	if d.Error != "" {
		s += " error"
	}
	return s
}

// Which transitions produce which events, with their details.
func TestEventsOfTransitions(t *testing.T) {
	cases := []struct {
		name string
		run  func(r *unitRig) string // returns the job id
		want []string
	}{
		{"a job succeeds", func(r *unitRig) string {
			id := r.submit(twoStages(2, 1))
			r.commit(r.claim(taskRef(id, 0, 0)), 1)
			r.commit(r.claim(taskRef(id, 0, 1)), 1)
			r.commit(r.claim(taskRef(id, 1, 0)), 1)
			return id
		}, []string{
			"Batchwork Job Submitted state=RUNNING counts=2/0/0/0",
			"Batchwork Stage Completed stage=s counts=0/0/2/2",
			"Batchwork Stage Completed stage=t counts=0/0/1/1",
			"Batchwork Job Succeeded state=SUCCEEDED counts=2/2/3/3",
		}},
		{"a retried task has no event", func(r *unitRig) string {
			id := r.submit(oneStage(1, 2, ""))
			if d, err := r.svc.Fail(r.ctx, r.claim(taskRef(id, 0, 0)), FailParams{Cause: "boom"}); err != nil || !d.Retry {
				r.t.Fatalf("fail: %+v, %v; want a retry", d, err)
			}
			return id
		}, []string{"Batchwork Job Submitted state=RUNNING counts=1/0/0/0"}},
		{"a task fails after its last attempt", func(r *unitRig) string {
			id := r.submit(oneStage(2, 1, ""))
			if _, err := r.svc.Fail(r.ctx, r.claim(taskRef(id, 0, 1)), FailParams{Cause: "boom"}); err != nil {
				r.t.Fatal(err)
			}
			return id
		}, []string{
			"Batchwork Job Submitted state=RUNNING counts=1/0/0/0",
			"Batchwork Task Failed stage=s partition=1 attempts=1 error",
			"Batchwork Job Failed state=FAILED counts=1/0/2/0 error",
		}},
		{"the last attempt's lease runs out", func(r *unitRig) string {
			id := r.submit(oneStage(1, 1, ""))
			r.claim(taskRef(id, 0, 0))
			r.clock.Advance(2*unitLease + sm.LeaseSkew + time.Second)
			r.sweep()
			return id
		}, []string{
			"Batchwork Job Submitted state=RUNNING counts=1/0/0/0",
			"Batchwork Task Failed stage=s partition=0 attempts=1 error",
			"Batchwork Job Failed state=FAILED counts=1/0/1/0 error",
		}},
		{"a job is cancelled", func(r *unitRig) string {
			id := r.submit(oneStage(1, 1, ""))
			// Cancel's transition (Cancel itself goes on to Status, which
			// the fakes do not serve).
			if err := r.svc.EndJob(r.ctx, id, sm.JobCancel, operations.CancelReason, "", r.clock.Now()); err != nil {
				r.t.Fatal(err)
			}
			return id
		}, []string{
			"Batchwork Job Submitted state=RUNNING counts=1/0/0/0",
			"Batchwork Job Cancelled state=CANCELLED counts=1/0/1/0 error",
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r, os, bus := newEventsRig(t)
			id := c.run(r)
			var got []string
			for i, d := range bus.got {
				got = append(got, eventLine(bus.typs[i], d))
				if d.JobID != id || d.Owner != "tester" || d.JobName != "unit" || d.EventID == "" || d.Time == "" {
					t.Errorf("event %d: %+v, want job %s of tester named unit, with an id and a time", i, d, id)
				}
			}
			if !slices.Equal(got, c.want) {
				t.Errorf("events:\n  %s\nwant:\n  %s", strings.Join(got, "\n  "), strings.Join(c.want, "\n  "))
			}
			// Published at once: nothing waits for the sweep, and every
			// event was written once.
			if len(os.pending) != 0 {
				t.Errorf("%d events left in the outbox", len(os.pending))
			}
			seen := map[string]bool{}
			for _, id := range os.written {
				if seen[id] {
					t.Errorf("event %s written twice", id)
				}
				seen[id] = true
			}
		})
	}
}

// A put that fails never fails the transition: the events wait in the
// outbox, and the sweep publishes them once the bus answers.
func TestEventPutErrorDoesNotFailCommit(t *testing.T) {
	r, os, bus := newEventsRig(t)
	bus.err = errors.New("eventbridge unavailable")
	id := r.submit(oneStage(1, 1, ""))
	r.commit(r.claim(taskRef(id, 0, 0)), 1) // fails the test on an error
	if j := r.job(id); j.State != sm.JobSucceeded {
		t.Fatalf("job %s, want SUCCEEDED", j.State)
	}
	if len(bus.got) != 0 || len(os.pending) != 3 {
		t.Fatalf("%d events put, %d pending; want none put and 3 pending", len(bus.got), len(os.pending))
	}
	// Not before their grace: the writer may still be publishing them.
	if c := r.sweep(); c.Events != 0 {
		t.Fatalf("sweep before the grace published %d events", c.Events)
	}
	r.clock.Advance(dynamo.OutboxGrace + time.Second)
	if _, err := r.svc.Sweep(r.ctx); err == nil {
		t.Fatal("sweep with the bus still down: no error")
	}
	if len(os.pending) != 3 {
		t.Fatalf("%d pending after a failed sweep, want 3", len(os.pending))
	}
	bus.err = nil
	if c := r.sweep(); c.Events != 3 {
		t.Fatalf("sweep published %d events, want 3", c.Events)
	}
	if len(os.pending) != 0 || len(bus.typs) != 3 {
		t.Fatalf("%d pending, %d put; want 0 and 3", len(os.pending), len(bus.typs))
	}
	slices.Sort(bus.typs)
	want := []string{events.JobSubmitted, events.JobSucceeded, events.StageCompleted}
	if !slices.Equal(bus.typs, want) {
		t.Errorf("put %v, want %v", bus.typs, want)
	}
}

// A process without a publisher leaves its events to one that has one,
// and its sweep does not look at them every run.
func TestEventsWithoutPublisherWait(t *testing.T) {
	r, os, _ := newEventsRig(t)
	r.svc.Events = nil
	r.submit(oneStage(1, 1, ""))
	r.clock.Advance(dynamo.OutboxGrace + time.Second)
	if c := r.sweep(); c.Events != 0 {
		t.Fatalf("published %d events without a publisher", c.Events)
	}
	if len(os.pending) != 1 {
		t.Fatalf("%d pending, want 1", len(os.pending))
	}
}
