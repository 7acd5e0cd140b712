package control

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/batchwork/batchwork/internal/testdouble"
	"github.com/batchwork/batchwork/shared/lazylog"
)

// BenchmarkClaimCommit is the control plane's own work for a no-op task,
// its claim and its commit, over the in-memory doubles (whose own cost is
// in the figure), logging as the runner does (lazy JSON lines at info).
func BenchmarkClaimCommit(b *testing.B) {
	store, queue := testdouble.NewStore(nil), testdouble.NewQueue()
	blob := testdouble.NewBlob(nil, testdouble.PresignRefused(ErrPresignUnavailable))
	clock := testdouble.NewClock()
	svc := New(unitTimings, store, queue, blob, lazylog.New(slog.NewJSONHandler(io.Discard, nil)))
	svc.Now = clock.Now
	svc.Jitter = func(time.Duration) time.Duration { return 0 }
	ctx := WithExecutor(context.Background(), "e-1")
	const tasks = 10_000
	job, p := "", tasks
	b.ReportAllocs()
	for b.Loop() {
		if p == tasks {
			b.StopTimer()
			res, err := svc.Submit(ctx, SubmitRequest{Owner: "tester", IdempotencyKey: fmt.Sprint("k", job), Spec: []byte(oneStage(tasks, 3, ""))})
			if err != nil {
				b.Fatal(err)
			}
			job, p = res.JobID, 0
			b.StartTimer()
		}
		c, err := svc.Claim(ctx, taskRef(job, 0, p))
		if err == nil {
			err = svc.Commit(ctx, c, CommitResult{WrittenHere: true})
		}
		if err != nil {
			b.Fatal(fmt.Errorf("task %d: %w", p, err))
		}
		p++
	}
}
