package main

import (
	"context"
	"flag"
	"fmt"
	"sync/atomic"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/batchwork/batchwork/cmd/bench/emuprobe"
	"github.com/batchwork/batchwork/internal/loadmodel"
	"github.com/batchwork/batchwork/shared/control"
	"github.com/batchwork/batchwork/shared/runner"
	"github.com/batchwork/batchwork/shared/tracing"
)

var traced = flag.Bool("tracing", true, "run the no-op job once more with tracing on (the real SDK, an in-process exporter) and print its overhead")

// countingExporter is an exporter that keeps nothing: what tracing costs
// the processes (spans, their batching, the context carried in records
// and messages) without a collector's network time.
type countingExporter struct{ spans atomic.Int64 }

func (e *countingExporter) ExportSpans(_ context.Context, s []sdktrace.ReadOnlySpan) error {
	e.spans.Add(int64(len(s)))
	return nil
}
func (e *countingExporter) Shutdown(context.Context) error { return nil }

// perTask is one run's cost: AWS requests and the bench process's CPU
// (control plane and executors) per task.
type perTask struct {
	requests, cpuMicros float64
	elapsed             time.Duration
}

func (p perTask) String() string {
	return fmt.Sprintf("%.2f AWS requests, %.0f µs CPU per task (%.1fs)", p.requests, p.cpuMicros, p.elapsed.Seconds())
}

func requestsOf(snap loadmodel.Snapshot) int {
	n := 0
	for _, v := range snap.Totals().Requests {
		n += v
	}
	return n
}

// tracingOverhead runs the throughput job once more with the OpenTelemetry
// SDK installed (always-on sampling, a batching processor, as deployed)
// and prints both runs' requests and CPU per task. off is the untraced
// run's, measured the same way just before (its requests without the
// settling sweep's).
func tracingOverhead(ctx context.Context, r *runner.Runner, watcher *control.Service, rec *loadmodel.Recorder, tasks int, off perTask) error {
	exp := &countingExporter{}
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithSampler(sdktrace.AlwaysSample()))
	restore := tracing.Install(tp, tp.ForceFlush)
	defer func() { restore(); _ = tp.Shutdown(ctx) }()

	rec.Reset()
	cpu0 := emuprobe.CPUTime()
	body := fmt.Appendf(nil, `{"name":"bench-traced","stages":[
	  {"name":"fanout","task":"noop","partitions":{"count":%d}},
	  {"name":"fanin","task":"noop","after":["fanout"],"partitions":{"count":1}}]}`, tasks)
	st, elapsed, err := runJob(ctx, r, watcher, "bench-traced", body, 20*time.Minute, 250*time.Millisecond)
	if err != nil {
		return err
	}
	if err := tp.ForceFlush(ctx); err != nil {
		return err
	}
	cpu := emuprobe.CPUTime() - cpu0
	total := tasks + 1
	on := perTask{requests: float64(requestsOf(rec.Snapshot())) / float64(total), cpuMicros: float64(cpu.Microseconds()) / float64(total), elapsed: elapsed}
	fmt.Printf("tracing overhead, job of %d no-op tasks (%s traced; the traced job runs second, on a larger table):\n", total, st.State)
	fmt.Printf("  tracing off: %s\n", off)
	fmt.Printf("  tracing on:  %s; %d spans (%.1f per task) to an in-process exporter\n", on, exp.spans.Load(), float64(exp.spans.Load())/float64(total))
	return nil
}
