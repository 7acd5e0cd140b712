package executor

import (
	"context"
	"slices"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/batchwork/batchwork/internal/executor/feed"
	"github.com/batchwork/batchwork/internal/testdouble"
	"github.com/batchwork/batchwork/shared/queue"
)

// An idle class's receiver long-polls holding a slot, so a message of
// that class runs at once, or on the next slot to free. With the
// receive-ahead the line is FIFO across classes: the high class's
// message, received with the slot its receiver held, waits behind the low
// class's messages received ahead, and the next slot to free runs a low
// task (and past aheadWait the high message is given back, costing it a
// receive). The low class takes the high class's slot.
func TestPollerAheadDoesNotQueueTheHighClassBehindTheLowReview(t *testing.T) {
	t.Parallel()
	const (
		slots = 2
		short = 2  // the low class's first tasks end at once: the ahead turns on
		high  = 99 // the high class's task
	)
	body := `{"name":"prio","stages":[{"name":"s","task":"work","partitions":{"count":100}}]}`
	fcp := &fakeCP{spec: mustSpec(t, body), lease: time.Minute}
	cp := &liveCP{fakeCP: fcp, renewed: make(chan struct{})}
	q := &receiveCountingQueue{Queue: testdouble.NewQueue(testdouble.TimedPoll())}
	started := make(chan int, 100)
	blocked := make(chan struct{}, 100)
	release := make(chan struct{}, 100)
	quit := make(chan struct{})
	var lowCalls atomic.Int32
	reg := NewRegistry()
	reg.Register("work", func(ctx context.Context, t *Task) error {
		started <- t.Ref.Partition
		if t.Ref.Partition != high && lowCalls.Add(1) > short {
			blocked <- struct{}{}
			select {
			case <-release:
			case <-quit:
			}
		}
		_, err := t.Out.Write([]byte("done\n"))
		return err
	})
	p := &feed.Poller{
		Handler: &Runner{CP: cp, Blob: newBlob(), Registry: reg, Log: discard()},
		CP:      cp,
		Queue:   q, Queues: []string{"hi", "lo"}, Slots: slots,
		Wait:  time.Minute, // the idle high receiver holds its slot until its message comes
		Drain: time.Minute, Log: discard(),
	}
	ctx, sigterm := context.WithCancel(context.Background())
	runDone := make(chan error, 1)
	go func() { runDone <- p.Run(ctx) }()
	defer func() {
		close(quit)
		sigterm()
		within(t, runDone, 10*time.Second, "Run to return")
	}()
	// Both receivers long-poll, each holding a slot, before the low
	// class's backlog comes.
	for range 2 {
		within(t, q.Entered(), 10*time.Second, "a receiver's first poll")
	}
	for i := range 40 {
		q.Push("lo", queue.Message{Queue: "lo", ID: "m" + strconv.Itoa(i), Receipt: "r" + strconv.Itoa(i), Body: "j1/0/" + strconv.Itoa(i)})
	}
	for i := range slots {
		within(t, blocked, 10*time.Second, "low task "+strconv.Itoa(i+1)+" to hold a slot")
	}
	// The low class's messages: the short ones, those holding the slots,
	// and one waiting in line (received ahead).
	deadline := time.Now().Add(5 * time.Second)
	for len(q.receipts()) < short+slots+1 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	q.Push("hi", queue.Message{Queue: "hi", ID: "mh", Receipt: "rh", Body: "j1/0/" + strconv.Itoa(high)})
	for !slices.Contains(q.receipts(), "rh") {
		if time.Now().After(deadline) {
			t.Fatalf("the high class's message was never received (received %v)", q.receipts())
		}
		time.Sleep(time.Millisecond)
	}
	for len(started) > 0 {
		<-started
	}
	release <- struct{}{} // a slot frees
	if next := within(t, started, 10*time.Second, "the next task to start"); next != high {
		t.Errorf("the slot that freed ran low task %d, want the high class's %d (received %v)", next, high, q.receipts())
	}
}
