package batchwork

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"sync"

	"github.com/batchwork/batchwork/internal/executor"
	"github.com/batchwork/batchwork/internal/executor/output"
	"github.com/batchwork/batchwork/internal/executor/rejects"
	"github.com/batchwork/batchwork/internal/executor/tagged"
	"github.com/batchwork/batchwork/shared/spec"
)

// Func is a task function. ctx is cancelled when the attempt's lease is
// lost or its job ends; a function that runs long should watch it. A
// non-nil error (or a panic) fails the attempt.
type Func func(ctx context.Context, t *Task) error

// Task is one attempt at one partition of a stage: what a task function
// reads and where it writes.
type Task struct {
	// Job is the job's id.
	Job string
	// Stage is the stage's name in the spec.
	Stage string
	// Partition is the task's partition of its stage, from 0.
	Partition int
	// Attempt counts the task's attempts, from 1.
	Attempt int
	// Params are the partition's parameters from the spec; nil if none.
	Params map[string]string
	// RunParams are the job's run parameters (the spec's params:, with
	// the values its submission or schedule firing gave); nil if none.
	RunParams map[string]string
	// Input streams the task's records: a split of an S3 input (whole
	// records in Format), or its shuffle partition ("key\tvalue\n" lines
	// every upstream task emitted for it; see Records). Nil for a stage
	// partitioned by count, which reads no input prefix and no shuffle:
	// Records then returns ErrNoInput.
	Input io.Reader
	// Format is the input's record format: "lines" (the default, also
	// when empty), "jsonl" or "csv".
	Format string
	// Header is a CSV input's column names (its first record), not
	// repeated in Input; nil for other formats.
	Header []string
	// Source names the input prefix the task's split is of, for a stage
	// with several (partitions.inputs): the input's name, or its index
	// ("0", "1", ...). "" for a task that reads no split.
	Source string
	// Out holds the attempt's outputs, published only if it commits.
	Out *Output
	// Log is a logger whose lines name the job, stage, task, attempt and
	// executor (job_id, task, attempt, executor_id): batchwork logs finds
	// them by these.
	Log *slog.Logger

	// rt is the runner's task behind this one, for the calls that reach
	// the runner (Reject, Checkpoint, Resume); nil under RunTask.
	rt *executor.Task
	// rejects are RunTask's record of Reject calls (reject.go).
	rejects *rejects.Rejects
	// ckpt is RunTask's record of checkpoints (checkpoint.go).
	ckpt *memCheckpoints
}

// sink is what an Output writes to: the executor's outputs, or RunTask's
// buffers.
type sink interface {
	Write(p []byte) (int, error)
	Part(r int) io.Writer
	Parts() int
	Emit(key, value string) error
}

// Output is a task's output partitions. A stage with a shuffle has one
// partition per downstream task; others have one. Its methods may be
// called from several goroutines at once.
//
// A write may be refused (an attempt's outputs are capped in size); the
// attempt then fails even if the function ignores the error.
type Output struct {
	s sink
}

// Write writes p to partition 0, the only one of a stage without a
// shuffle.
func (o *Output) Write(p []byte) (int, error) { return o.s.Write(p) }

// Part returns the writer of output partition r, 0 <= r < Parts(). For
// any other r every write returns an error naming it, and on the executor
// the attempt then fails.
func (o *Output) Part(r int) io.Writer { return o.s.Part(r) }

// Parts is the number of output partitions.
func (o *Output) Parts() int { return o.s.Parts() }

// Emit writes the record "key\tvalue\n" to partition PartitionOf(key,
// Parts()). Records are lines: a key must not contain a tab or a newline,
// a value no newline.
func (o *Output) Emit(key, value string) error { return o.s.Emit(key, value) }

// PartitionOf is the shuffle partition of key among n (n > 0): the one
// Emit writes the key's records to.
func PartitionOf(key string, n int) int { return output.PartitionOf(key, n) }

// Records reads "key\tvalue" lines from r (a shuffle partition) and calls
// fn for each, stopping at fn's first error. A line without a tab is a key
// with an empty value. A nil r (the Input of a task whose stage has no
// input) returns ErrNoInput, which fails the task once, permanently.
func Records(r io.Reader, fn func(key, value string) error) error {
	return executor.Records(r, fn)
}

// TaggedRecords reads the input of a stage that joins several upstream
// shuffles (its "after" names several stages with a shuffle): every
// record is a line "source\tkey\tvalue", source being the name of the
// stage that emitted it, and fn gets each record's three parts, stopping
// at fn's first error. The sources come in the order "after" lists them,
// each whole before the next. A nil r returns ErrNoInput, as Records.
func TaggedRecords(r io.Reader, fn func(source, key, value string) error) error {
	if r == nil {
		return executor.ErrNoInput
	}
	return tagged.Records(r, fn)
}

// Registry maps task names (a stage's "task") to functions. Make one
// with NewRegistry; it may be used from several goroutines at once.
type Registry struct {
	mu    sync.RWMutex
	names []string
	exec  *executor.Registry
}

// NewRegistry returns an empty registry.
func NewRegistry() *Registry { return &Registry{exec: executor.NewRegistry()} }

// DefaultRegistry is the registry Register adds to and Main runs.
var DefaultRegistry = NewRegistry()

// Register adds fn to the DefaultRegistry under name.
func Register(name string, fn Func) { DefaultRegistry.Register(name, fn) }

// Register adds fn under name. A name a spec could not hold (a letter or
// digit, then letters, digits, '.', '_' and '-', at most 64 characters),
// a nil function, or a name registered twice panics, as http.ServeMux
// does: each is a programming error.
func (r *Registry) Register(name string, fn Func) {
	if name == "" {
		panic("batchwork: Register with an empty task name")
	}
	if !spec.ValidTaskName(name) {
		// No stage could name it, so it could never run.
		panic(fmt.Sprintf("batchwork: task name %q: want a letter or digit, then letters, digits, '.', '_' and '-', "+
			"at most %d characters", name, spec.MaxNameLen))
	}
	if fn == nil {
		panic(fmt.Sprintf("batchwork: Register %q with a nil function", name))
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if slices.Contains(r.names, name) {
		panic(fmt.Sprintf("batchwork: task %q registered twice", name))
	}
	r.exec.Register(name, adapt(fn))
	r.names = append(r.names, name)
}

// Names returns the registered task names, sorted.
func (r *Registry) Names() []string {
	r.mu.RLock()
	defer r.mu.RUnlock()
	// Never nil: Main prints it as a JSON array, [] when empty.
	names := slices.Clone(r.names)
	if names == nil {
		names = []string{}
	}
	slices.Sort(names)
	return names
}

// adapt makes fn an executor function: the executor's Task carries the
// runner's internals (the task reference), of which a function sees only
// the fields above.
func adapt(fn Func) executor.Func {
	return func(ctx context.Context, t *executor.Task) error {
		return fn(ctx, &Task{
			Job: t.Ref.Job, Stage: t.Stage, Partition: t.Ref.Partition, Attempt: t.Attempt,
			Params: t.Params, RunParams: t.RunParams, Input: t.Input, Format: t.Format, Header: t.Header, Source: t.Source,
			Out: &Output{s: t.Out}, Log: t.Log, rt: t,
		})
	}
}

func init() {
	executor.PublicRegistry = func(reg any) *executor.Registry {
		r, ok := reg.(*Registry)
		if !ok && reg != nil {
			panic(fmt.Sprintf("batchwork: %T is not a *batchwork.Registry", reg))
		}
		if r == nil {
			return nil
		}
		return r.exec
	}
}
