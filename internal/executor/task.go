// Package executor runs user task functions: a registry of functions by
// name, the per-message runner (claim, run with heartbeats, publish
// outputs, commit), and two hosts: a long-polling pool of slots (Fargate and
// local) and a Lambda SQS handler.
package executor

import (
	"bufio"
	"context"
	"io"
	"log/slog"
	"strings"
	"sync"

	"github.com/batchwork/batchwork/internal/executor/output"
	"github.com/batchwork/batchwork/internal/executor/rejects"
	"github.com/batchwork/batchwork/shared/domain"
	"github.com/batchwork/batchwork/shared/split"
)

// Func is a user task function. ctx is cancelled when the task's lease is
// lost or its job ends; a function that runs long should watch it.
type Func func(ctx context.Context, t *Task) error

// Registry maps task names (a stage's `task`) to functions.
type Registry struct {
	mu  sync.RWMutex
	fns map[string]Func
}

// NewRegistry returns an empty registry.
func NewRegistry() *Registry { return &Registry{fns: map[string]Func{}} }

// Register adds fn under name; registering a name twice panics, as
// http.ServeMux does, because it is a programming error.
func (r *Registry) Register(name string, fn Func) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, dup := r.fns[name]; dup {
		panic("executor: task " + name + " registered twice")
	}
	r.fns[name] = fn
}

// Lookup returns the function registered under name.
func (r *Registry) Lookup(name string) (Func, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	fn, ok := r.fns[name]
	return fn, ok
}

// Task is what a task function gets.
type Task struct {
	Ref     domain.TaskRef
	Stage   string
	Attempt int
	// Params are the partition's parameters from the spec, if any.
	Params map[string]string
	// RunParams are the job's run parameters, resolved at submit (the
	// claim's spec holds them: no read of their own).
	RunParams map[string]string
	// Input is the task's split of an S3 input (whole lines), or its shuffle
	// partition: "key\tvalue\n" records from every upstream task. Nil for a
	// stage with an explicit partition count.
	Input io.Reader
	// Format is the input's record format: "lines" (the default, also
	// when empty), "jsonl" (one JSON value a line) or "csv".
	Format string
	// Header is a CSV input's column names (its first record); nil for
	// other formats and for tasks without an input.
	Header []string
	// Source names the input prefix the task's split is of
	// (spec.Input.SourceName); "" for a task that reads no split.
	Source string
	// Out collects the task's outputs; they are published only if the
	// attempt commits.
	Out *output.Output
	Log *slog.Logger
	// ck saves and resumes the attempt's checkpoints (checkpoint.go); nil
	// when the task cannot checkpoint.
	ck *checkpointer
	// Rejects are the records the attempt rejected (reject.go).
	Rejects *rejects.Rejects
	// cut lets the runner give away the unread rest of the input split
	// (dynsplit.go); nil when the split cannot be cut.
	cut *split.Cut
}

// Records reads "key\tvalue" records from r, calling fn for each. A nil r
// is a task without an input: ErrNoInput.
func Records(r io.Reader, fn func(key, value string) error) error {
	if r == nil {
		return ErrNoInput
	}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	for sc.Scan() {
		k, v, _ := strings.Cut(sc.Text(), "\t")
		if err := fn(k, v); err != nil {
			return err
		}
	}
	return sc.Err()
}
