package control

import (
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/batchwork/batchwork/shared/tracing"
)

// A task message the sweep sends again (a lost message's, or the retry's
// after a lapsed claim) carries the task's traceparent, built from the
// job's trace and the span id its record holds, as materialization's
// did: the attempt it starts joins the task's trace from its message.
//
// Not parallel: the tracer provider is the process's.
func TestResentMessagesCarryTheTasksTrace(t *testing.T) {
	tp := sdktrace.NewTracerProvider()
	defer tracing.Install(tp, tp.ForceFlush)()
	r := newUnitRig(t)
	job := r.submit(oneStage(1, 3, ""))
	ref := taskRef(job, 0, 0)
	sent := r.queue.Drain()
	if len(sent) != 1 || sent[0].Trace == "" {
		t.Fatalf("materialization sent %+v, want one message with a trace", sent)
	}
	trace := sent[0].Trace
	// The claim writes the span its message carried into the record.
	c, err := r.svc.Claim(tracing.WithCarried(r.ctx, trace), ref)
	if err != nil {
		t.Fatal(err)
	}
	if c.Trace != trace {
		t.Fatalf("claim trace %q, want the message's %q", c.Trace, trace)
	}

	r.clock.Advance(2 * unitLease) // the claim lapses: expired, its retry's message sent
	if c := r.sweep(); c.Expired != 1 {
		t.Fatalf("sweep counts %+v, want one expired", c)
	}
	if got := r.queue.Drain(); len(got) != 1 || got[0].Trace != trace {
		t.Errorf("the retry's message %+v, want one carrying %q", got, trace)
	}
	// That message is lost: the sweep sends another after StuckAfter.
	r.clock.Advance(unitTimings.StuckAfter)
	if c := r.sweep(); c.Requeued != 1 {
		t.Fatalf("sweep counts %+v, want one requeued", c)
	}
	if got := r.queue.Drain(); len(got) != 1 || got[0].Trace != trace {
		t.Errorf("the resent message %+v, want one carrying %q", got, trace)
	}
}

// The message a skewed stage's last piece sends its combine task carries a
// span in the job's trace, so the claim it wins writes a span into the
// combine task's record and its attempts join the job's trace.
//
// Not parallel: the tracer provider is the process's.
func TestTheCombineTasksWakeCarriesTheJobsTrace(t *testing.T) {
	tp := sdktrace.NewTracerProvider()
	defer tracing.Install(tp, tp.ForceFlush)()
	r := newUnitRig(t)
	job, st := r.hotJob(1)
	jobTrace := tracing.TraceID(r.queue.Drain()[0].Trace)
	if jobTrace == "" {
		t.Fatal("the job's messages carry no trace")
	}
	for p := 4; p < st.Total; p++ {
		r.commit(r.claim(taskRef(job, 1, p)), 1)
	}
	combine := taskRef(job, 1, 1)
	var wake string
	for _, m := range r.queue.Drain() {
		if m.Body == combine.String() && m.Delay == 0 {
			wake = m.Trace
		}
	}
	if tracing.TraceID(wake) != jobTrace || tracing.SpanID(wake) == "" {
		t.Fatalf("the wake's message carries %q, want a span in the job's trace %s", wake, jobTrace)
	}
	c, err := r.svc.Claim(tracing.WithCarried(r.ctx, wake), combine)
	if err != nil {
		t.Fatal(err)
	}
	if c.Trace != wake {
		t.Errorf("the combine task's claim trace %q, want the wake's %q", c.Trace, wake)
	}
}
