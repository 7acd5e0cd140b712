package integration

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/batchwork/batchwork/shared/batchwork"
	"github.com/batchwork/batchwork/shared/tracing"
	sm "github.com/batchwork/batchwork/statemachine"
)

// The console's failed-task row shows the task's trace id, linked to the
// operator's trace viewer (BATCHWORK_TRACE_URL with {traceId}): the id is
// the job's trace, the one its submit span started.
//
// Not parallel: the tracer provider is the process's.
func TestConsoleLinksATasksTrace(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	defer tracing.Install(tp, tp.ForceFlush)()
	wd := startBrowser(t)

	reg := batchwork.NewRegistry()
	reg.Register("ct.fail", func(ctx context.Context, tk *batchwork.Task) error {
		if tk.Partition == 1 {
			return batchwork.Permanent(errors.New("injected: corrupt"))
		}
		_, err := fmt.Fprintln(tk.Out, "ok")
		return err
	})
	e := newEnv(t, reg, envOptions{})
	e.cliVars = map[string]string{"BATCHWORK_TRACE_URL": "https://traces.example.com/trace/{traceId}?from=console"}
	consoleURL := startConsole(t, e, "tester")
	id := e.submitAs("tester", "console-traces", []byte(`{"name":"traced","stages":[{"name":"s","task":"ct.fail",
		"partitions":{"count":2},"toleratedFailures":{"count":1}}]}`))
	if st := e.waitJobAs("tester", id, time.Minute); st.State != string(sm.JobSucceeded) {
		t.Fatalf("job %s (%s); want SUCCEEDED with a tolerated failure", st.State, st.Error)
	}
	var trace string
	for _, s := range exp.GetSpans() {
		if v, _ := spanAttr(s, tracing.JobKey); s.Name == "batchwork.submit" && v.AsString() == id {
			trace = s.SpanContext.TraceID().String()
		}
	}
	if trace == "" {
		t.Fatalf("no submit span for job %s", id)
	}

	wd.navigate(consoleURL + "#/job/" + id)
	var href, shown string
	waitFor(t, 20*time.Second, "the failed task's trace link", func() bool {
		got := wd.script(`const a = document.querySelector('#failed-tasks tr[data-task="s/1"] td.trace a');
			return a ? a.getAttribute('href') + ' ' + a.textContent + ' ' + a.getAttribute('rel') : ''`)
		href, shown, _ = strings.Cut(got, " ")
		return got != ""
	})
	if want := "https://traces.example.com/trace/" + trace + "?from=console"; href != want {
		t.Errorf("trace link %q, want %q", href, want)
	}
	if want := trace[:8] + " noopener noreferrer"; shown != want {
		t.Errorf("trace link text and rel %q, want %q", shown, want)
	}
}
