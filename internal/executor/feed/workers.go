package feed

import (
	"slices"
	"sync"
	"time"

	"github.com/batchwork/batchwork/shared/queue"
)

// workers runs the poller's tasks on goroutines that outlive a task, at
// most one per slot: a goroutine made per message cost its creation, its
// exit and the growth of its stack through a task's deep calls, once a
// task. A worker that finished its task takes the next message waiting;
// none waiting, it waits for one. A message that finds no worker waiting
// starts a new one, up to max, else waits in line for the first to free.
//
// The slots stay the arbiter's: a message is handed over only with its
// slot acquired, and run releases it. Without a receive-ahead (arbiter.go)
// the slots are max, so a message waits in line only for a worker that
// has released its slot and is on its way back; with one, up to the
// ahead's messages wait for a task to end.
type workers struct {
	run  func(queue.Message)
	max  int
	mu   sync.Mutex
	wake *sync.Cond
	// line[head:] are the messages no worker has taken yet, oldest first.
	line []waiting
	head int
	// idle counts the workers waiting for a message and not yet woken: a
	// start that wakes one takes it out, so two starts never count on the
	// same worker.
	idle   int
	n      int // workers started
	closed bool
	wg     sync.WaitGroup
}

type waiting struct {
	m     queue.Message
	since time.Time
}

func newWorkers(max int, run func(queue.Message)) *workers {
	w := &workers{run: run, max: max}
	w.wake = sync.NewCond(&w.mu)
	return w
}

// start runs m on a worker; it never blocks.
func (w *workers) start(m queue.Message) { w.enqueue(m, false) }

// startFirst runs m on a worker ahead of the messages waiting in line:
// a message an idle receiver's long poll brought with the slot it held,
// which must not wait behind another class's messages received ahead.
func (w *workers) startFirst(m queue.Message) { w.enqueue(m, true) }

func (w *workers) enqueue(m queue.Message, first bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	e := waiting{m: m, since: time.Now()}
	switch {
	case !first:
		w.line = append(w.line, e)
	case w.head > 0:
		w.head--
		w.line[w.head] = e
	default:
		w.line = slices.Insert(w.line, 0, e)
	}
	switch {
	case w.idle > 0:
		w.idle--
		w.wake.Signal()
	case w.n < w.max:
		w.n++
		w.wg.Add(1)
		go w.loop()
	}
}

func (w *workers) loop() {
	defer w.wg.Done()
	closed := false
	defer func() {
		if !closed {
			// run ended the goroutine (a task's runtime.Goexit, which
			// recover does not stop): another takes its place, or the
			// pool would count a worker that no longer takes messages.
			w.wg.Add(1)
			go w.loop()
		}
	}()
	for {
		m, ok := w.next()
		if !ok {
			closed = true
			return
		}
		w.run(m)
	}
}

// next waits for the oldest message in line, or reports false once the
// pool is closed and the line empty.
func (w *workers) next() (queue.Message, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for w.head == len(w.line) {
		if w.closed {
			return queue.Message{}, false
		}
		w.idle++
		w.wake.Wait()
	}
	m := w.line[w.head].m
	w.line[w.head] = waiting{}
	w.head++
	w.compact()
	return m, true
}

// compact reuses the line's array: from its start once it is empty, and
// by moving the waiting messages down once most of it is taken, so a line
// that never empties does not grow its array for ever.
func (w *workers) compact() {
	switch {
	case w.head == len(w.line):
		w.line, w.head = w.line[:0], 0
	case w.head >= 16 && 2*w.head >= len(w.line):
		n := copy(w.line, w.line[w.head:])
		clear(w.line[n:])
		w.line, w.head = w.line[:n], 0
	}
}

// takeWaiting takes out of line the messages that joined it at or before
// cutoff, so that the caller can give them back to the queue: all of them
// with a cutoff of now. The line is not in order of joining (startFirst),
// so every message is looked at; the others keep their order.
func (w *workers) takeWaiting(cutoff time.Time) []queue.Message {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []queue.Message
	j := w.head
	for k := w.head; k < len(w.line); k++ {
		if !w.line[k].since.After(cutoff) {
			out = append(out, w.line[k].m)
			continue
		}
		w.line[j] = w.line[k]
		j++
	}
	clear(w.line[j:])
	w.line = w.line[:j]
	w.compact()
	return out
}

// close ends the workers, once every start has returned and every task
// has ended, and waits for them.
func (w *workers) close() {
	w.mu.Lock()
	w.closed = true
	w.idle = 0
	w.wake.Broadcast()
	w.mu.Unlock()
	w.wg.Wait()
}
