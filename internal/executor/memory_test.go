package executor

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/batchwork/batchwork/shared/batch"
	"github.com/batchwork/batchwork/shared/spec"
)

func TestMemoryFromEnv(t *testing.T) {
	tests := []struct {
		env     string
		want    spec.Size
		wantErr string
	}{
		{"", 0, ""},
		{"4GiB", 4 << 30, ""},
		{"1073741824", 1 << 30, ""},
		{"3GiB", 0, "not one of the executor sizes"},
		{"lots", 0, EnvExecutorMemory},
	}
	for _, tt := range tests {
		t.Setenv(EnvExecutorMemory, tt.env)
		got, err := MemoryFromEnv()
		if got != tt.want || (err == nil) != (tt.wantErr == "") || (err != nil && !strings.Contains(err.Error(), tt.wantErr)) {
			t.Errorf("%q: %d, %v; want %d, error with %q", tt.env, got, err, tt.want, tt.wantErr)
		}
	}
}

// The watchdog of an executor of a known size stops the attempts running
// once the process nears its size, as out of memory, so the attempt
// climbs to a larger executor instead of the runtime being killed.
func TestMemoryWatchdogStopsTheAttemptAsOutOfMemory(t *testing.T) {
	var used atomic.Uint64
	used.Store(100 << 20)
	old := processMemory
	processMemory = used.Load
	t.Cleanup(func() { processMemory = old })

	const job = `
name: j
stages:
  - name: s
    task: fn
    partitions: {count: 1}
`
	reg := NewRegistry()
	reg.Register("fn", func(ctx context.Context, t *Task) error {
		used.Store(1000 << 20) // past 95% of 1GiB
		<-ctx.Done()
		return ctx.Err()
	})
	cp := &classCP{fakeCP: &fakeCP{spec: mustSpec(t, job), lease: time.Minute}}
	r := &Runner{CP: cp, Blob: &memBlob{}, Registry: reg, Log: discard(), HeartbeatEvery: time.Hour, MemoryLimit: 1 << 30}
	done := make(chan Result, 1)
	go func() { done <- r.Handle(context.Background(), Delivery{Body: "j1/0/0"}, nil) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("the watchdog did not stop the attempt")
	}
	if len(cp.classes) != 1 || cp.classes[0] != batch.ClassOutOfMemory || !strings.Contains(cp.causes[0], "of its 1024 MiB") {
		t.Fatalf("classes %v causes %v; want one out-of-memory failure", cp.classes, cp.causes)
	}
}

func TestLambdaMemoryLimit(t *testing.T) {
	for env, want := range map[string]spec.Size{"": 0, "1024": 1 << 30, "10240": 10 << 30, "x": 0} {
		got := LambdaMemoryLimit(func(k string) string {
			if k == "AWS_LAMBDA_FUNCTION_MEMORY_SIZE" {
				return env
			}
			return ""
		})
		if got != want {
			t.Errorf("%q: %d, want %d", env, got, want)
		}
	}
}
