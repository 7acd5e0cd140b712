package feed

import (
	"context"
	"testing"
	"time"
)

// The arbiter alone: with all receivers waiting and slots freed one at a
// time, the grants follow the weights exactly, and a low class waits at
// most a bounded number of grants.
func TestArbiterStride(t *testing.T) {
	t.Parallel()
	a := newArbiter(0, 1, []int{6, 3, 1})
	counts := make([]int, 3)
	lowGap, maxLowGap := 0, 0
	ctx := context.Background()
	type grant struct{ i, n int }
	grants := make(chan grant, 3)
	wait := func(i int) {
		go func() {
			n, err := a.acquire(ctx, i, 1)
			if err != nil {
				panic(err)
			}
			grants <- grant{i, n}
		}()
	}
	// All three wait before the first slot frees.
	for i := range 3 {
		wait(i)
	}
	for {
		a.mu.Lock()
		all := a.want[0] > 0 && a.want[1] > 0 && a.want[2] > 0
		a.mu.Unlock()
		if all {
			break
		}
		time.Sleep(time.Millisecond)
	}
	for range 1000 {
		a.release(1)
		g := within(t, grants, 5*time.Second, "a grant")
		counts[g.i] += g.n
		if g.i == 2 {
			lowGap = 0
		} else {
			lowGap++
			maxLowGap = max(maxLowGap, lowGap)
		}
		wait(g.i) // back in line at once, as a backlogged receiver is
		a.release(0)
		for {
			a.mu.Lock()
			in := a.want[g.i] > 0
			a.mu.Unlock()
			if in {
				break
			}
			time.Sleep(10 * time.Microsecond)
		}
	}
	if counts[0] != 600 || counts[1] != 300 || counts[2] != 100 {
		t.Errorf("grants %v, want [600 300 100]", counts)
	}
	if maxLowGap > 10 {
		t.Errorf("low waited %d grants, want at most 10 (the weights' sum)", maxLowGap)
	}
}

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

// The receive-ahead's slots are free only while a receiver is backlogged
// and the last fastNeed tasks were short; a long task, a give-back (slow)
// or the end of the backlog takes them back, and free then stays below
// its bound until enough tasks end.
func TestArbiterAhead(t *testing.T) {
	t.Parallel()
	const slots, ahead = 2, 2
	type step struct {
		do   string // "backlog", "short", "long", "slow", "empty"
		free int    // free slots after it
	}
	for _, c := range []struct {
		name  string
		steps []step
	}{
		{"backlogged after enough short tasks", []step{{"backlog", 0}, {"short", 1}, {"short", 2 + ahead}}},
		{"short tasks without a backlog", []step{{"short", 3}, {"short", 4}, {"short", 5}}}, // each done returns a slot, taken or not
		{"a long task resets the count", []step{{"backlog", 0}, {"short", 1}, {"long", 2}, {"short", 3}, {"short", 4 + ahead}}},
		{"a long task takes the ahead back", []step{{"backlog", 0}, {"short", 1}, {"short", 2 + ahead}, {"long", 3}}},
		{"a give-back takes it back", []step{{"backlog", 0}, {"short", 1}, {"short", 2 + ahead}, {"slow", 2}}},
		{"the backlog's end takes it back", []step{{"backlog", 0}, {"short", 1}, {"short", 2 + ahead}, {"empty", 2}}},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			a := newArbiter(slots, slots, []int{1}).withAhead(ahead, 2)
			for k, s := range c.steps {
				switch s.do {
				case "backlog": // a full receive of every slot
					n, err := a.acquire(context.Background(), 0, slots)
					if err != nil || n != slots {
						t.Fatalf("step %d: acquire %d, %v; want %d", k, n, err, slots)
					}
					a.received(0, n, n)
				case "short":
					a.done(time.Millisecond)
				case "long":
					a.done(time.Minute)
				case "slow":
					a.slow()
				case "empty": // a receive that comes back empty
					n, err := a.acquire(context.Background(), 0, 1)
					if err != nil {
						t.Fatalf("step %d: acquire: %v", k, err)
					}
					a.received(0, n, 0)
				}
				a.mu.Lock()
				free := a.free + a.pending[0] // slots held for the backlogged receiver are free ones
				a.mu.Unlock()
				if free != s.free {
					t.Fatalf("step %d (%s): %d free, want %d", k, s.do, free, s.free)
				}
			}
		})
	}
}
