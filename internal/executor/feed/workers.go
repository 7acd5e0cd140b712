package feed

import (
	"sync"
	"sync/atomic"

	"github.com/batchwork/batchwork/shared/queue"
)

// workers runs the poller's tasks on goroutines that outlive a task, at
// most one per slot: a goroutine made per message cost its creation, its
// exit and the growth of its stack through a task's deep calls, once a
// task. A worker that finished its task waits for the next message; none
// waiting, a new one starts, up to max.
//
// The slots stay the arbiter's: a message is handed over only with its
// slot acquired, and run releases it. So when all max workers exist, at
// least one holds no slot (the message handed over holds one) and is on
// its way back for the next message, and start's wait for it is short.
type workers struct {
	run  func(queue.Message)
	work chan queue.Message
	max  int32
	n    atomic.Int32 // workers started
	wg   sync.WaitGroup
}

func newWorkers(max int, run func(queue.Message)) *workers {
	return &workers{run: run, work: make(chan queue.Message), max: int32(max)}
}

// start runs m on a worker.
func (w *workers) start(m queue.Message) {
	select {
	case w.work <- m:
		return
	default:
	}
	if w.n.Add(1) <= w.max {
		w.wg.Add(1)
		go w.loop(m)
		return
	}
	w.n.Add(-1)
	w.work <- m
}

func (w *workers) loop(m queue.Message) {
	defer w.wg.Done()
	closed := false
	defer func() {
		if !closed {
			// run ended the goroutine (a task's runtime.Goexit, which
			// recover does not stop): another takes its place, or the
			// pool would count a worker that no longer takes messages.
			w.wg.Add(1)
			go w.wait()
		}
	}()
	for ok := true; ok; m, ok = <-w.work {
		w.run(m)
	}
	closed = true
}

// wait is a worker that starts without a message.
func (w *workers) wait() {
	if m, ok := <-w.work; ok {
		w.loop(m)
		return
	}
	w.wg.Done()
}

// close ends the workers, once every start has returned and every task
// has ended, and waits for them.
func (w *workers) close() {
	close(w.work)
	w.wg.Wait()
}
