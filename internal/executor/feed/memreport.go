package feed

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/batchwork/batchwork/internal/executor/procmem"
	"github.com/batchwork/batchwork/shared/control"
)

// The memory report: each liveness beat carries the peak memory the
// executor held since the previous beat, and its limit, in the same write
// (control.Service.ExecutorAliveMemory). If the runtime is killed for
// memory before the runner's watchdog (executor's memory.go) fails its
// attempts (a Lambda runtime exit, a container's OOM kill), the last
// report is what tells the control plane that its claims lapsed for
// memory, and their retries climb a size (control.MemoryLostShare).

// memorySampleEvery is how often the sampler reads the process's memory
// between beats: a spike shorter than a beat is still reported.
const memorySampleEvery = 100 * time.Millisecond

// memSampler keeps the peak memory read since it was last taken.
type memSampler struct {
	limit uint64
	read  func() uint64
	mu    sync.Mutex
	peak  uint64
}

func (m *memSampler) sample() {
	v := m.read()
	m.mu.Lock()
	m.peak = max(m.peak, v)
	m.mu.Unlock()
}

// take returns the peak since the last take (the current reading
// included) and starts a new period.
func (m *memSampler) take() control.MemoryReport {
	v := m.read()
	m.mu.Lock()
	defer m.mu.Unlock()
	r := control.MemoryReport{Used: max(m.peak, v), Limit: m.limit}
	m.peak = 0
	return r
}

// beatFunc is the liveness beat of executor id: with a memory report when
// the executor knows its limit (memoryLimit), else the plain renewal. A
// memory report's sampler runs until ctx ends, or until the control plane
// says it takes no reports (ErrUnsupported): from then on, and for that
// beat, the plain renewal.
func beatFunc(ctx context.Context, live Liveness, id string) func(context.Context) error {
	plain := func(ctx context.Context) error { return live.ExecutorAlive(ctx, id) }
	limit := memoryLimit()
	if limit == 0 {
		return plain
	}
	ctx, stopSampling := context.WithCancel(ctx)
	m := &memSampler{limit: limit, read: memoryUsed}
	go func() {
		tick := time.NewTicker(memorySampleEvery)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
				m.sample()
			}
		}
	}()
	var unsupported atomic.Bool
	return func(ctx context.Context) error {
		if unsupported.Load() {
			return plain(ctx)
		}
		err := live.ExecutorAliveMemory(ctx, id, m.take())
		if errors.Is(err, ErrUnsupported) {
			unsupported.Store(true)
			stopSampling()
			return plain(ctx)
		}
		return err
	}
}

// memoryLimit is the memory the executor may use before it is killed (0:
// unknown, no report), and memoryUsed what it holds now: variables so
// tests can set them.
var (
	memoryLimit = procmem.Limit
	memoryUsed  = procmem.Resident
)
