package control

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/batchwork/batchwork/shared/events"
)

// stallingSink is an OpenLineage endpoint that does not answer: its
// Deliver returns only once released, or when its caller gives up.
type stallingSink struct {
	release chan struct{}
	mu      sync.Mutex
	asked   int
	left    time.Duration // to the deadline of the first Deliver's context
}

func (s *stallingSink) Name() string { return "stalling" }

func (s *stallingSink) Deliver(ctx context.Context, ev events.Event) error {
	s.mu.Lock()
	s.asked++
	if d, ok := ctx.Deadline(); ok && s.asked == 1 {
		s.left = time.Until(d)
	}
	s.mu.Unlock()
	select {
	case <-s.release:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// docs/lineage.md: a submit waits at most events.PromptSinkBudget for a
// lineage endpoint that does not answer (not the bus's few seconds),
// and the event it could not deliver keeps its record, noted as on the
// bus, for the sweep.
func TestSubmitWaitsForALineageSinkOnlyItsBudget(t *testing.T) {
	r, os, bus := newEventsRig(t)
	sink := &stallingSink{release: make(chan struct{})}
	defer close(sink.release)
	r.svc.Events = events.NewPublisher(bus, "bus", os, sink)
	id, err := r.svc.Submit(r.ctx, SubmitRequest{Owner: "alice", IdempotencyKey: "k", Spec: []byte(oneStage(1, 1, ""))})
	if err != nil {
		t.Fatal(err)
	}
	sink.mu.Lock()
	asked, left := sink.asked, sink.left
	sink.mu.Unlock()
	if asked != 1 {
		t.Fatalf("the sink was asked %d times, want once", asked)
	}
	if left <= 0 || left > events.PromptSinkBudget {
		t.Errorf("the sink was given %v, want at most %v", left, events.PromptSinkBudget)
	}
	ev, found, err := os.OutboxEvent(r.ctx, events.SubmittedID(id.JobID))
	if err != nil || !found || !slices.Equal(ev.Delivered, []string{events.BusDestination}) {
		t.Errorf("outbox record: found=%v delivered=%v, %v; want it kept for the sweep, noted as on the bus", found, ev.Delivered, err)
	}
}
