package executor

import (
	"context"
	"io"
	"log/slog"
	"syscall"
	"testing"
	"time"

	"github.com/batchwork/batchwork/internal/executor/feed"
	"github.com/batchwork/batchwork/shared/control"
	"github.com/batchwork/batchwork/shared/domain"
	"github.com/batchwork/batchwork/shared/lazylog"
	sm "github.com/batchwork/batchwork/statemachine"
)

// quietCP grants every claim and accepts every commit without recording
// them: what is left of a no-op task's Handle is the runner's own work.
type quietCP struct{ fakeCP }

func (q *quietCP) Claim(ctx context.Context, ref domain.TaskRef) (control.Claim, error) {
	return control.Claim{Spec: q.spec, Lease: q.lease, Task: domain.Task{Ref: ref, Attempt: 1, MaxAttempts: 3, Token: "tok"}}, ctx.Err()
}

func (q *quietCP) Commit(ctx context.Context, _ control.Claim, _ control.CommitResult) error {
	return ctx.Err()
}

// BenchmarkHandleNoop is the runner's own CPU and allocations for a no-op
// task, from its message to its commit, with a control plane that does
// nothing: issue 31's CPU per no-op task without the requests. Sixteen
// tasks run at once, as the bench's slots do; cpu-ns/op is the process's
// CPU time (getrusage) per task, which counts the scheduler's wake-ups
// that wall time on a shared machine hides.
func BenchmarkHandleNoop(b *testing.B) {
	cp := &quietCP{fakeCP{spec: mustSpec(b, oneTask), lease: time.Minute}}
	reg := NewRegistry()
	reg.Register("work", func(context.Context, *Task) error { return nil })
	r := &Runner{CP: cp, Blob: newBlob(), Registry: reg, Log: lazylog.New(slog.NewJSONHandler(io.Discard, nil))} // as the runner logs
	ctx := context.Background()
	b.ReportAllocs()
	b.SetParallelism(8)
	cpu0 := processCPU()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			res := r.Handle(ctx, feed.Delivery{Body: "j1/0/7", Visibility: time.Minute + sm.LeaseSkew}, nil)
			if res.Action != feed.Delete || res.Err != nil {
				b.Errorf("handle: %v %v", res.Action, res.Err)
				return
			}
		}
	})
	b.ReportMetric(float64(processCPU()-cpu0)/float64(b.N), "cpu-ns/op")
}

// processCPU is the process's user and system time so far.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
