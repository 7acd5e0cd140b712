package execstage

import (
	"context"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/batchwork/batchwork/shared/spec"
)

const execOne = `
name: j
stages:
  - name: s
    exec: [prog, arg one]
    partitions:
      count: 1
      params: [{shard-id: "7"}]
`

func mustSpec(t *testing.T, body string) *spec.Job {
	t.Helper()
	sp, err := spec.Parse([]byte(body))
	if err != nil {
		t.Fatalf("spec: %v", err)
	}
	return sp
}

// memOut is an attempt's outputs held in memory: what the program wrote
// to each partition.
type memOut struct {
	mu    sync.Mutex
	parts [1][]byte
}

func (o *memOut) Write(p []byte) (int, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.parts[0] = append(o.parts[0], p...)
	return len(p), nil
}

func (o *memOut) Emit(key, value string) error {
	_, err := o.Write([]byte(key + "\t" + value + "\n"))
	return err
}

func (o *memOut) Parts() int { return len(o.parts) }

// part is what partition 0 holds so far.
func (o *memOut) part() []byte {
	o.mu.Lock()
	defer o.mu.Unlock()
	return append([]byte(nil), o.parts[0]...)
}

// noCheckpoints stands in for a checkpointer whose Save the test never
// reaches.
type noCheckpoints struct{ t *testing.T }

func (c noCheckpoints) Save(context.Context, int64, []byte) error {
	c.t.Error("checkpoint saved, want it refused before")
	return nil
}

func discard() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// within fails the test unless ch yields within d. It bounds a wait that a
// bug would make endless; it does not stand in for synchronisation.
func within[T any](t *testing.T, ch <-chan T, d time.Duration, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(d):
		t.Fatalf("timed out after %s waiting for %s", d, what)
	}
	var zero T
	return zero
}

// logRecords is a slog handler that keeps every record.
type logRecords struct {
	mu   sync.Mutex
	recs []slog.Record
}

func (h *logRecords) Enabled(context.Context, slog.Level) bool { return true }
func (h *logRecords) Handle(_ context.Context, r slog.Record) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.recs = append(h.recs, r.Clone())
	return nil
}
func (h *logRecords) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *logRecords) WithGroup(string) slog.Handler      { return h }

func attr(r slog.Record, key string) string {
	var v string
	r.Attrs(func(a slog.Attr) bool {
		if a.Key == key {
			v = a.Value.String()
			return false
		}
		return true
	})
	return v
}
