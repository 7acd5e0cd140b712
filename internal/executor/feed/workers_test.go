package feed

import (
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

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
		ahead                   int // messages handed over past the workers, waiting in line
	}{
		{"one slot", 1, 1, 200, 0},
		{"slots for every receiver", 4, 2, 2000, 0},
		{"more receivers than slots", 2, 3, 2000, 0},
		{"a batch ahead of the workers", 4, 2, 2000, 4},
		{"one slot, one ahead", 1, 1, 200, 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			slots := make(chan struct{}, c.slots+c.ahead)
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
			for range c.slots + c.ahead { // every task ended: its slot released
				slots <- struct{}{}
			}
			w.mu.Lock()
			started := w.n
			w.mu.Unlock()
			w.close()
			n := 0
			ran.Range(func(any, any) bool { n++; return true })
			if n != c.tasks {
				t.Errorf("%d messages ran, want %d", n, c.tasks)
			}
			if most.Load() > int32(c.slots) {
				t.Errorf("%d tasks ran at once on %d slots", most.Load(), c.slots)
			}
			if started > c.slots || started < 1 {
				t.Errorf("%d workers started for %d slots", started, c.slots)
			}
		})
	}
}

// Messages that find every worker busy wait in line, oldest first, and
// takeWaiting takes out those that joined it by its cutoff, leaving the
// later ones to run.
func TestWorkersTakeWaiting(t *testing.T) {
	t.Parallel()
	running, release := make(chan string, 10), make(chan struct{})
	var ranMu sync.Mutex
	var ran []string
	w := newWorkers(1, func(m queue.Message) {
		running <- m.ID
		<-release
		ranMu.Lock()
		ran = append(ran, m.ID)
		ranMu.Unlock()
	})
	w.start(queue.Message{ID: "0"})
	if id := <-running; id != "0" {
		t.Fatalf("running %s, want 0", id)
	}
	for i := 1; i <= 3; i++ {
		w.start(queue.Message{ID: strconv.Itoa(i)})
	}
	cutoff := time.Now()
	w.start(queue.Message{ID: "4"}) // joined after the cutoff
	w.mu.Lock()
	w.line[len(w.line)-1].since = cutoff.Add(time.Nanosecond) // the clock may not have moved
	w.mu.Unlock()
	var taken []string
	for _, m := range w.takeWaiting(cutoff) {
		taken = append(taken, m.ID)
	}
	if !slices.Equal(taken, []string{"1", "2", "3"}) {
		t.Errorf("took %v, want [1 2 3]", taken)
	}
	close(release)
	if id := <-running; id != "4" {
		t.Errorf("ran %s next, want 4", id)
	}
	w.close()
	if !slices.Equal(ran, []string{"0", "4"}) {
		t.Errorf("ran %v, want [0 4]", ran)
	}
}

// A line that never empties reuses its array instead of growing it.
func TestWorkersLineStaysBounded(t *testing.T) {
	t.Parallel()
	w := newWorkers(0, func(queue.Message) {}) // no worker: the test takes from the line itself
	for i := range 10_000 {
		w.start(queue.Message{ID: strconv.Itoa(i)})
		if i >= 3 {
			if m, _ := w.next(); m.ID != strconv.Itoa(i-3) {
				t.Fatalf("took %s, want %d", m.ID, i-3)
			}
		}
	}
	if n := cap(w.line); n > 64 {
		t.Errorf("the line's array holds %d for 4 waiting messages", n)
	}
}

// A message started first runs before those waiting in line, and
// takeWaiting still takes the older ones behind it.
func TestWorkersStartFirstJumpsTheLineReview(t *testing.T) {
	t.Parallel()
	w := newWorkers(0, func(queue.Message) {}) // no worker: the test takes from the line itself
	for _, id := range []string{"a", "b", "c"} {
		w.start(queue.Message{ID: id})
	}
	cutoff := time.Now()
	w.startFirst(queue.Message{ID: "hi"})
	w.mu.Lock()
	w.line[w.head].since = cutoff.Add(time.Nanosecond) // the clock may not have moved
	w.mu.Unlock()
	var taken []string
	for _, m := range w.takeWaiting(cutoff) {
		taken = append(taken, m.ID)
	}
	if !slices.Equal(taken, []string{"a", "b", "c"}) {
		t.Errorf("took %v, want [a b c]: the older messages behind the one started first", taken)
	}
	if m, _ := w.next(); m.ID != "hi" {
		t.Errorf("next %s, want hi", m.ID)
	}
	w.start(queue.Message{ID: "d"})
	w.startFirst(queue.Message{ID: "e"}) // head at 0 after the line emptied
	if m, _ := w.next(); m.ID != "e" {
		t.Errorf("next %s, want e", m.ID)
	}
}
