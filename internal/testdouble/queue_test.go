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
