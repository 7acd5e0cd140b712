package feed

import (
	"context"
	"sync"
	"time"
)

// weights returns the receivers' weights: p.Weights when it fits Queues,
// else 6:3:1 for the three priority classes, else equal.
func (p *Poller) weights() []int {
	if len(p.Weights) == len(p.Queues) {
		ws := make([]int, len(p.Weights))
		for i, w := range p.Weights {
			ws[i] = max(w, 1) // a zero weight would starve its class
		}
		return ws
	}
	if len(p.Queues) == 3 {
		return []int{6, 3, 1}
	}
	ws := make([]int, len(p.Queues))
	for i := range ws {
		ws[i] = 1
	}
	return ws
}

// arbiter hands free slots to waiting receivers by stride scheduling: each
// receiver has a pass that grows by 1/weight per slot it takes, and the
// waiting receiver with the lowest pass goes next. Over a backlog the
// classes therefore get slots in proportion to their weights, and a low
// class is never starved: its pass stays put while the others' grow.
// Only waiting receivers compete, so an idle class's slots go to the busy
// ones, and a class that was idle rejoins at the current pass instead of
// spending credit saved while it had nothing to do.
type arbiter struct {
	mu      sync.Mutex
	free    int
	stride  []float64
	pass    []float64
	vt      float64 // the pass of the latest grant: the rejoin floor
	want    []int   // >0 while receiver i waits
	granted []chan int
	// A backlogged receiver (its last receive came back full) keeps its
	// place in line while it is off receiving: slots it wins meanwhile are
	// held for it in pending, up to its batch. Otherwise a class that is
	// receiving when a slot frees would lose it to whoever happened to be
	// waiting, and the weights would not hold.
	backlogged []bool
	pending    []int
	batch      int
	// sharedIdle is set when slots are fewer than receivers, so idle
	// receivers take turns with one slot between them: an empty receive
	// then costs every class the same (the lowest weight's stride), so
	// idle polls go round the classes instead of by weight, and a
	// message on the lowest class waits a few short polls, not ten.
	sharedIdle bool
	maxStride  float64
	// The receive-ahead (see withAhead): aheadMax more messages than
	// slots while some receiver is backlogged and the last fastNeed tasks
	// each ended within aheadTask. ahead is how many of them free holds
	// now; taking them back can leave free below zero until tasks end.
	aheadMax, ahead int
	fast, fastNeed  int
}

func newArbiter(slots, batch int, weights []int) *arbiter {
	a := &arbiter{free: slots, batch: batch, sharedIdle: slots < len(weights)}
	for _, w := range weights {
		a.stride = append(a.stride, 1/float64(w))
		a.maxStride = maxf(a.maxStride, 1/float64(w))
		a.pass = append(a.pass, 0)
		a.want = append(a.want, 0)
		a.granted = append(a.granted, make(chan int, 1))
		a.backlogged = append(a.backlogged, false)
		a.pending = append(a.pending, 0)
	}
	return a
}

// withAhead lets the receivers take up to max messages more than the
// slots, while one of them is backlogged and the last need tasks were
// short: a slot that frees then finds its next message already here
// instead of waiting for a gather and a receive's round trip.
func (a *arbiter) withAhead(max, need int) *arbiter {
	a.aheadMax, a.fastNeed = max, need
	return a
}

// aheadTask is the longest a task may run and still count as short for
// the receive-ahead. A message received ahead waits for a slot to free:
// behind short tasks, for a fraction of this.
const aheadTask = 500 * time.Millisecond

// adjustAhead adds the ahead's slots to free, or takes them back, as its
// conditions now hold or not.
func (a *arbiter) adjustAhead() {
	want := 0
	if a.aheadMax > 0 && a.fast >= a.fastNeed {
		for _, b := range a.backlogged {
			if b {
				want = a.aheadMax
				break
			}
		}
	}
	a.free += want - a.ahead
	a.ahead = want
}

// acquire waits for receiver i's turn and returns 1 to limit slots.
func (a *arbiter) acquire(ctx context.Context, i, limit int) (int, error) {
	a.mu.Lock()
	if n := a.pending[i]; n > 0 {
		a.pending[i] = 0
		a.mu.Unlock()
		return n, nil
	}
	a.want[i] = limit
	if !a.backlogged[i] {
		a.pass[i] = maxf(a.pass[i], a.vt)
	}
	a.dispatch()
	a.mu.Unlock()
	select {
	case n := <-a.granted[i]:
		return n, nil
	case <-ctx.Done():
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.want[i] > 0 {
		a.want[i] = 0
		return 0, ctx.Err()
	}
	// Granted as ctx ended: give the slots back.
	n := <-a.granted[i]
	a.pass[i] -= float64(n) * a.stride[i]
	a.free += n
	a.dispatch()
	return 0, ctx.Err()
}

// release returns n slots whose messages were given back unrun.
func (a *arbiter) release(n int) {
	a.mu.Lock()
	a.free += n
	a.dispatch()
	a.mu.Unlock()
}

// done returns the slot of a task that ran for d.
func (a *arbiter) done(d time.Duration) {
	a.mu.Lock()
	a.free++
	if d <= aheadTask {
		a.fast++
	} else {
		a.fast = 0
	}
	a.adjustAhead()
	a.dispatch()
	a.mu.Unlock()
}

// slow ends the receive-ahead until the next fastNeed short tasks: a
// message received ahead waited too long for a slot.
func (a *arbiter) slow() {
	a.mu.Lock()
	a.fast = 0
	a.adjustAhead()
	a.mu.Unlock()
}

// received records that receiver i's receive filled got of its n slots.
// The unfilled slots go back, and a receive that was not full ends the
// backlog and gives back the slots held for the receiver too. All are
// uncharged but one for an empty receive: a long poll held that slot all
// along, and charging it lets the busy classes take their turns when
// slots are scarce, instead of an idle class winning every freed slot.
func (a *arbiter) received(i, n, got int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.backlogged[i] = got == n
	a.adjustAhead()
	if got == 0 && a.sharedIdle {
		a.pass[i] += a.maxStride - a.stride[i]
	}
	back := n - got
	if !a.backlogged[i] {
		back += a.pending[i]
		a.pending[i] = 0
	}
	if back > 0 {
		charged := back
		if got == 0 {
			charged--
		}
		a.pass[i] -= float64(charged) * a.stride[i]
		a.free += back
	}
	a.dispatch()
}

// dispatch grants free slots while receivers wait. A receiver keeps taking
// slots (up to its want) while its pass stays no higher than any other
// waiter's, so a heavy class batches several messages per receive. Ties go
// to the lower index, the higher priority.
func (a *arbiter) dispatch() {
	for a.free > 0 {
		i := a.next(-1)
		if i < 0 {
			return
		}
		if a.want[i] == 0 { // backlogged and off receiving: hold the slot
			a.vt = a.pass[i]
			a.pass[i] += a.stride[i]
			a.free--
			a.pending[i]++
			continue
		}
		g := 0
		for a.free > 0 && g < a.want[i] {
			if o := a.next(i); g > 0 && o >= 0 && a.pass[o] < a.pass[i] {
				break
			}
			a.vt = a.pass[i]
			a.pass[i] += a.stride[i]
			a.free--
			g++
		}
		a.want[i] = 0
		a.granted[i] <- g
	}
}

// next returns the receiver in line other than skip with the lowest pass,
// or -1. In line means waiting, or backlogged with room in its pending
// batch.
func (a *arbiter) next(skip int) int {
	best := -1
	for j, w := range a.want {
		inLine := w > 0 || (a.backlogged[j] && a.pending[j] < a.batch)
		if inLine && j != skip && (best < 0 || a.pass[j] < a.pass[best]) {
			best = j
		}
	}
	return best
}

func maxf(a, b float64) float64 {
	if a > b {
		return a
	}
	return b
}
