package batchwork

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
)

// TaskInput is one task for RunTask: what the executor would give the
// function. The zero value is partition 0, attempt 1, of stage "stage"
// in job "local", with no input and one output partition.
type TaskInput struct {
	Job, Stage         string
	Partition, Attempt int
	Params             map[string]string
	RunParams          map[string]string
	// Input is the task's records; nil for none.
	Input  io.Reader
	Format string
	Header []string
	// Source is Task.Source: the input a split is of ("" for none).
	Source string
	// Parts is the number of output partitions, the downstream shuffle
	// partitions (0: one).
	Parts int
	// Log receives the function's log lines (nil: discarded).
	Log *slog.Logger
	// MaxBadRecords is the stage's maxBadRecords: as on an executor, a
	// task that rejects more records fails (0: any rejection does).
	MaxBadRecords int
	// Resume, when set, is the checkpoint the task resumes from: Input
	// skips its offset and Task.Resume returns it (checkpoint.go).
	Resume *Checkpoint
}

// TaskResult is what a task function wrote: Parts[r] is output partition
// r.
type TaskResult struct {
	Parts [][]byte
	// BadRecords are the records the function rejected (Task.Reject),
	// with their offsets in Input, as an executor would store them.
	BadRecords []BadRecord
	// Checkpoints are the checkpoints the function saved, in order.
	Checkpoints []Checkpoint
}

// RunTask runs fn on in, in this process and without AWS, and returns its
// outputs along with its error, so task functions can be unit tested. As
// on an executor, a panic is returned as an error, and Emit and Part write
// to the partitions of in.Parts; unlike one, outputs are not capped.
func RunTask(ctx context.Context, fn Func, in TaskInput) (*TaskResult, error) {
	out := &memOutput{parts: make([]bytes.Buffer, max(in.Parts, 1))}
	t := &Task{
		Job: cmp.Or(in.Job, "local"), Stage: cmp.Or(in.Stage, "stage"), Partition: in.Partition,
		Attempt: max(in.Attempt, 1), Params: in.Params, RunParams: in.RunParams, Input: in.Input, Format: in.Format,
		Header: in.Header, Source: in.Source, Out: &Output{s: out}, Log: in.Log,
	}
	if t.Log == nil {
		t.Log = slog.New(slog.DiscardHandler)
	}
	t.rejects, t.Input = runTaskRejects(t, in)   // reject.go
	if err := runTaskResume(t, in); err != nil { // checkpoint.go
		return &TaskResult{Parts: make([][]byte, len(out.parts))}, err
	}
	err := call(ctx, fn, t)
	if rerr := t.rejects.Err(); rerr != nil {
		err = rerr
	}
	res := &TaskResult{Parts: make([][]byte, len(out.parts)), BadRecords: t.rejects.Records(), Checkpoints: t.ckpt.saved}
	for i := range out.parts {
		res.Parts[i] = out.parts[i].Bytes()
	}
	return res, err
}

// call runs fn, turning a panic into an error as the executor does.
func call(ctx context.Context, fn Func, t *Task) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("task panicked: %v", p)
		}
	}()
	return fn(ctx, t)
}

// memOutput is RunTask's output: buffers, with the executor's record
// rules.
type memOutput struct {
	mu    sync.Mutex // partitions may be written concurrently
	parts []bytes.Buffer
}

func (o *memOutput) Write(p []byte) (int, error) { return o.write(0, p) }

func (o *memOutput) Part(r int) io.Writer { return memPart{o, r} }

func (o *memOutput) Parts() int { return len(o.parts) }

func (o *memOutput) Emit(key, value string) error {
	if strings.ContainsAny(key, "\t\n") || strings.ContainsRune(value, '\n') {
		return fmt.Errorf("emit %q: keys must not contain tab or newline, values no newline", key)
	}
	_, err := o.write(PartitionOf(key, len(o.parts)), []byte(key+"\t"+value+"\n"))
	return err
}

func (o *memOutput) write(r int, p []byte) (int, error) {
	if r < 0 || r >= len(o.parts) {
		return 0, fmt.Errorf("output partition %d: the task has %d (0 to %d)", r, len(o.parts), len(o.parts)-1)
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.parts[r].Write(p)
}

type memPart struct {
	o *memOutput
	r int
}

func (w memPart) Write(p []byte) (int, error) { return w.o.write(w.r, p) }
