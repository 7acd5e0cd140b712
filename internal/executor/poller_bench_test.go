package executor

import (
	"context"
	"io"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/batchwork/batchwork/internal/executor/feed"
	"github.com/batchwork/batchwork/shared/lazylog"
	"github.com/batchwork/batchwork/shared/queue"
)

// instantQueue hands out n messages as fast as they are asked for, then
// holds the receiver in its poll until its context ends.
type instantQueue struct {
	mu   sync.Mutex
	left int
	sent int
}

func (q *instantQueue) Receive(ctx context.Context, url string, maxN int, _, _ time.Duration) ([]queue.Message, error) {
	q.mu.Lock()
	n := min(maxN, q.left)
	q.left -= n
	first := q.sent
	q.sent += n
	q.mu.Unlock()
	if n == 0 {
		<-ctx.Done()
		return nil, ctx.Err()
	}
	msgs := make([]queue.Message, n)
	for i := range msgs {
		id := strconv.Itoa(first + i)
		msgs[i] = queue.Message{Queue: url, ID: id, Receipt: id, Body: "j1/0/" + id}
	}
	return msgs, nil
}

func (q *instantQueue) ChangeVisibility(context.Context, string, string, time.Duration) error {
	return nil
}

func (q *instantQueue) ChangeVisibilityBatch(context.Context, string, []string, time.Duration) ([]string, error) {
	return nil, nil
}

func (q *instantQueue) DeleteBatch(context.Context, string, []string) error { return nil }

// countingHandler tells done when the n-th task is handled.
type countingHandler struct {
	feed.Handler
	n, handled atomic.Int64
	done       chan struct{}
}

func (h *countingHandler) Handle(ctx context.Context, d feed.Delivery, extend feed.Extender) feed.Result {
	res := h.Handler.Handle(ctx, d, extend)
	if h.handled.Add(1) == h.n.Load() {
		close(h.done)
	}
	return res
}

// BenchmarkPollerNoop is the host's and the runner's own CPU for a no-op
// task, from its receive to its delete, on sixteen slots with a queue and
// a control plane that answer at once: the scheduling of a task's
// goroutines and its allocations, without the requests. cpu-ns/op is the
// process's CPU time per task (getrusage).
func BenchmarkPollerNoop(b *testing.B) {
	cp := &quietCP{fakeCP{spec: mustSpec(b, oneTask), lease: time.Minute}}
	reg := NewRegistry()
	reg.Register("work", func(context.Context, *Task) error { return nil })
	log := lazylog.New(slog.NewJSONHandler(io.Discard, nil))
	h := &countingHandler{Handler: &Runner{CP: cp, Blob: newBlob(), Registry: reg, Log: log}, done: make(chan struct{})}
	h.n.Store(int64(b.N))
	q := &instantQueue{left: b.N}
	p := &feed.Poller{Handler: h, CP: cp, Queue: q, Queues: []string{"q"}, Slots: 16, Log: slog.New(slog.NewJSONHandler(io.Discard, nil))}
	ctx, cancel := context.WithCancel(context.Background())
	b.ReportAllocs()
	cpu0 := processCPU()
	b.ResetTimer()
	ran := make(chan error, 1)
	go func() { ran <- p.Run(ctx) }()
	<-h.done
	b.StopTimer()
	b.ReportMetric(float64(processCPU()-cpu0)/float64(b.N), "cpu-ns/op")
	cancel()
	if err := <-ran; err != nil {
		b.Fatal(err)
	}
}
