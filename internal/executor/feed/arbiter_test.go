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
