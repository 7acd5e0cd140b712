package schedules

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// A burst's job writes all come before any firing's follow-up work; at
// most firingWriters write and firingFollowers follow up at once; and a
// firing that ends before writing its job (an error, a skip) holds no one
// up.
func TestFiringGateOrdersABurst(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name      string
		firings   int
		noWriteAt func(i int) bool // firings that end without a job write
	}{
		{name: "a burst larger than the writer slots", firings: 3*firingWriters + 5, noWriteAt: func(int) bool { return false }},
		{name: "some firings end before their job write", firings: 2 * firingWriters, noWriteAt: func(i int) bool { return i%7 == 0 }},
		{name: "one firing alone", firings: 1, noWriteAt: func(int) bool { return false }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			s := &Firer{gate: newFiringGate()}
			var writing, following, maxWriting, maxFollowing atomic.Int64
			var mu sync.Mutex
			var lastWrite, firstFollow time.Time
			peak := func(cur *atomic.Int64, max *atomic.Int64) {
				n := cur.Add(1)
				for m := max.Load(); n > m && !max.CompareAndSwap(m, n); m = max.Load() {
				}
			}
			var wg sync.WaitGroup
			start := time.Now()
			// The burst reaches its time together: every firing is
			// registered before any goroutine runs, as the gate orders
			// only registered firings (a goroutine the scheduler starts
			// late would otherwise arrive after others' follow-ups).
			turns := make([]*firingTurn, c.firings)
			for i := range turns {
				turns[i] = s.arriveFiring()
			}
			for i := range c.firings {
				wg.Add(1)
				go func() {
					defer wg.Done()
					turn := turns[i]
					ctx, err := turn.awaitWriter(context.Background())
					if err != nil {
						t.Error(err)
						return
					}
					defer turn.done()
					peak(&writing, &maxWriting)
					time.Sleep(2 * time.Millisecond) // the job write
					writing.Add(-1)
					if c.noWriteAt(i) {
						return
					}
					mu.Lock()
					if now := time.Now(); now.After(lastWrite) {
						lastWrite = now
					}
					mu.Unlock()
					JobWritten(ctx)
					JobWritten(ctx) // a catch-up's second job: no second turn
					mu.Lock()
					if now := time.Now(); firstFollow.IsZero() || now.Before(firstFollow) {
						firstFollow = now
					}
					mu.Unlock()
					peak(&following, &maxFollowing)
					time.Sleep(time.Millisecond) // the follow-up
					following.Add(-1)
				}()
			}
			wg.Wait()
			if took := time.Since(start); took > firingHold {
				t.Fatalf("the burst took %s: someone waited out the hold", took)
			}
			if firstFollow.Before(lastWrite) {
				t.Errorf("a follow-up began %s before the last job write", lastWrite.Sub(firstFollow))
			}
			if m := maxWriting.Load(); m > firingWriters {
				t.Errorf("%d job writes at once, want at most %d", m, firingWriters)
			}
			if m := maxFollowing.Load(); m > firingFollowers {
				t.Errorf("%d follow-ups at once, want at most %d", m, firingFollowers)
			}
			g := s.gate
			if p, w, f := g.pending.Load(), len(g.writers), len(g.followers); p != 0 || w != 0 || f != 0 {
				t.Errorf("after the burst: %d pending, %d writer and %d follower slots held", p, w, f)
			}
		})
	}
}

// Outside a gated firing (a submit from the API, the sweep's own firing),
// JobWritten does nothing.
func TestFiringJobWrittenOutsideAFiring(t *testing.T) {
	t.Parallel()
	done := make(chan struct{})
	go func() { JobWritten(context.Background()); close(done) }()
	select {
	case <-done:
	case <-time.After(time.Second):
		t.Fatal("JobWritten blocked outside a firing")
	}
}
