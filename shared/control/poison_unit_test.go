package control

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/batchwork/batchwork/internal/testdouble"
	"github.com/batchwork/batchwork/shared/dynamo"
	"github.com/batchwork/batchwork/shared/queue"
	"github.com/batchwork/batchwork/shared/split"
	sm "github.com/batchwork/batchwork/statemachine"
	"github.com/google/go-cmp/cmp"
)

// poisonBlob is the fake bucket with the listing of one prefix poisoned:
// it fails (as a throttled S3 would), panics (standing in for the
// out-of-memory crash no handler sees), hangs until its context ends, or
// is stuck whatever its context says, until released.
type poisonBlob struct {
	*testdouble.Blob
	prefix string

	mu      sync.Mutex
	mode    string // "fail", "panic", "hang" or "stuck"
	calls   int
	release chan struct{}
}

var errThrottled = errors.New("SlowDown (injected)")

func (p *poisonBlob) set(mode string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.mode = mode
}

func (p *poisonBlob) poisonedCalls() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.calls
}

func (p *poisonBlob) List(ctx context.Context, bucket, prefix string) ([]split.Object, error) {
	if !strings.HasPrefix(prefix, p.prefix) {
		return p.Blob.List(ctx, bucket, prefix)
	}
	p.mu.Lock()
	mode := p.mode
	p.calls++
	p.mu.Unlock()
	switch mode {
	case "fail":
		return nil, errThrottled
	case "panic":
		panic("runtime: out of memory (injected)")
	case "hang":
		<-ctx.Done()
		return nil, ctx.Err()
	case "stuck":
		<-p.release
		return nil, errors.New("released")
	}
	return p.Blob.List(ctx, bucket, prefix)
}

// One poisoned record must not cost every other owner their sweep: with a
// stage whose planning panics, hangs or is stuck, the same run still
// redrives dead letters and repairs other jobs, the poisoned stage's next
// look moves back, and further back each time it crashes again.
func TestSweepSurvivesPoisonedStage(t *testing.T) {
	t.Parallel()
	cases := []struct {
		mode    string
		wantErr error
	}{
		{"panic", ErrStepPanicked},
		{"hang", context.DeadlineExceeded},
		{"stuck", ErrStepOverBudget},
	}
	for _, c := range cases {
		t.Run(c.mode, func(t *testing.T) {
			t.Parallel()
			r := newUnitRig(t, func(cfg *Config) { cfg.Queues.DLQ = "q-dlq" })
			poison := &poisonBlob{Blob: r.blob, prefix: "poison/", mode: "fail", release: make(chan struct{})}
			t.Cleanup(func() { close(poison.release) }) // before the rig checks the records
			svc := New(r.svc.cfg, r.store, r.queue, poison, testLogger(t))
			svc.Now, svc.Jitter = r.clock.Now, r.svc.Jitter
			r.svc = svc

			// The poisoned job's planning is throttled at submit, so its
			// stage waits for the sweep, which finds the poison.
			r.blob.Put("in-bucket", "poison/a", []byte("line\n"))
			bad := r.submit(`{"name":"bad","lease":"10s","stages":[{"name":"s","task":"work","partitions":{"input":{"prefix":"s3://in-bucket/poison/"}}}]}`)
			if st := r.stage(bad, 0); st.State != sm.StageRunning || st.Materialized {
				t.Fatalf("poisoned stage %+v, want RUNNING and not materialized", st)
			}
			poison.set(c.mode)
			// Another owner's job: its message is lost, and a copy sits in
			// the dead-letter queue.
			good := r.submit(oneStage(2, 3, ""))
			r.queue.Drain()
			lost, dead := taskRef(good, 0, 0), taskRef(good, 0, 1)
			r.queue.Push("q-dlq", queue.Message{ID: "m1", Receipt: "r1", Body: dead.String()})
			r.clock.Advance(unitTimings.StuckAfter)

			now := r.clock.Now()
			ctx, cancel := context.WithTimeout(r.ctx, 3*time.Second)
			defer cancel()
			counts, err := r.svc.Sweep(ctx)
			if !errors.Is(err, c.wantErr) || counts.Errors != 1 {
				t.Fatalf("sweep: %v, counts %+v; want one error, %v", err, counts, c.wantErr)
			}
			if poison.poisonedCalls() != 2 { // the submit's and this sweep's
				t.Fatalf("poisoned listing called %d times, want 2", poison.poisonedCalls())
			}
			if counts.DeadLettered != 1 || counts.Requeued < 1 {
				t.Errorf("counts %+v: want the dead letter redriven and the lost message resent", counts)
			}
			sent := bodyCounts(r.queue.Drain())
			if sent[lost.String()] == 0 || sent[dead.String()] == 0 {
				t.Errorf("messages sent %v, want both of the good job's tasks", sent)
			}
			// The stage started at the submit, StuckAfter ago: its next look
			// is as far off.
			first := r.store.DueOf(stageItem(bad, 0))
			if want := now.Add(unitTimings.StuckAfter); !first.Equal(want) {
				t.Errorf("poisoned stage due %v, want %v", first, want)
			}
			// The next runs leave it alone until then, and work.
			for range 2 {
				if _, err := r.svc.Sweep(r.ctx); err != nil {
					t.Errorf("a sweep before the poisoned stage is due: %v", err)
				}
			}
			if poison.poisonedCalls() != 2 {
				t.Errorf("poisoned listing called %d times before it was due again", poison.poisonedCalls())
			}
			// Due again, it is tried again, and pushed back further.
			r.clock.Advance(first.Sub(r.clock.Now()))
			ctx2, cancel2 := context.WithTimeout(r.ctx, 3*time.Second)
			defer cancel2()
			if _, err := r.svc.Sweep(ctx2); !errors.Is(err, c.wantErr) {
				t.Fatalf("sweep of the poisoned stage again: %v", err)
			}
			second := r.store.DueOf(stageItem(bad, 0))
			if gap, prev := second.Sub(r.clock.Now()), first.Sub(now); gap <= prev {
				t.Errorf("the poisoned stage's wait went from %v to %v; want it to grow", prev, gap)
			}
			if j := r.job(bad); j.State != sm.JobRunning {
				t.Errorf("poisoned job %s, want RUNNING: a crash is no verdict on its input", j.State)
			}
		})
	}
}

// A step's counts reach the run's only through add, which must not drop
// any.
func TestSweepCountsAdd(t *testing.T) {
	t.Parallel()
	var one, sum SweepCounts
	v := reflect.ValueOf(&one).Elem()
	for i := range v.NumField() {
		v.Field(i).SetInt(int64(i + 1))
	}
	sum.Add(one)
	sum.Add(one)
	want := one
	w := reflect.ValueOf(&want).Elem()
	for i := range w.NumField() {
		w.Field(i).SetInt(2 * int64(i+1))
	}
	if diff := cmp.Diff(want, sum); diff != "" {
		t.Errorf("sum (-want +got):\n%s", diff)
	}
}

// A stage's materialization stops between chunks while the next chunk
// still fits in the sweep's budget for it, and leaves the rest for the
// next run, rather than run out of time inside a chunk (an error) or be
// left behind by the sweep.
func TestMaterializeStopsWithinItsBudget(t *testing.T) {
	t.Parallel()
	const n = 40
	r := newUnitRig(t, func(cfg *Config) { cfg.ChunkTasks = 2 })
	// The submit's start is lost, so the sweep starts the stage.
	r.store.SetFaults(testdouble.FailOnceWith("StageTransition", dynamo.ErrContention), nil)
	job := r.submit(oneStage(n, 3, ""))
	r.store.SetFaults(func(m string) error {
		if m == "TaskPutMany" {
			time.Sleep(20 * time.Millisecond) // a slow table
		}
		return nil
	}, nil)
	r.clock.Advance(unitTimings.StartGrace)
	ctx, cancel := context.WithTimeout(r.ctx, 900*time.Millisecond)
	defer cancel()
	if c, err := r.svc.Sweep(ctx); err != nil || c.StagesFixed != 1 {
		t.Fatalf("sweep: %v, counts %+v; want the stage started without an error", err, c)
	}
	st := r.stage(job, 0)
	if st.Materialized || st.Enqueued == 0 || st.Enqueued >= n || st.Enqueued%2 != 0 {
		t.Fatalf("stage after a short run: %+v; want some whole chunks enqueued", st)
	}
	if due := r.store.DueOf(stageItem(job, 0)); !due.Equal(r.clock.Now()) {
		t.Errorf("partly materialized stage due %v, want now (%v)", due, r.clock.Now())
	}
	r.store.SetFaults(nil, nil)
	r.sweep()
	if st := r.stage(job, 0); !st.Materialized || st.Enqueued != n {
		t.Fatalf("stage after the next run: %+v, want all %d tasks", st, n)
	}
	if counts := bodyCounts(r.queue.Drain()); len(counts) != n {
		t.Errorf("%d tasks have messages, want %d", len(counts), n)
	}
}
