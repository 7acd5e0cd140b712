package control

import (
	"context"
	"sync"
	"testing"

	"github.com/batchwork/batchwork/shared/events"
)

// stallingSink is an OpenLineage endpoint that does not answer: its
// Deliver returns only once released, or when its caller gives up.
type stallingSink struct {
	release chan struct{}
	mu      sync.Mutex
	gaveUp  bool
	asked   int
}

func (s *stallingSink) Name() string { return "stalling" }

func (s *stallingSink) Deliver(ctx context.Context, ev events.Event) error {
	s.mu.Lock()
	s.asked++
	s.mu.Unlock()
	select {
	case <-s.release:
		return nil
	case <-ctx.Done():
		s.mu.Lock()
		s.gaveUp = true
		s.mu.Unlock()
		return ctx.Err()
	}
}

// docs/lineage.md: a run event "never delays a submit, a commit or a
// cancel". A submit must answer while the endpoint has not: if it
// waited for the sink, the sink saw its context end before Submit
// returned.
func TestSubmitDoesNotWaitForALineageSink(t *testing.T) {
	r, os, bus := newEventsRig(t)
	sink := &stallingSink{release: make(chan struct{})}
	defer close(sink.release)
	r.svc.Events = events.NewPublisher(bus, "bus", os, sink)
	if _, err := r.svc.Submit(r.ctx, SubmitRequest{Owner: "alice", IdempotencyKey: "k", Spec: []byte(oneStage(1, 1, ""))}); err != nil {
		t.Fatal(err)
	}
	sink.mu.Lock()
	defer sink.mu.Unlock()
	if sink.gaveUp {
		t.Errorf("Submit returned only after giving up on the lineage sink (asked %d times): the endpoint delays submits", sink.asked)
	}
}
