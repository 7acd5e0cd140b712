package executor

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/batchwork/batchwork/internal/executor/feed"
)

// A Go task reads its job's run parameters from the claim's spec, as
// resolved at submit, beside its partition's own parameters.
func TestGoTaskRunParams(t *testing.T) {
	t.Parallel()
	sp := mustSpec(t, `{"name": "j", "params": {"date": null, "lang": "en"},
		"stages": [{"name": "s", "task": "work", "partitions": {"count": 1, "params": [{"shard": "3"}]}}]}`)
	resolved, err := sp.Resolve(map[string]string{"date": "2026-03-01"})
	if err != nil {
		t.Fatal(err)
	}
	cp := &fakeCP{spec: resolved, lease: time.Minute}
	var run, part map[string]string
	reg := NewRegistry()
	reg.Register("work", func(_ context.Context, t *Task) error {
		run, part = t.RunParams, t.Params
		return nil
	})
	r := &Runner{CP: cp, Blob: newBlob(), Registry: reg, Log: discard(), HeartbeatEvery: time.Hour}
	if res := r.Handle(context.Background(), feed.Delivery{Body: "j1/0/0"}, nil); res.Err != nil {
		t.Fatalf("Handle: %+v", res)
	}
	if d := cmp.Diff(map[string]string{"date": "2026-03-01", "lang": "en"}, run); d != "" {
		t.Errorf("RunParams (-want +got):\n%s", d)
	}
	if d := cmp.Diff(map[string]string{"shard": "3"}, part); d != "" {
		t.Errorf("Params (-want +got):\n%s", d)
	}
}
