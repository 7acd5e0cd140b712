package lineage

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/batchwork/batchwork/shared/events"
)

// SinkName is the lineage sink's name on the outbox records it accepted
// (events.Event.Delivered).
const SinkName = "openlineage"

// Sink delivers the outbox's job events to an OpenLineage endpoint
// (events.Sink).
type Sink struct {
	Builder   *Builder
	Transport *Transport
	Log       *slog.Logger
	// Pause is how long, after a failed send, the sink answers ErrPaused
	// without sending: an endpoint that is down costs each process one
	// failed send per Pause, never one per event, however many events
	// the sweep finds pending.
	Pause time.Duration
	Now   func() time.Time

	mu         sync.Mutex
	pauseUntil time.Time
}

var _ events.Sink = (*Sink)(nil)

// DefaultPause is Sink.Pause unless set.
const DefaultPause = 30 * time.Second

// ErrPaused is the answer of a sink whose last send failed less than its
// Pause ago: the event waits in the outbox.
var ErrPaused = errors.New("openlineage endpoint failed recently; the event waits in the outbox")

// Name is SinkName.
func (s *Sink) Name() string { return SinkName }

// Deliver sends ev's run event, or nothing for an event that reports no
// run's transition. An event the endpoint rejects as such is logged and
// dropped: it would be rejected every time.
func (s *Sink) Deliver(ctx context.Context, ev events.Event) error {
	if _, ok := EventType(ev); !ok {
		return nil
	}
	now := s.now()
	s.mu.Lock()
	paused := now.Before(s.pauseUntil)
	s.mu.Unlock()
	if paused {
		return ErrPaused
	}
	re, _, err := s.Builder.Build(ctx, ev)
	if err != nil {
		return err
	}
	body, err := json.Marshal(re)
	if err != nil {
		return fmt.Errorf("encode lineage of %s: %w", ev.ID, err)
	}
	err = s.Transport.Send(ctx, body)
	if errors.Is(err, ErrRejected) {
		s.Log.Error("openlineage: the endpoint rejected a run event; it is dropped", "event", ev.ID, "err", err)
		return nil
	}
	if err != nil {
		s.mu.Lock()
		s.pauseUntil = s.now().Add(s.pause())
		s.mu.Unlock()
		return err
	}
	return nil
}

func (s *Sink) now() time.Time {
	if s.Now != nil {
		return s.Now()
	}
	return time.Now()
}

func (s *Sink) pause() time.Duration {
	if s.Pause > 0 {
		return s.Pause
	}
	return DefaultPause
}
