package feed

import (
	"strconv"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/batchwork/batchwork/shared/queue"
)

// TestWorkersRunEachMessageOnceWithinTheSlots hands messages over as the
// poller does, each with a slot of a semaphore run releases, from several
// receivers at once: every message runs once, no more tasks run at once
// than slots, and no more workers start than slots.
func TestWorkersRunEachMessageOnceWithinTheSlots(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name                    string
		slots, receivers, tasks int
	}{
		{"one slot", 1, 1, 200},
		{"slots for every receiver", 4, 2, 2000},
		{"more receivers than slots", 2, 3, 2000},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			slots := make(chan struct{}, c.slots)
			var ran sync.Map
			var running, most atomic.Int32
			w := newWorkers(c.slots, func(m queue.Message) {
				defer func() { <-slots }()
				n := running.Add(1)
				for {
					old := most.Load()
					if n <= old || most.CompareAndSwap(old, n) {
						break
					}
				}
				if _, dup := ran.LoadOrStore(m.ID, true); dup {
					t.Errorf("message %s ran twice", m.ID)
				}
				running.Add(-1)
			})
			var receivers sync.WaitGroup
			for r := range c.receivers {
				receivers.Add(1)
				go func() {
					defer receivers.Done()
					for i := r; i < c.tasks; i += c.receivers {
						slots <- struct{}{} // the arbiter's acquire
						w.start(queue.Message{ID: strconv.Itoa(i)})
					}
				}()
			}
			receivers.Wait()
			for range c.slots { // every task ended: its slot released
				slots <- struct{}{}
			}
			started := w.n.Load()
			w.close()
			n := 0
			ran.Range(func(any, any) bool { n++; return true })
			if n != c.tasks {
				t.Errorf("%d messages ran, want %d", n, c.tasks)
			}
			if most.Load() > int32(c.slots) {
				t.Errorf("%d tasks ran at once on %d slots", most.Load(), c.slots)
			}
			if started > int32(c.slots) || started < 1 {
				t.Errorf("%d workers started for %d slots", started, c.slots)
			}
		})
	}
}
