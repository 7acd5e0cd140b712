package executor

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/batchwork/batchwork/internal/executor/feed"
	"github.com/batchwork/batchwork/shared/domain"
)

// forwardingCP is a fakeCP that forwards messages (control.Service.Forward)
// or fails to.
type forwardingCP struct {
	*fakeCP
	err       error
	forwarded []string
}

func (f *forwardingCP) Forward(_ context.Context, body string, _ time.Duration) error {
	if f.err != nil {
		return f.err
	}
	f.forwarded = append(f.forwarded, body)
	return nil
}

// An executor that receives a task of another size forwards its message
// to that size's queue and deletes it, without claiming; when the forward
// fails, or the control plane cannot forward, it hands the message back,
// so nothing is lost.
func TestWrongSizeIsForwardedElseHandedBack(t *testing.T) {
	sp := `{"name":"j","stages":[{"name":"s","task":"work","resources":{"memory":"4GiB"},"partitions":{"count":1}}]}`
	body := "j1/0/0"
	tests := []struct {
		name       string
		cp         func(*fakeCP) ControlPlane
		wantAction feed.Action
		forwarded  bool
	}{
		{"forwarded", func(f *fakeCP) ControlPlane { return &forwardingCP{fakeCP: f} }, feed.Delete, true},
		{"forward fails", func(f *fakeCP) ControlPlane { return &forwardingCP{fakeCP: f, err: errors.New("throttled")} }, feed.Hide, false},
		{"no forwarder", func(f *fakeCP) ControlPlane { return f }, feed.Hide, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := &fakeCP{spec: mustSpec(t, sp), lease: time.Minute}
			cp := tt.cp(f)
			r := &Runner{CP: cp, Blob: newBlob(), Registry: NewRegistry(), Log: slog.New(slog.NewTextHandler(io.Discard, nil)), Memory: 1 << 30}
			res := r.Handle(context.Background(), feed.Delivery{Body: body}, func(context.Context, time.Duration) error { return nil })
			if res.Action != tt.wantAction || !errors.Is(res.Err, errWrongSize) {
				t.Fatalf("result %+v, want %v with a wrong-size error", res, tt.wantAction)
			}
			if claims, _, _ := f.snapshot(); len(claims) != 0 {
				t.Errorf("claimed %v: a task of another size must not spend an attempt", claims)
			}
			if fc, ok := cp.(*forwardingCP); ok && (len(fc.forwarded) == 1) != tt.forwarded {
				t.Errorf("forwarded %v, want forwarded %v", fc.forwarded, tt.forwarded)
			}
			if res.Action == feed.Hide && res.Delay != handBackDelay {
				t.Errorf("handed back for %s, want %s", res.Delay, handBackDelay)
			}
		})
	}
	// An executor of the task's size runs it.
	f := &fakeCP{spec: mustSpec(t, strings.Replace(sp, "4GiB", "1GiB", 1)), lease: time.Minute}
	r := &Runner{CP: &forwardingCP{fakeCP: f}, Blob: newBlob(), Registry: NewRegistry(), Log: slog.New(slog.NewTextHandler(io.Discard, nil)), Memory: 1 << 30}
	ref, err := domain.ParseTaskRef(body)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.wrongSize(context.Background(), ref, f.spec); err != nil {
		t.Errorf("1GiB executor on a 1GiB task: %v", err)
	}
}
