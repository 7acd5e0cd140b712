package executor

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/batchwork/batchwork/internal/executor/feed"
	"github.com/batchwork/batchwork/internal/executor/output"
	"github.com/batchwork/batchwork/shared/domain"
	"github.com/batchwork/batchwork/shared/tuning"
)

const shuffleOneTask = `{"name":"out","stages":[` +
	`{"name":"s","task":"work","partitions":{"count":1},"shuffle":{"partitions":4}},` +
	`{"name":"r","task":"sink","after":["s"]}]}`

// An attempt's outputs are buffered in memory until it commits, so the
// runner caps them: a write that would take an attempt's buffered outputs
// (all partitions together) past the cap is refused with
// ErrOutputTooLarge and buffers nothing, and the attempt fails with a
// task error naming the cap, even when the function ignores the refusal.
// The process, and every other task in it, carries on.
func TestOutputCap(t *testing.T) {
	t.Parallel()
	const limit = 64
	wantCause := fmt.Sprintf("task output too large: an attempt may buffer at most %d bytes of outputs in memory before publishing them; "+
		"give each task less to write (a smaller splitSize, or more partitions)", limit)
	cases := []struct {
		name  string
		spec  string
		write func(o *output.Output) error // what the task does; its error is returned unless ignore
		// ignore: the task returns nil whatever its writes returned.
		ignore    bool
		wantParts []string // committed outputs; nil: the attempt fails
	}{
		{"exactly the cap", oneTask, func(o *output.Output) error {
			_, err := o.Write([]byte(strings.Repeat("x", limit)))
			return err
		}, false, []string{strings.Repeat("x", limit)}},
		{"one write past the cap", oneTask, func(o *output.Output) error {
			if _, err := o.Write([]byte(strings.Repeat("x", limit-1))); err != nil {
				return err
			}
			_, err := o.Write([]byte("yz"))
			return err
		}, false, nil},
		{"the function ignores the refusal", oneTask, func(o *output.Output) error {
			_, err := o.Write([]byte(strings.Repeat("x", limit+1)))
			return err
		}, true, nil},
		{"a partition's writer", shuffleOneTask, func(o *output.Output) error {
			_, err := o.Part(3).Write([]byte(strings.Repeat("x", limit+1)))
			return err
		}, false, nil},
		{"records spread over partitions add up", shuffleOneTask, func(o *output.Output) error {
			for i := range 20 { // "kN\tv\n": 5 or 6 bytes each, 110 in all
				if err := o.Emit(fmt.Sprintf("k%d", i), "v"); err != nil {
					return err
				}
			}
			return nil
		}, false, nil},
		{"records under the cap", shuffleOneTask, func(o *output.Output) error {
			for i := range 10 { // 50 bytes
				if err := o.Emit(fmt.Sprintf("k%d", i), "v"); err != nil {
					return err
				}
			}
			return nil
		}, false, []string{"k2\tv\nk6\tv\n", "k1\tv\nk5\tv\nk9\tv\n", "k0\tv\nk4\tv\nk8\tv\n", "k3\tv\nk7\tv\n"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			cp := &fakeCP{spec: mustSpec(t, tc.spec), lease: time.Minute}
			b := newBlob()
			var writeErr error
			buffered := -1
			reg := NewRegistry()
			reg.Register("work", func(ctx context.Context, t *Task) error {
				writeErr = tc.write(t.Out)
				buffered = int(t.Out.Buffered())
				if tc.ignore {
					return nil
				}
				return writeErr
			})
			r := &Runner{CP: cp, Blob: b, Registry: reg, Log: discard(), HeartbeatEvery: time.Hour, MaxOutputBytes: limit}
			res := r.Handle(context.Background(), feed.Delivery{Body: "j1/0/0", SentAt: time.Now()}, nil)
			if buffered > limit {
				t.Errorf("%d bytes buffered, want at most the cap (%d)", buffered, limit)
			}
			_, commits, fails := cp.snapshot()
			if tc.wantParts != nil {
				if res.Action != feed.Delete || res.Err != nil || writeErr != nil {
					t.Fatalf("result %+v, write error %v; want the attempt committed", res, writeErr)
				}
				got := committedParts(t, b, "s", len(tc.wantParts))
				if diff := cmp.Diff(tc.wantParts, got); diff != "" {
					t.Errorf("outputs (-want +got):\n%s", diff)
				}
				return
			}
			if !errors.Is(writeErr, output.ErrOutputTooLarge) {
				t.Errorf("the refused write returned %v, want ErrOutputTooLarge", writeErr)
			}
			if len(commits) != 0 || !cmp.Equal(fails, []domain.TaskRef{{Job: "j1"}}) {
				t.Fatalf("commits %v, fails %v; want the attempt failed, not committed", commits, fails)
			}
			if diff := cmp.Diff([]string{wantCause}, cp.causes); diff != "" {
				t.Errorf("recorded cause (-want +got):\n%s", diff)
			}
			if res.Action != feed.Hide || res.Err == nil || res.Err.Error() != wantCause {
				t.Errorf("result %+v, want the retry's hide with the cause", res)
			}
			if n := len(b.Keys("")); n != 0 {
				t.Errorf("%d objects published, want none from a failed attempt", n)
			}
		})
	}
}

// The default cap is the one sized for the Lambda executor's memory.
func TestOutputCapDefault(t *testing.T) {
	t.Parallel()
	if o := (&Runner{}).newOutput(1); o.Limit() != tuning.MaxTaskOutput {
		t.Fatalf("default output cap %d, want tuning.MaxTaskOutput (%d)", o.Limit(), tuning.MaxTaskOutput)
	}
}

// Output.Part(r) for r outside [0, Parts()) is a writer whose writes fail
// with an error naming the partition, as batchwork.RunTask's, never an
// index panic: a task writing from a goroutine of its own (Output's
// methods may be called from several at once) would otherwise take the
// whole executor down, since safeCall recovers only the function's own
// goroutine. The attempt fails even if the function ignores the error.
func TestOutputPartOutOfRangeFailsTheAttempt(t *testing.T) {
	t.Parallel()
	for _, r := range []int{4, -1} {
		t.Run(fmt.Sprint(r), func(t *testing.T) {
			t.Parallel()
			cp := &fakeCP{spec: mustSpec(t, shuffleOneTask), lease: time.Minute}
			b := newBlob()
			reg := NewRegistry()
			var writeErr error
			reg.Register("work", func(ctx context.Context, t *Task) error {
				done := make(chan struct{})
				go func() { // not the function's goroutine: a panic here is not recovered
					defer close(done)
					_, writeErr = t.Out.Part(r).Write([]byte("x\n"))
				}()
				<-done
				return nil // ignores the error
			})
			rn := &Runner{CP: cp, Blob: b, Registry: reg, Log: discard(), HeartbeatEvery: time.Hour}
			rn.Handle(context.Background(), feed.Delivery{Body: "j1/0/0", SentAt: time.Now()}, nil)
			want := fmt.Sprintf("output partition %d: the task has 4 (0 to 3)", r)
			if writeErr == nil || writeErr.Error() != want {
				t.Errorf("write to partition %d: %v, want %q", r, writeErr, want)
			}
			_, commits, fails := cp.snapshot()
			if len(commits) != 0 || len(fails) != 1 || cp.causes[0] != want {
				t.Fatalf("commits %v, fails %v (causes %q); want the attempt failed with %q", commits, fails, cp.causes, want)
			}
		})
	}
}
