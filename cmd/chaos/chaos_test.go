package main

import (
	"context"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/batchwork/batchwork/internal/testtier"
)

// TestChaos is make chaos at the size make test affords: one job of each
// workload kind (12), the same fault rates, a kill a second. It fails on
// any violation, and never skips: an emulator that cannot start fails it.
func TestChaos(t *testing.T) {
	testtier.SkipUnderShort(t, "the AWS emulator and a chaos run")
	o := defaultOptions()
	o.Jobs = len(kinds)
	o.Timeout = 5 * time.Minute
	dir, err := os.MkdirTemp("", "batchwork-chaos-test-")
	if err != nil {
		t.Fatal(err)
	}
	// Kept when the test fails: the processes' logs are the evidence.
	t.Cleanup(func() {
		if !t.Failed() {
			os.RemoveAll(dir)
		}
	})
	o.LogDir = dir
	o.Progress = &testWriter{t: t}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	rep, err := run(ctx, o)
	if err != nil {
		t.Fatalf("chaos run (seed %d, logs in %s): %v", o.Seed, dir, err)
	}
	var b strings.Builder
	rep.Print(&b)
	t.Log(b.String())
	if len(rep.Violations) > 0 {
		t.Fatalf("%d violations (seed %d); logs in %s", len(rep.Violations), o.Seed, dir)
	}
	if rep.Kills == 0 || rep.Check.Compared == 0 || rep.Check.Commits == 0 {
		t.Fatalf("the run proved nothing: %d kills, %d outputs compared, %d commits reported", rep.Kills, rep.Check.Compared, rep.Check.Commits)
	}
	if rep.Reran != rep.Check.Reruns {
		t.Fatalf("the harness made %d reruns, the checker checked %d", rep.Reran, rep.Check.Reruns)
	}
}

// testWriter logs each line written to it.
type testWriter struct {
	mu sync.Mutex
	t  *testing.T
}

func (w *testWriter) Write(b []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.t.Log(strings.TrimRight(string(b), "\n"))
	return len(b), nil
}
