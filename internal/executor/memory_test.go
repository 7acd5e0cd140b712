package executor

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/batchwork/batchwork/internal/executor/feed"
	"github.com/batchwork/batchwork/shared/domain"
)

// The watchdog of an executor of a known size stops the attempts running
// once the process nears its size, as out of memory, so the attempt
// climbs to a larger executor instead of the runtime being killed.
func TestMemoryWatchdogStopsTheAttemptAsOutOfMemory(t *testing.T) {
	var used atomic.Uint64
	used.Store(100 << 20)
	old := processMemory
	processMemory = used.Load
	t.Cleanup(func() { processMemory = old })

	const job = `
name: j
stages:
  - name: s
    task: fn
    partitions: {count: 1}
`
	reg := NewRegistry()
	reg.Register("fn", func(ctx context.Context, t *Task) error {
		used.Store(1000 << 20) // past 95% of 1GiB
		<-ctx.Done()
		return ctx.Err()
	})
	cp := &classCP{fakeCP: &fakeCP{spec: mustSpec(t, job), lease: time.Minute}}
	r := &Runner{CP: cp, Blob: newBlob(), Registry: reg, Log: discard(), HeartbeatEvery: time.Hour, MemoryLimit: 1 << 30}
	done := make(chan feed.Result, 1)
	go func() { done <- r.Handle(context.Background(), feed.Delivery{Body: "j1/0/0"}, nil) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("the watchdog did not stop the attempt")
	}
	if len(cp.classes) != 1 || cp.classes[0] != domain.ClassOutOfMemory || !strings.Contains(cp.causes[0], "of its 1024 MiB") {
		t.Fatalf("classes %v causes %v; want one out-of-memory failure", cp.classes, cp.causes)
	}
}
