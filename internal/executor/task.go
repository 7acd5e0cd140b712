// Package executor runs user task functions: a registry of functions by
// name, the per-message runner (claim, run with heartbeats, publish
// outputs, commit), and two hosts: a long-polling pool of slots (Fargate and
// local) and a Lambda SQS handler.
package executor

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"log/slog"
	"strings"
	"sync"

	"github.com/batchwork/batchwork/shared/batch"
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
	Ref     batch.TaskRef
	Stage   string
	Attempt int
	// Params are the partition's parameters from the spec, if any.
	Params map[string]string
	// Input is the task's split of an S3 input (whole lines), or its shuffle
	// partition: "key\tvalue\n" records from every upstream task. Nil for a
	// stage with an explicit partition count.
	Input io.Reader
	// Out collects the task's outputs; they are published only if the
	// attempt commits.
	Out *Output
	Log *slog.Logger
}

// ErrOutputTooLarge is returned by an Output's writers once an attempt's
// outputs would pass the runner's cap (tuning.MaxTaskOutput).
var ErrOutputTooLarge = errors.New("task output too large")

// Output buffers an attempt's output partitions. A stage with a shuffle
// has one partition per downstream task; others have one.
//
// The buffers are capped in total: outputs are published only after the
// function returns, so they are all in memory at once, and an executor
// runs other tasks in the same process. A write past the cap is refused
// whole, and the attempt fails even if the function ignores the refusal.
type Output struct {
	parts []*bytes.Buffer
	limit int64 // 0: no cap

	mu   sync.Mutex // guards used and err, so partitions may be written concurrently
	used int64
	err  error // the first refusal
}

func newOutput(n int, limit int64) *Output {
	o := &Output{parts: make([]*bytes.Buffer, max(n, 1)), limit: limit}
	for i := range o.parts {
		o.parts[i] = &bytes.Buffer{}
	}
	return o
}

// reserve accounts for n more bytes, or refuses them.
func (o *Output) reserve(n int) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.limit > 0 && o.used+int64(n) > o.limit {
		if o.err == nil {
			o.err = fmt.Errorf("%w: an attempt may buffer at most %d bytes of outputs in memory before publishing them; "+
				"give each task less to write (a smaller splitSize, or more partitions)", ErrOutputTooLarge, o.limit)
		}
		return o.err
	}
	o.used += int64(n)
	return nil
}

// refused is the first write refused, if any.
func (o *Output) refused() error {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.err
}

// Parts is the number of output partitions.
func (o *Output) Parts() int { return len(o.parts) }

// Part returns the writer of output partition r.
func (o *Output) Part(r int) io.Writer { return partWriter{o, r} }

// Write writes to partition 0.
func (o *Output) Write(p []byte) (int, error) { return o.write(0, p) }

func (o *Output) write(r int, p []byte) (int, error) {
	if err := o.reserve(len(p)); err != nil {
		return 0, err
	}
	return o.parts[r].Write(p)
}

type partWriter struct {
	o *Output
	r int
}

func (w partWriter) Write(p []byte) (int, error) { return w.o.write(w.r, p) }

// Emit writes a key/value record to the partition its key hashes to.
// Records are lines, so keys and values must not contain tabs (keys) or
// newlines.
func (o *Output) Emit(key, value string) error {
	if strings.ContainsAny(key, "\t\n") || strings.ContainsRune(value, '\n') {
		return fmt.Errorf("emit %q: keys must not contain tab or newline, values no newline", key)
	}
	if err := o.reserve(len(key) + len(value) + 2); err != nil {
		return err
	}
	w := o.parts[PartitionOf(key, len(o.parts))]
	w.WriteString(key)
	w.WriteByte('\t')
	w.WriteString(value)
	w.WriteByte('\n')
	return nil
}

// PartitionOf is the shuffle partition of key among n.
func PartitionOf(key string, n int) int {
	h := fnv.New32a()
	h.Write([]byte(key))
	return int(h.Sum32() % uint32(n))
}

// Records reads "key\tvalue" records from r, calling fn for each.
func Records(r io.Reader, fn func(key, value string) error) error {
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
