package events

import (
	"context"
	"errors"
	"slices"
	"testing"
)

// fakeSink delivers every event unless down, counting its calls.
type fakeSink struct {
	down  bool
	got   []string
	calls int
}

func (s *fakeSink) Name() string { return "lineage" }

func (s *fakeSink) Deliver(_ context.Context, ev Event) error {
	s.calls++
	if s.down {
		return errors.New("endpoint down")
	}
	s.got = append(s.got, ev.ID)
	return nil
}

// A record stays until the bus and every sink accepted its event; each
// destination that accepted it is noted and not asked again, and a sink
// that fails is asked once a call.
func TestPublishToSinks(t *testing.T) {
	always := func(int) string { return JobSubmitted }
	cases := []struct {
		name         string
		withBus      bool
		busErr       error
		sinkDown     bool
		wantLeft     int
		wantNoted    []string // Delivered of the records left
		wantSinkCall int
		wantErr      bool
	}{
		{name: "bus and sink accept: deleted", withBus: true, wantSinkCall: 3},
		{name: "sink down: kept, noted on the bus, sink asked once", withBus: true, sinkDown: true,
			wantLeft: 3, wantNoted: []string{BusDestination}, wantSinkCall: 1, wantErr: true},
		{name: "bus down: kept, noted for the sink", withBus: true, busErr: errors.New("bus down"),
			wantLeft: 3, wantNoted: []string{"lineage"}, wantSinkCall: 3, wantErr: true},
		{name: "no bus: the sink alone", wantSinkCall: 3},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			o := outboxOf(3, always)
			sink := &fakeSink{down: c.sinkDown}
			var p *Publisher
			bus := &fakeBus{err: c.busErr}
			if c.withBus {
				p = NewPublisher(bus, "bw-bus", o, sink)
			} else {
				p = NewPublisher(nil, "", o, sink)
			}
			_, err := p.Publish(t.Context(), ids(o)...)
			if (err != nil) != c.wantErr {
				t.Fatalf("error %v, want one: %v", err, c.wantErr)
			}
			if len(o.evs) != c.wantLeft {
				t.Fatalf("%d records left, want %d", len(o.evs), c.wantLeft)
			}
			for id, ev := range o.evs {
				if !slices.Equal(ev.Delivered, c.wantNoted) {
					t.Errorf("record %s noted %v, want %v", id, ev.Delivered, c.wantNoted)
				}
			}
			if sink.calls != c.wantSinkCall {
				t.Errorf("sink asked %d times, want %d", sink.calls, c.wantSinkCall)
			}
			// The next publication asks only the destinations that did
			// not accept yet.
			bus.err, sink.down = nil, false
			busCalls, sinkCalls := len(bus.calls), sink.calls
			if _, err := p.Publish(t.Context(), ids(o)...); err != nil {
				t.Fatalf("second publication: %v", err)
			}
			if len(o.evs) != 0 {
				t.Errorf("%d records left after every destination accepted", len(o.evs))
			}
			again := 0
			if c.withBus && slices.Contains(c.wantNoted, BusDestination) {
				again = len(bus.calls) - busCalls
			}
			if slices.Contains(c.wantNoted, "lineage") {
				again += sink.calls - sinkCalls
			}
			if again != 0 {
				t.Errorf("a destination that had accepted was asked again (%d calls)", again)
			}
		})
	}
}
