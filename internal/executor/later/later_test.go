package later_test

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/batchwork/batchwork/internal/executor/later"
)

// Stopped before its delay, fn never runs.
func TestWaitBeforeDue(t *testing.T) {
	var ran atomic.Bool
	g := later.Start(time.Hour, func() { ran.Store(true) })
	g.Wait()
	if ran.Load() {
		t.Fatal("fn ran though Wait came before its delay")
	}
}

// Once started, Wait returns only after fn returned.
func TestWaitForRunning(t *testing.T) {
	started, release := make(chan struct{}), make(chan struct{})
	var returned atomic.Bool
	g := later.Start(0, func() {
		close(started)
		<-release
		returned.Store(true)
	})
	<-started
	waited := make(chan struct{})
	go func() { g.Wait(); close(waited) }()
	select {
	case <-waited:
		t.Fatal("Wait returned while fn ran")
	case <-time.After(20 * time.Millisecond): // a wrong Wait would have returned by now; a right one never does
	}
	close(release)
	<-waited
	if !returned.Load() {
		t.Fatal("Wait returned before fn did")
	}
}
