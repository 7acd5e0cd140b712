//go:build unix

package executor

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/batchwork/batchwork/internal/executor/feed"
	"github.com/batchwork/batchwork/shared/split"
)

// A task function that ignores its stage's timeout is abandoned, but goes
// on using its Task: reading its input and writing its output while the
// runner fails the attempt and closes them. Run with -race: the runner's
// teardown must not race with the abandoned function.
func TestAbandonedFunctionKeepsUsingItsTask(t *testing.T) {
	t.Parallel()
	sp := mustSpec(t, "name: j\nstages:\n  - name: s\n    task: work\n    timeout: 1s\n    partitions:\n      input: {prefix: s3://bucket/in/}\n")
	data := []byte("a\nb\nc\n")
	blob := &memBlob{objs: map[string][]byte{"in/x": data}}
	cp := &inputCP{fakeCP: fakeCP{spec: sp, lease: time.Minute}, input: split.Split{Key: "in/x", Start: 0, End: int64(len(data))}}
	var stop atomic.Bool
	t.Cleanup(func() { stop.Store(true) })
	reg := NewRegistry()
	reg.Register("work", func(ctx context.Context, t *Task) error {
		buf := make([]byte, 1)
		for i := 0; !stop.Load(); i++ {
			t.Input.Read(buf)
			fmt.Fprintf(t.Out, "%d\n", i)
			time.Sleep(time.Millisecond) // a busy function, not synchronisation
		}
		return nil
	})
	r := &Runner{CP: cp, Blob: blob, Registry: reg, Log: discard(), HeartbeatEvery: time.Hour, TimeoutGrace: 100 * time.Millisecond}
	res := r.Handle(context.Background(), feed.Delivery{Body: "j1/0/0", SentAt: time.Now()}, nil)
	_, commits, fails := cp.snapshot()
	if len(fails) != 1 || len(commits) != 0 || res.Action != feed.Hide {
		t.Fatalf("commits %v, fails %v, result %+v; want the attempt failed and retried", commits, fails, res)
	}
	// Let the abandoned function run on past the runner's teardown.
	time.Sleep(200 * time.Millisecond)
}

// Memory an earlier attempt freed stays held from the OS until the
// runtime's scavenger returns it, so the next attempt in a warm executor
// starts above the watchdog's mark. The watchdog must give that memory
// back before judging: an attempt using little must not fail as out of
// memory (spending an attempt and climbing a size it does not need).
func TestMemoryWatchdogReturnsFreedMemoryBeforeStopping(t *testing.T) {
	var freed atomic.Bool
	var samples atomic.Int64
	oldMem, oldFree := processMemory, freeOSMemory
	processMemory = func() uint64 {
		samples.Add(1)
		if freed.Load() {
			return 100 << 20
		}
		return 1000 << 20 // past 95% of 1GiB: an earlier attempt's freed heap
	}
	freeOSMemory = func() { freed.Store(true) }
	t.Cleanup(func() { processMemory, freeOSMemory = oldMem, oldFree })

	reg := NewRegistry()
	reg.Register("fn", func(ctx context.Context, t *Task) error {
		deadline := time.Now().Add(10 * time.Second)
		for samples.Load() < 3 && ctx.Err() == nil && time.Now().Before(deadline) {
			time.Sleep(10 * time.Millisecond) // polling the watchdog's samples
		}
		return ctx.Err()
	})
	cp := &classCP{fakeCP: &fakeCP{spec: mustSpec(t, "name: j\nstages:\n  - name: s\n    task: fn\n    partitions: {count: 1}\n"), lease: time.Minute}}
	r := &Runner{CP: cp, Blob: &memBlob{}, Registry: reg, Log: discard(), HeartbeatEvery: time.Hour, MemoryLimit: 1 << 30}
	r.Handle(context.Background(), feed.Delivery{Body: "j1/0/0"}, nil)
	_, commits, fails := cp.snapshot()
	if len(commits) != 1 || len(fails) != 0 {
		t.Fatalf("commits %v, fails %v (%v %v); want the attempt committed", commits, fails, cp.classes, cp.causes)
	}
}
