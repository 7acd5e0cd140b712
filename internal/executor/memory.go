package executor

// Executor sizes (spec Resources): a stage names the memory its tasks
// need, and an attempt that runs out of memory is retried on the next size
// up (control.Service.Fail). An executor knows its own size
// (procmem.EnvExecutorMemory, which the construct sets on every executor it
// deploys) and runs only tasks of that size: one of another size forwards
// the task's message to its size's ready queue unclaimed, spending no
// attempt, or hands it back if the forward fails (sizedqueues.go). An
// executor without a size (local runs, tests) runs tasks of any size.

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"time"

	"github.com/batchwork/batchwork/internal/executor/procmem"
	"github.com/batchwork/batchwork/shared/domain"
	"github.com/batchwork/batchwork/shared/spec"
)

// errWrongSize is a task handed back for an executor of its size.
var errWrongSize = errors.New("task needs an executor of another size")

// wrongSize says why this executor, of a known size, does not run the
// task ref names: it needs another size. nil when it may run it, when
// this executor has no size, and when the size cannot be read (or the
// control plane cannot say it, ErrUnsupported): the claim then goes ahead (a task run on the wrong size at worst runs out of
// memory again and climbs).
func (r *Runner) wrongSize(ctx context.Context, ref domain.TaskRef, sp *spec.Job) error {
	if r.Memory == 0 {
		return nil
	}
	need := sp.StageMemory(ref.Stage)
	if sp.StageMaxMemory(ref.Stage) > need {
		m, err := r.CP.TaskMemory(ctx, ref)
		if err != nil {
			return nil
		}
		need = m
	}
	if need != r.Memory {
		return fmt.Errorf("%w: it runs on %d MiB, this executor has %d MiB", errWrongSize, need>>20, r.Memory>>20)
	}
	return nil
}

// memoryWatchEvery is how often the watchdog samples the process's memory,
// and memoryWatchShare the share of the executor's size past which it
// stops the attempts running: the runtime would otherwise be killed
// (Lambda's runtime exit, a container's OOM kill) and take every attempt
// of this executor with it, as a lost lease, with nothing saying it ran
// out of memory.
const (
	memoryWatchEvery = 250 * time.Millisecond
	memoryWatchShare = 0.95
)

// processMemory is the memory the Go runtime holds from the OS; a
// variable so tests can inject a reading.
var processMemory = procmem.Held

// freeOSMemory returns the heap's free memory to the OS; a variable so
// tests can see it called.
var freeOSMemory = debug.FreeOSMemory

// watchMemory cancels the attempt (cancel, its context's) with an
// out-of-memory cause once the process holds more than memoryWatchShare
// of its memory (Runner.MemoryLimit), so the attempt fails as out of
// memory and climbs to the next size. It watches until ctx ends; a
// process without a known limit is not watched. The memory is the
// process's, shared by its slots: every attempt running when it passes
// the mark is stopped.
func (r *Runner) watchMemory(ctx context.Context, cancel context.CancelCauseFunc) {
	if r.MemoryLimit == 0 {
		return
	}
	limit := uint64(float64(r.MemoryLimit) * memoryWatchShare)
	go func() {
		tick := time.NewTicker(memoryWatchEvery)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			used := processMemory()
			if used > limit {
				// Part of it may be heap an earlier attempt freed that the
				// runtime has not given back yet: an attempt must not fail
				// for memory it does not hold. Past the mark only, so the
				// forced collection is rare.
				freeOSMemory()
				used = processMemory()
			}
			if used > limit {
				cancel(&classedError{
					msg:   fmt.Sprintf("the executor's memory reached %d MiB of its %d MiB", used>>20, r.MemoryLimit>>20),
					class: domain.ErrOutOfMemory,
				})
				return
			}
		}
	}()
}
