package feed

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/batchwork/batchwork/shared/control"
)

// The report is the peak since the previous one, so a spike between two
// beats is reported, once.
func TestMemSamplerReportsThePeakSinceTheLastBeat(t *testing.T) {
	t.Parallel()
	var cur uint64
	m := &memSampler{limit: 1 << 30, read: func() uint64 { return cur }}
	for _, v := range []uint64{100 << 20, 900 << 20, 200 << 20} {
		cur = v
		m.sample()
	}
	if r := m.take(); r.Used != 900<<20 || r.Limit != 1<<30 {
		t.Fatalf("report %+v, want the 900 MiB peak of 1 GiB", r)
	}
	if r := m.take(); r.Used != 200<<20 {
		t.Fatalf("next report %+v, want the current 200 MiB (the spike was reported)", r)
	}
}

type memLive struct {
	mu      sync.Mutex
	plain   int
	reports []control.MemoryReport
}

func (l *memLive) ExecutorAlive(context.Context, string) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.plain++
	return nil
}

func (l *memLive) ExecutorAliveMemory(_ context.Context, _ string, m control.MemoryReport) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.reports = append(l.reports, m)
	return nil
}

// plainLive keeps liveness records but takes no memory reports.
type plainLive struct{ n, asked int }

func (l *plainLive) ExecutorAlive(context.Context, string) error { l.n++; return nil }

func (l *plainLive) ExecutorAliveMemory(context.Context, string, control.MemoryReport) error {
	l.asked++
	return fmt.Errorf("plain liveness: memory reports: %w", ErrUnsupported)
}

// A beat carries the memory report when the control plane takes one and
// the executor knows its limit; otherwise it is the plain renewal. A
// control plane that answers ErrUnsupported to a report is asked once:
// that beat and every later one are plain renewals.
func TestBeatCarriesTheMemoryReport(t *testing.T) {
	oldLimit, oldUsed := memoryLimit, memoryUsed
	t.Cleanup(func() { memoryLimit, memoryUsed = oldLimit, oldUsed })
	memoryLimit = func() uint64 { return 1 << 30 }
	memoryUsed = func() uint64 { return 700 << 20 }
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	ml := &memLive{}
	if err := beatFunc(ctx, ml, "x")(ctx); err != nil {
		t.Fatal(err)
	}
	if ml.plain != 0 || len(ml.reports) != 1 || ml.reports[0] != (control.MemoryReport{Used: 700 << 20, Limit: 1 << 30}) {
		t.Fatalf("beats: %d plain, reports %+v; want one report of 700 MiB of 1 GiB", ml.plain, ml.reports)
	}
	pl := &plainLive{}
	beat := beatFunc(ctx, pl, "x")
	for range 3 {
		if err := beat(ctx); err != nil {
			t.Fatalf("a control plane without reports: %v", err)
		}
	}
	if pl.n != 3 || pl.asked != 1 {
		t.Fatalf("a control plane without reports: %d plain beats, asked for a report %d times; want 3 plain beats, asked once", pl.n, pl.asked)
	}
	memoryLimit = func() uint64 { return 0 }
	ml = &memLive{}
	if err := beatFunc(ctx, ml, "x")(ctx); err != nil || ml.plain != 1 || len(ml.reports) != 0 {
		t.Fatalf("no known limit: %d plain, reports %+v; want a plain beat", ml.plain, ml.reports)
	}
}
