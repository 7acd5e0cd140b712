// Package later starts a goroutine only when its work is first due. A
// task's heartbeat loop has nothing to do before its first tick (a third
// of the lease, or the job watch's TTL); a no-op task ends long before,
// and starting the loop's goroutine anyway costs the process a goroutine
// and, on an idle process, the wake-up of another thread to run it.
package later

import (
	"sync"
	"time"
)

// Go is a goroutine that starts after a delay unless stopped first.
type Go struct {
	t    *time.Timer
	done sync.WaitGroup // fn's, once the timer started it
}

// Start runs fn in its own goroutine after d, unless Wait comes first.
func Start(d time.Duration, fn func()) *Go {
	g := &Go{}
	g.done.Add(1)
	g.t = time.AfterFunc(d, func() {
		defer g.done.Done()
		fn()
	})
	return g
}

// Wait keeps fn from starting if it has not, or waits until it returns:
// the caller must first make it return (cancel the context it watches).
func (g *Go) Wait() {
	if g.t.Stop() {
		return // fn never runs
	}
	g.done.Wait()
}
