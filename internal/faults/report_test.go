package faults

import (
	"context"
	"sync"
	"testing"
	"time"
)

func TestReportEvery(t *testing.T) {
	inj := New(1, Rule{Kind: Throttle, Rate: 0.5})
	inj.counts["DynamoDB.GetItem throttle"] = 3 // as if injected
	ctx, cancel := context.WithCancel(context.Background())
	var mu sync.Mutex
	var last map[string]int
	calls := 0
	first := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		ReportEvery(ctx, inj, time.Millisecond, func(c map[string]int) {
			mu.Lock()
			defer mu.Unlock()
			if calls++; calls == 1 {
				close(first)
			}
			last = c
		})
	}()
	select {
	case <-first:
	case <-time.After(10 * time.Second):
		t.Fatal("no periodic report")
	}
	inj.mu.Lock()
	inj.counts["SQS.ReceiveMessage lost"] = 1
	inj.mu.Unlock()
	cancel()
	<-done
	// The final report, made after the cancel, has the latest counts.
	if last["DynamoDB.GetItem throttle"] != 3 || last["SQS.ReceiveMessage lost"] != 1 {
		t.Fatalf("final report %v, want the injector's counts", last)
	}
}

func TestReportEveryNil(t *testing.T) {
	called := false
	ReportEvery(context.Background(), nil, time.Millisecond, func(map[string]int) { called = true })
	if called {
		t.Fatal("a nil injector reported")
	}
}
