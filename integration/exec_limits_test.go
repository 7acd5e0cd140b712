package integration

import (
	"context"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/batchwork/batchwork/internal/executor"
	"github.com/batchwork/batchwork/internal/executor/feed"
	"github.com/batchwork/batchwork/shared/domain"
	"github.com/batchwork/batchwork/shared/spec"
	sm "github.com/batchwork/batchwork/statemachine"
)

// An exec program that allocates past its memory limit (its attempt's
// executor size; here divided by 16, so 64 MiB at 1GiB and 128 MiB at
// 2GiB) fails as out of memory, not as an ordinary error: its retry climbs
// to the next size, where the same program, under the larger limit,
// commits.
func TestExecProgramPastItsMemoryLimitRetriesOnTheNextSize(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("python3"); err != nil {
		t.Fatalf("python3 is needed for the program: %v", err)
	}
	prog := "#!/bin/sh\nexec python3 -c \"b = b'x' * (96 << 20); print(len(b))\"\n"
	e, newRunner, handle := newSizedExecRig(t, prog)
	ctx := context.Background()
	runner := func(size spec.Size) *executor.Runner { return newRunner(size, 16) }
	id := e.submit("limit", []byte(`{"name":"limit","retry":{"maxAttempts":3,"backoff":"1ms"},"stages":[{"name":"s","exec":["prog"],`+
		`"resources":{"memory":"1GiB","maxMemory":"2GiB"},"partitions":{"count":1}}]}`))
	ref := domain.TaskRef{Job: id}

	if res := handle(runner(1<<30), e.r.Resources.Queues.Normal); res.Action != feed.Delete {
		t.Fatalf("attempt 1: %+v, want its message moved to the 2GiB queue", res)
	}
	task, err := e.r.Store.TaskGet(ctx, ref)
	if err != nil {
		t.Fatal(err)
	}
	if task.State != sm.TaskReady || task.ErrorClass != domain.ClassOutOfMemory || task.Memory != 2<<30 ||
		!strings.Contains(task.LastError, "past its 64 MiB limit") {
		t.Fatalf("task after attempt 1: %s class %q memory %d error %q; want READY at 2GiB after an out-of-memory end over 64 MiB",
			task.State, task.ErrorClass, task.Memory, task.LastError)
	}
	if res := handle(runner(2<<30), e.r.Resources.Queues.Sized[2<<30]); res.Action != feed.Delete || res.Err != nil {
		t.Fatalf("attempt 2: %+v, want committed under the 128 MiB limit", res)
	}
	if st := e.waitJob(id, 30*time.Second); st.State != string(sm.JobSucceeded) {
		t.Fatalf("job %s %q, want SUCCEEDED", st.State, st.Error)
	}
}
