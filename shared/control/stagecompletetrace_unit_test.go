package control

import (
	"testing"

	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/batchwork/batchwork/shared/tracing"
	sm "github.com/batchwork/batchwork/statemachine"
)

// A stage's completion is one span in its job's trace, however many
// callers race for it: here the last commit finds the stage's counters at
// zero, and before it moves the stage the sweep completes it (and ends the
// job). The commit's transition then loses, and its attempt is no
// completion to show.
//
// Not parallel: the tracer provider is the process's.
func TestRacedStageCompletionIsOneSpan(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	defer tracing.Install(tp, tp.ForceFlush)()
	r := newUnitRig(t)
	job := r.submit(oneStage(1, 1, ""))
	c := r.claim(taskRef(job, 0, 0))
	r.output(c, 1)

	swept := false
	r.store.SetFaults(func(method string) error {
		if method != "StageProgress" || swept {
			return nil
		}
		swept = true
		r.clock.Advance(unitTimings.StartGrace + unitTimings.CheckEvery)
		r.sweep()
		if st := r.stage(job, 0); st.State != sm.StageCompleted {
			t.Fatalf("the sweep left the stage %s, want it completed before the commit's transition", st.State)
		}
		return nil
	}, nil)
	r.commit(c, 1)
	if !swept {
		t.Fatal("the commit never read the stage's progress")
	}
	if j := r.job(job); j.State != sm.JobSucceeded {
		t.Fatalf("job %s, want SUCCEEDED", j.State)
	}
	var spans tracetest.SpanStubs
	for _, s := range exp.GetSpans() {
		if s.Name == "batchwork.stage.complete" {
			spans = append(spans, s)
		}
	}
	if len(spans) != 1 {
		t.Fatalf("%d batchwork.stage.complete spans, want 1", len(spans))
	}
	if spans[0].Status.Code == codes.Error {
		t.Fatalf("the completion's span failed: %s", spans[0].Status.Description)
	}
}
