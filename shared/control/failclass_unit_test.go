package control

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/batchwork/batchwork/shared/domain"
	"github.com/batchwork/batchwork/shared/spec"
	sm "github.com/batchwork/batchwork/statemachine"
)

// An attempt's error class decides what follows it: a permanent error
// fails the task, stage and job at once with attempts left; a timeout
// retries like an ordinary error; an out-of-memory end retries on the next
// executor size up, within the stage's maxMemory.
func TestFailClassDecidesWhatFollows(t *testing.T) {
	t.Parallel()
	const cause = "boom"
	cases := []struct {
		name        string
		resources   string // the stage's resources, JSON
		maxAttempts int
		earlier     []domain.ErrorClass // attempts that failed before this one
		class       domain.ErrorClass
		wantRetry   bool
		wantKind    domain.AttemptEndKind
		wantErr     string // the task's error (and the attempt end's)
		wantReason  string // the job's error, when the task fails
		wantMemory  spec.Size
	}{
		{name: "a permanent error on attempt 1 of 3 fails the job at once", maxAttempts: 3, class: domain.ClassPermanent,
			wantKind: domain.AttemptPermanent, wantErr: cause,
			wantReason: `stage "s" task 0 failed with a permanent error on attempt 1 of 3: boom`},
		{name: "a plain error on attempt 1 of 3 retries", maxAttempts: 3, class: domain.ClassError,
			wantRetry: true, wantKind: domain.AttemptRetried, wantErr: cause},
		{name: "no class is a plain error", maxAttempts: 3, class: domain.ClassNone,
			wantRetry: true, wantKind: domain.AttemptRetried, wantErr: cause},
		{name: "a timeout with attempts left retries", maxAttempts: 3, class: domain.ClassTimedOut,
			wantRetry: true, wantKind: domain.AttemptTimedOut, wantErr: cause},
		{name: "a timeout on the last attempt fails the job", maxAttempts: 2, earlier: []domain.ErrorClass{domain.ClassTimedOut}, class: domain.ClassTimedOut,
			wantKind: domain.AttemptTimedOut, wantErr: cause, wantReason: `stage "s" task 0 failed after 2 attempts: boom`},
		{name: "out of memory retries on the next size up", resources: `{"memory":"1GiB","maxMemory":"4GiB"}`, maxAttempts: 3, class: domain.ClassOutOfMemory,
			wantRetry: true, wantKind: domain.AttemptOutOfMemory, wantErr: "out of memory at 1GiB; retrying at 2GiB: boom", wantMemory: 2 << 30},
		{name: "a second out of memory climbs again", resources: `{"memory":"1GiB","maxMemory":"4GiB"}`, maxAttempts: 3, earlier: []domain.ErrorClass{domain.ClassOutOfMemory}, class: domain.ClassOutOfMemory,
			wantRetry: true, wantKind: domain.AttemptOutOfMemory, wantErr: "out of memory at 2GiB; retrying at 4GiB: boom", wantMemory: 4 << 30},
		{name: "out of memory at maxMemory retries at the same size", resources: `{"memory":"2GiB","maxMemory":"2GiB"}`, maxAttempts: 3, class: domain.ClassOutOfMemory,
			wantRetry: true, wantKind: domain.AttemptOutOfMemory, wantErr: "out of memory at 2GiB, the stage's maxMemory; retrying at 2GiB: boom", wantMemory: 2 << 30},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			r := newUnitRig(t, func(cfg *Config) { cfg.ExecutorSizes = []spec.Size{1 << 30, 2 << 30, 4 << 30} })
			sp := twoStages(1, c.maxAttempts)
			if c.resources != "" {
				sp = strings.Replace(sp, `"task":"work","partitions":{"count":1}},{"name":"t"`,
					`"task":"work","resources":`+c.resources+`,"partitions":{"count":1}},{"name":"t"`, 1)
			}
			job := r.submit(sp)
			ref := taskRef(job, 0, 0)
			for _, cl := range c.earlier {
				d, err := r.svc.Fail(r.ctx, r.claim(ref), FailParams{Cause: "earlier", Class: cl})
				if err != nil || !d.Retry {
					t.Fatalf("earlier failure: %+v, %v", d, err)
				}
				r.clock.Advance(d.Delay)
			}
			cl := r.claim(ref)
			d, err := r.svc.Fail(r.ctx, cl, FailParams{Cause: cause, Class: c.class})
			if err != nil {
				t.Fatalf("fail: %v", err)
			}
			if d.Retry != c.wantRetry || d.Memory != c.wantMemory {
				t.Fatalf("decision %+v, want retry %v memory %d", d, c.wantRetry, c.wantMemory)
			}
			got := r.task(ref)
			wantClass := c.class
			if wantClass == domain.ClassNone {
				wantClass = domain.ClassError
			}
			if got.ErrorClass != wantClass || got.LastError != c.wantErr || got.Memory != c.wantMemory {
				t.Errorf("task class %q error %q memory %d; want %q %q %d", got.ErrorClass, got.LastError, got.Memory, wantClass, c.wantErr, c.wantMemory)
			}
			end, _ := r.store.AttemptEnd(ref, cl.Task.Attempt)
			if end.Kind != c.wantKind || end.Err != c.wantErr {
				t.Errorf("attempt end %+v, want kind %s error %q", end, c.wantKind, c.wantErr)
			}
			if c.wantRetry {
				r.wantState(ref, sm.TaskReady, sm.StageRunning, sm.JobRunning)
				if c.wantMemory != 0 {
					// The next claim carries the size its executor must have.
					r.clock.Advance(d.Delay)
					if next := r.claim(ref); next.Task.Memory != c.wantMemory {
						t.Errorf("next claim's memory %d, want %d", next.Task.Memory, c.wantMemory)
					}
				}
				return
			}
			r.wantState(ref, sm.TaskFailed, sm.StageFailed, sm.JobFailed)
			if j := r.job(job); j.Error != c.wantReason {
				t.Errorf("job error %q, want %q", j.Error, c.wantReason)
			}
		})
	}
}

// A permanent failure is the holder's: a stale claim cannot fail the task.
func TestFailPermanentIsFenced(t *testing.T) {
	t.Parallel()
	r := newUnitRig(t)
	job := r.submit(twoStages(1, 3))
	ref := taskRef(job, 0, 0)
	cl := r.claim(ref)
	stale := cl
	stale.Task.Token = "not-the-token"
	if _, err := r.svc.Fail(r.ctx, stale, FailParams{Cause: "bad", Class: domain.ClassPermanent}); !errors.Is(err, domain.ErrStaleClaim) {
		t.Fatalf("stale permanent failure: %v, want a stale claim", err)
	}
	if got := r.task(ref); got.State != sm.TaskClaimed {
		t.Fatalf("task %s after a stale permanent failure, want CLAIMED", got.State)
	}
	if _, err := r.svc.Fail(r.ctx, cl, FailParams{Cause: "bad", Class: "bogus"}); err == nil {
		t.Fatal("an unknown class was accepted")
	}
}

func TestParseExecutorSizes(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in      string
		want    []spec.Size
		wantErr bool
	}{
		{"", nil, false},
		{"1GiB, 4GiB,4GiB", []spec.Size{1 << 30, 4 << 30}, false},
		{"10GiB", []spec.Size{10 << 30}, false},
		{"3GiB", nil, true},
		{"4GB", nil, true}, // decimal gigabytes are not an executor size
		{"big", nil, true},
	}
	for _, tt := range tests {
		got, err := ParseExecutorSizes(tt.in)
		if (err != nil) != tt.wantErr || !slices.Equal(got, tt.want) {
			t.Errorf("ParseExecutorSizes(%q) = %v, %v; want %v, error %v", tt.in, got, err, tt.want, tt.wantErr)
		}
	}
}
