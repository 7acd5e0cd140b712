package integration

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/batchwork/batchwork/shared/batchwork"
)

// Under a backlog of low-priority tasks, a high-priority job's task is
// claimed at once by the weighted poller, long before the backlog
// completes; and the low backlog still completes.
func TestHighPriorityOvertakesLowBacklog(t *testing.T) {
	t.Parallel()
	const lowTasks, slots = 40, 4
	var mu sync.Mutex
	var order []string // job name of every task run, in start order
	reg := batchwork.NewRegistry()
	reg.Register("work", func(ctx context.Context, task *batchwork.Task) error {
		mu.Lock()
		order = append(order, task.Params["job"])
		mu.Unlock()
		// Each task takes a while, so the backlog outlasts the test's
		// look at it: a work duration, not synchronisation.
		select {
		case <-time.After(100 * time.Millisecond):
		case <-ctx.Done():
			return ctx.Err()
		}
		_, err := task.Out.Write([]byte("ok\n"))
		return err
	})
	e := newEnv(t, reg, envOptions{noRun: true})
	params := func(job string, n int) string {
		s := ""
		for i := range n {
			if i > 0 {
				s += ","
			}
			s += fmt.Sprintf(`{"job":%q}`, job)
		}
		return s
	}
	low := e.submit("low", fmt.Appendf(nil, `{"name":"low","priority":"low","lease":"5s","stages":[{"name":"s","task":"work","partitions":{"count":%d,"params":[%s]}}]}`, lowTasks, params("low", lowTasks)))

	ctx, stop := context.WithCancel(context.Background())
	p := e.r.Poller()
	p.Slots = slots
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()
	t.Cleanup(func() { stop(); <-done })

	started := func() (lows int, highAt int) {
		mu.Lock()
		defer mu.Unlock()
		highAt = -1
		for i, j := range order {
			switch j {
			case "low":
				lows++
			case "high":
				if highAt < 0 {
					highAt = i
				}
			}
		}
		return lows, highAt
	}
	// Wait for the backlog to be running (polling the system under test
	// with a deadline).
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if n, _ := started(); n >= 4 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the low backlog never started")
		}
	}
	lowsBefore, _ := started()
	submitted := time.Now()
	high := e.submit("high", []byte(`{"name":"high","priority":"high","lease":"5s","stages":[{"name":"s","task":"work","partitions":{"count":1,"params":[{"job":"high"}]}}]}`))
	var highAt int
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if _, highAt = started(); highAt >= 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the high task never ran")
		}
	}
	claimed := time.Since(submitted)
	// The high receiver is already in a long poll, so at most the tasks
	// received while the high job was being submitted start first.
	if ahead := highAt - lowsBefore; ahead > 2*slots {
		t.Errorf("%d low tasks started between the high submit and its claim, want at most %d", ahead, 2*slots)
	}
	if highAt >= lowTasks {
		t.Errorf("high task started after the whole low backlog (position %d)", highAt)
	}
	t.Logf("high claimed %s after submit, at position %d (%d low tasks had started)", claimed, highAt, lowsBefore)
	if st := e.waitJob(high, 30*time.Second); st.State != "SUCCEEDED" {
		t.Errorf("high job %s", st.State)
	}
	if st := e.waitJob(low, 60*time.Second); st.State != "SUCCEEDED" {
		t.Errorf("low job %s; the backlog must still complete", st.State)
	}
}
