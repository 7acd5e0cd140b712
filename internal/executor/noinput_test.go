//go:build unix

package executor

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/batchwork/batchwork/internal/executor/feed"
	"github.com/batchwork/batchwork/shared/domain"
)

// A task function reading the records of a count-partitioned stage's task
// (no input prefix, no shuffle: Task.Input is nil) fails its attempt once,
// permanently, with a cause saying the stage has no input, instead of
// panicking into a retried failure.
func TestRecordsWithoutInputFailsTheTaskPermanently(t *testing.T) {
	t.Parallel()
	const counted = `
name: j
stages:
  - name: reduce
    task: reduce
    partitions: {count: 1}
`
	reg := NewRegistry()
	reg.Register("reduce", func(ctx context.Context, t *Task) error {
		return Records(t.Input, func(k, v string) error { return nil })
	})
	cp := &classCP{fakeCP: &fakeCP{spec: mustSpec(t, counted), lease: time.Minute}}
	r := &Runner{CP: cp, Blob: newBlob(), Registry: reg, Log: discard(), HeartbeatEvery: time.Hour}
	r.Handle(context.Background(), feed.Delivery{Body: "j1/0/0"}, nil)
	_, commits, fails := cp.snapshot()
	if len(fails) != 1 || len(commits) != 0 {
		t.Fatalf("commits %v, fails %v; want one failure", commits, fails)
	}
	if cp.classes[0] != domain.ClassPermanent {
		t.Errorf("class %q (cause %q), want %q", cp.classes[0], cp.causes[0], domain.ClassPermanent)
	}
	if !strings.Contains(cp.causes[0], "stage has no input") || strings.Contains(cp.causes[0], "panic") {
		t.Errorf("cause %q; want it to say the stage has no input, without a panic", cp.causes[0])
	}
	if !errors.Is(Records(nil, nil), ErrNoInput) {
		t.Error("Records(nil) is not ErrNoInput")
	}
}
