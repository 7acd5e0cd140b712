//go:build unix

package executor

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/batchwork/batchwork/internal/executor/feed"
	"github.com/batchwork/batchwork/internal/testdouble"
	"github.com/batchwork/batchwork/shared/control"
	"github.com/batchwork/batchwork/shared/domain"
	"github.com/batchwork/batchwork/shared/lambdatask"
)

// classCP is fakeCP that records failures with their class, as
// control.Service.Fail does.
type classCP struct {
	*fakeCP
	mu      sync.Mutex
	classes []domain.ErrorClass
}

func (c *classCP) Fail(ctx context.Context, cl control.Claim, p control.FailParams) (control.Decision, error) {
	c.mu.Lock()
	c.classes = append(c.classes, p.Class)
	c.mu.Unlock()
	return c.fakeCP.Fail(ctx, cl, p)
}

// An attempt's error reaches the control plane with its class: a stage's
// timeout cancels the function (one that ignores the cancel is abandoned
// after the grace), an exec program's process group is killed at the
// timeout, a permanent error or exit status is permanent, a SIGKILL the
// executor did not send is out of memory.
func TestAttemptErrorClasses(t *testing.T) {
	t.Parallel()
	const timed = `
name: j
stages:
  - name: s
    task: fn
    timeout: 1s
    partitions: {count: 1}
`
	const execTimed = `
name: j
stages:
  - name: s
    exec: [prog]
    timeout: 1s
    partitions: {count: 1}
`
	release := make(chan struct{})
	t.Cleanup(func() { close(release) })
	tests := []struct {
		name      string
		spec      string
		fn        Func
		script    string
		wantClass domain.ErrorClass
		wantCause []string
		within    time.Duration // the attempt must end within this
	}{
		{name: "a function that watches ctx times out", spec: timed, fn: func(ctx context.Context, t *Task) error {
			<-ctx.Done()
			return ctx.Err()
		}, wantClass: domain.ClassTimedOut, wantCause: []string{"timed out after 1s"}, within: 5 * time.Second},
		{name: "a function that returns nil after the cancel still timed out", spec: timed, fn: func(ctx context.Context, t *Task) error {
			<-ctx.Done()
			return nil
		}, wantClass: domain.ClassTimedOut, wantCause: []string{"timed out after 1s"}, within: 5 * time.Second},
		{name: "a hung function is abandoned after the grace", spec: timed, fn: func(ctx context.Context, t *Task) error {
			<-release // ignores ctx
			return nil
		}, wantClass: domain.ClassTimedOut, wantCause: []string{"timed out after 1s", "abandoned"}, within: 5 * time.Second},
		{name: "an exec program is killed at the timeout", spec: execTimed, script: "sleep 1000",
			wantClass: domain.ClassTimedOut, wantCause: []string{"timed out after 1s"}, within: 5 * time.Second},
		{name: "a permanent error", spec: timed, fn: func(ctx context.Context, t *Task) error {
			return fmt.Errorf("record 7: %w", domain.ErrPermanent)
		}, wantClass: domain.ClassPermanent, wantCause: []string{"record 7"}, within: time.Second},
		{name: "a plain error", spec: timed, fn: func(ctx context.Context, t *Task) error {
			return errors.New("flaky")
		}, wantClass: domain.ClassError, wantCause: []string{"flaky"}, within: time.Second},
		{name: "exit status 65 is permanent", spec: execTimed, script: "echo bad input >&2; exit 65",
			wantClass: domain.ClassPermanent, wantCause: []string{"exit code 65", "bad input"}, within: 5 * time.Second},
		{name: "another exit status is retried", spec: execTimed, script: "exit 1",
			wantClass: domain.ClassError, wantCause: []string{"exit code 1"}, within: 5 * time.Second},
		{name: "a SIGKILL the executor did not send is out of memory", spec: execTimed, script: "kill -9 $$",
			wantClass: domain.ClassOutOfMemory, wantCause: []string{"signal: killed (out of memory)"}, within: 5 * time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			reg := NewRegistry()
			if tt.fn != nil {
				reg.Register("fn", tt.fn)
			}
			cp := &classCP{fakeCP: &fakeCP{spec: mustSpec(t, tt.spec), lease: time.Minute}}
			r := &Runner{CP: cp, Blob: newBlob(), Registry: reg, Log: discard(), HeartbeatEvery: time.Hour,
				TimeoutGrace: 300 * time.Millisecond, ExecDir: testdouble.Programs(t, map[string]string{"prog": tt.script})}
			start := time.Now()
			res := r.Handle(context.Background(), feed.Delivery{Body: "j1/0/0"}, nil)
			if took := time.Since(start); took > tt.within {
				t.Errorf("the attempt took %v, want under %v", took, tt.within)
			}
			_, commits, fails := cp.snapshot()
			if len(fails) != 1 || len(commits) != 0 || res.Action != feed.Hide {
				t.Fatalf("commits %v, fails %v, result %+v; want one failure, retried", commits, fails, res)
			}
			if cp.classes[0] != tt.wantClass {
				t.Errorf("class %q, want %q", cp.classes[0], tt.wantClass)
			}
			for _, s := range tt.wantCause {
				if !strings.Contains(cp.causes[0], s) {
					t.Errorf("cause %q does not contain %q", cp.causes[0], s)
				}
			}
		})
	}
}

// A lambda stage's function classes its error in its response (permanent),
// and Lambda reports a function that ran out of memory as
// Runtime.OutOfMemory.
func TestLambdaErrorClasses(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		resp      string
		fnErr     string
		wantClass domain.ErrorClass
		wantCause string
	}{
		{name: "a permanent error", resp: `{"error":"bad record 7","permanent":true}`, wantClass: domain.ClassPermanent, wantCause: "function reported: bad record 7"},
		{name: "a plain error", resp: `{"error":"flaky"}`, wantClass: domain.ClassError, wantCause: "function reported: flaky"},
		{name: "out of memory", fnErr: "Unhandled", resp: `{"errorType":"Runtime.OutOfMemory","errorMessage":"Runtime exited with error: signal: killed"}`,
			wantClass: domain.ClassOutOfMemory, wantCause: "Runtime.OutOfMemory: Runtime exited with error: signal: killed"},
		{name: "another function error", fnErr: "Unhandled", resp: `{"errorType":"Runtime.ExitError","errorMessage":"exit status 2"}`,
			wantClass: domain.ClassError, wantCause: "Runtime.ExitError"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			cp := &classCP{fakeCP: &fakeCP{spec: mustSpec(t, lambdaOne), lease: time.Minute}}
			inv := &fakeInvoker{fn: func(context.Context, lambdatask.Event) ([]byte, string, error) {
				return []byte(tt.resp), tt.fnErr, nil
			}}
			r := &Runner{CP: cp, Blob: newBlob(), Registry: NewRegistry(), Log: discard(), HeartbeatEvery: time.Hour, Lambda: inv}
			r.Handle(context.Background(), feed.Delivery{Body: "j1/0/0"}, nil)
			_, commits, fails := cp.snapshot()
			if len(fails) != 1 || len(commits) != 0 {
				t.Fatalf("commits %v, fails %v; want one failure", commits, fails)
			}
			if cp.classes[0] != tt.wantClass || !strings.Contains(cp.causes[0], tt.wantCause) {
				t.Errorf("class %q cause %q; want %q with %q", cp.classes[0], cp.causes[0], tt.wantClass, tt.wantCause)
			}
		})
	}
}
