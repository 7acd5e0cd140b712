// Package chaostasks is the task function of the chaos workloads that
// exercise the failure-tolerance mechanisms (tolerated failures, bad
// records, speculation, checkpoints, deadlines, deletion, redrive, rerun,
// dynamic splitting) under kills and faults, and the specs
// that use it. Its outputs depend on the stage and partition alone, so
// the chaos run's outputs can be compared with the fault-free run's.
package chaostasks

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/batchwork/batchwork/examples/wordcount"
	"github.com/batchwork/batchwork/shared/batchwork"
)

// Task is the function every stage of these workloads runs.
const Task = "chaos.step"

// Partition parameters the function obeys.
const (
	// ParamFail "permanent": the task fails for good on every attempt;
	// "first": on its first attempt only (a redrive's attempt succeeds).
	ParamFail = "fail"
	// ParamReject n: the task rejects n records as bad, then commits.
	ParamReject = "reject"
	// ParamSleep d: the task waits d before it writes (a straggler), on
	// its first attempt only when ParamSleepFirst is set, so that a
	// speculative copy or a retry is quick.
	ParamSleep      = "sleep"
	ParamSleepFirst = "sleepFirstOnly"
)

// ErrFailsForGood is the permanent failure of a partition asked to fail.
var ErrFailsForGood = errors.New("chaos: this partition fails for good")

// Register adds the task function to reg.
func Register(reg *batchwork.Registry) {
	reg.Register(Task, run)
	reg.Register(NumberTask, number)
	reg.Register(CopyTask, copyLines)
}

func run(ctx context.Context, t *batchwork.Task) error {
	if f := t.Params[ParamFail]; f == "permanent" || (f == "first" && t.Attempt == 1) {
		return batchwork.Permanent(ErrFailsForGood)
	}
	if d, err := time.ParseDuration(t.Params[ParamSleep]); err == nil && d > 0 && (t.Params[ParamSleepFirst] == "" || t.Attempt == 1) {
		timer := time.NewTimer(d)
		defer timer.Stop()
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-timer.C:
		}
	}
	n, _ := strconv.Atoi(t.Params[ParamReject])
	for i := range n {
		if err := t.Reject(fmt.Appendf(nil, "bad record %d of %s/%d", i, t.Stage, t.Partition), "chaos: unparseable"); err != nil {
			return err
		}
	}
	_, err := fmt.Fprintf(t.Out, "%s/%d ok\n", t.Stage, t.Partition)
	return err
}

// The workloads' kinds.
const (
	KindTolerate    = "tolerate"
	KindBadRecords  = "badrecords"
	KindSpeculation = "speculation"
	KindDeadline    = "deadline"
	// KindDelete is a job the harness deletes once it ended.
	KindDelete = "delete"
	// KindRedrive is a job that fails, and that the harness redrives to
	// success.
	KindRedrive = "redrive"
	// KindCheckpoint is a job whose tasks checkpoint as they read.
	KindCheckpoint = "checkpoint"
	// KindRerun is a job that the harness reruns once it succeeded,
	// from RerunFrom: the rerun reuses its other stages' outputs.
	KindRerun = "rerun"
	// KindDynSplit is a job whose input tasks split as they run.
	KindDynSplit = "dynsplit"
)

// RerunFrom is the stage a rerun of a KindRerun job runs from: the
// shuffle stage before it (map) and the independent stage (side) are
// reused.
const RerunFrom = "reduce"

// Kinds are the workloads of this package, in the order a run cycles
// through them.
var Kinds = []string{KindTolerate, KindBadRecords, KindSpeculation, KindCheckpoint, KindDeadline, KindDelete, KindRedrive, KindRerun, KindDynSplit}

// DeadlineError is what a job past its deadline fails with.
const DeadlineError = "deadline exceeded"

// Spec is the YAML spec of a workload kind; input is the prefix that
// the kinds reading input read (the corpus, as "inputs:<path>"), and
// splitInput the dynamic-split workload's (DynSplitFiles objects).
func Spec(kind, name, input, splitInput string) ([]byte, error) {
	switch kind {
	case KindRerun:
		// A shuffle into reduce, and a stage beside them: a rerun from
		// reduce reuses map (its stage manifest, which reduce reads) and
		// side (its outputs, in the job manifest).
		return fmt.Appendf(nil, `name: %s
stages:
  - {name: map, task: %s, partitions: {input: {prefix: %q, splitSize: 8192}}, shuffle: {partitions: 3}}
  - {name: reduce, task: %s, after: [map]}
  - {name: side, task: %s, partitions: {count: 2}}
`, name, wordcount.MapTask, input, wordcount.ReduceTask, Task), nil
	case KindDynSplit:
		// One task per object, each running past the executors' split
		// trigger: each gives the unread rest of its object away.
		return fmt.Appendf(nil, `name: %s
stages:
  - {name: copy, task: %s, partitions: {input: {prefix: %q, splitSize: %d, dynamicSplit: true}}}
`, name, CopyTask, splitInput, 2*DynSplitBytes), nil
	case KindCheckpoint:
		// Each of the corpus's 8 KiB splits takes about 3 s, a
		// checkpoint every 16 lines: executors are killed mid-task.
		return fmt.Appendf(nil, `name: %s
stages:
  - {name: number, task: %s, partitions: {input: {prefix: %q, splitSize: 8192}}}
`, name, NumberTask, input), nil
	case KindTolerate:
		// One of a's three tasks fails for good, which a tolerates; b
		// runs after a regardless.
		return fmt.Appendf(nil, `name: %s
stages:
  - {name: a, task: %s, toleratedFailures: {count: 1}, partitions: {count: 3, params: [{%s: permanent}, {}, {}]}}
  - {name: b, task: %s, after: [a], partitions: {count: 2}}
`, name, Task, ParamFail, Task), nil
	case KindBadRecords:
		// Three rejections of four allowed, over two tasks.
		return fmt.Appendf(nil, `name: %s
stages:
  - {name: a, task: %s, maxBadRecords: 4, partitions: {count: 3, params: [{%s: "2"}, {%s: "1"}, {}]}}
  - {name: b, task: %s, after: [a], partitions: {count: 2}}
`, name, Task, ParamReject, ParamReject, Task), nil
	case KindSpeculation:
		// Partitions 0 and 3 straggle on their first attempt. The sweep
		// looks at the stage every CheckEvery (chaos sets it to seconds:
		// Options.CheckEvery), finds them running past 1.5 times the
		// median of the others, and launches a copy of each, which runs
		// at once and commits; the holder is fenced. A straggler whose
		// executor is killed first is retried instead.
		return fmt.Appendf(nil, `name: %s
stages:
  - name: a
    task: %s
    speculation: {quantile: 0.5, multiplier: 1.5, maxCopies: 2}
    partitions: {count: 6, params: [{%s: 8s, %s: "yes"}, {}, {}, {%s: 8s, %s: "yes"}, {}, {}]}
`, name, Task, ParamSleep, ParamSleepFirst, ParamSleep, ParamSleepFirst), nil
	case KindDeadline:
		// b never finishes within the job's deadline.
		return fmt.Appendf(nil, `name: %s
deadline: 3s
stages:
  - {name: a, task: %s, partitions: {count: 2}}
  - {name: b, task: %s, after: [a], partitions: {count: 2, params: [{%s: 10m}, {}]}}
`, name, Task, Task, ParamSleep), nil
	case KindRedrive:
		// a/1 fails for good on its first attempt, which fails the job
		// (after a's other tasks committed); its redrive runs it again.
		return fmt.Appendf(nil, `name: %s
stages:
  - {name: a, task: %s, partitions: {count: 3, params: [{}, {%s: first}, {}]}}
  - {name: b, task: %s, after: [a], partitions: {count: 2}}
`, name, Task, ParamFail, Task), nil
	case KindDelete:
		return fmt.Appendf(nil, `name: %s
stages:
  - {name: a, task: %s, partitions: {count: 3}}
  - {name: b, task: %s, after: [a], partitions: {count: 2}}
`, name, Task, Task), nil
	}
	return nil, fmt.Errorf("chaostasks: no workload kind %q", kind)
}
