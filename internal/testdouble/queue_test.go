package testdouble_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/batchwork/batchwork/internal/testdouble"
	"github.com/batchwork/batchwork/shared/queue"
)

// A long poll waits for a pushed message or the end of its context; the
// default returns at once.
func TestQueueReceive(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	q := testdouble.NewQueue()
	if ms, err := q.Receive(ctx, "u", 10, time.Second, 0); err != nil || len(ms) != 0 {
		t.Fatalf("Receive of an empty queue = %v, %v; want nothing at once", ms, err)
	}
	lp := testdouble.NewQueue(testdouble.LongPoll(), testdouble.OneQueue())
	got := make(chan []queue.Message, 1)
	go func() {
		ms, _ := lp.Receive(ctx, "any", 10, time.Second, 0)
		got <- ms
	}()
	<-lp.Entered()
	lp.Push("", queue.Message{Body: "m", Receipt: "r"})
	if ms := <-got; len(ms) != 1 || ms[0].Body != "m" {
		t.Fatalf("long poll received %v, want the pushed message", ms)
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := lp.Receive(cctx, "any", 10, time.Second, 0); !errors.Is(err, context.Canceled) {
		t.Fatalf("Receive on a cancelled context = %v, want context.Canceled", err)
	}
}

// A timed poll returns nothing when its wait passes, and hands each URL
// only the messages pushed to it; every receive's wait is recorded.
func TestQueueTimedPoll(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	q := testdouble.NewQueue(testdouble.TimedPoll())
	if ms, err := q.Receive(ctx, "high", 10, time.Millisecond, 0); err != nil || len(ms) != 0 {
		t.Fatalf("a timed poll of an empty queue = %v, %v; want nothing once its wait passed", ms, err)
	}
	got := make(chan []queue.Message, 1)
	go func() {
		ms, _ := q.Receive(ctx, "low", 10, time.Hour, 0)
		got <- ms
	}()
	<-q.Entered()
	<-q.Entered()
	q.Push("high", queue.Message{Body: "h"})
	q.Push("low", queue.Message{Body: "l"})
	if ms := <-got; len(ms) != 1 || ms[0].Body != "l" {
		t.Fatalf("a poll of low received %v, want low's message", ms)
	}
	if ms, _ := q.Receive(ctx, "high", 10, time.Hour, 0); len(ms) != 1 || ms[0].Body != "h" {
		t.Fatalf("a poll of high received %v, want high's message", ms)
	}
	if w := q.Waits(); len(w) != 3 || w[0] != time.Millisecond || w[1] != time.Hour {
		t.Fatalf("waits %v, want each receive's", w)
	}
}
