package integration

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/batchwork/batchwork/shared/batchwork"
	"github.com/batchwork/batchwork/shared/tracing"
)

func spanAttr(s tracetest.SpanStub, k attribute.Key) (attribute.Value, bool) {
	for _, a := range s.Attributes {
		if a.Key == k {
			return a.Value, true
		}
	}
	return attribute.Value{}, false
}

// One job is one trace: its submit span is the root; each stage's
// materialization and completion are its children; each task's span is a
// child of its stage's materialization, and every attempt's steps (the
// queue wait, the claim, the run, the output writes, the commit) are
// children of its task's span, in that order, whichever attempt runs them:
// a retried task's second attempt joins the same trace under the same
// span, which its record holds. Stage a's tasks are unwritten at
// materialization (their messages carry the trace and the claim writes
// it); stage b's single task is written with its trace.
//
// Not parallel: the tracer provider is the process's, so no other test
// runs while this one has it.
func TestTracesFollowATask(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	defer tracing.Install(tp, tp.ForceFlush)()

	reg := batchwork.NewRegistry()
	reg.Register("traced", func(ctx context.Context, tk *batchwork.Task) error {
		if tk.Partition == 1 && tk.Attempt == 1 {
			return errors.New("connection reset")
		}
		_, err := fmt.Fprintln(tk.Out, "ok")
		return err
	})
	e := newEnv(t, reg, envOptions{})
	id := e.submit("traced", []byte(`{"name":"traced","retry":{"maxAttempts":3,"backoff":"1ms"},"stages":[
		{"name":"a","task":"traced","partitions":{"count":2}},
		{"name":"b","task":"traced","after":["a"],"partitions":{"count":1}}]}`))
	if st := e.waitJob(id, time.Minute); st.State != "SUCCEEDED" {
		t.Fatalf("job %s ended %s (%s)", id, st.State, st.Error)
	}

	// The last stage's completion span ends after the job's end, which it
	// writes, and the last commit's span after that, when the commit
	// returns to its executor: wait for both (three commits: a/0, a/1's
	// second attempt, b/0).
	var spans tracetest.SpanStubs
	var root tracetest.SpanStub
	for deadline := time.Now().Add(30 * time.Second); ; {
		spans = exp.GetSpans()
		for _, s := range spans {
			if v, _ := spanAttr(s, tracing.JobKey); s.Name == "batchwork.submit" && v.AsString() == id {
				root = s
			}
		}
		completed, commits := false, 0
		for _, s := range spans {
			if s.SpanContext.TraceID() != root.SpanContext.TraceID() {
				continue
			}
			v, _ := spanAttr(s, tracing.StageKey)
			completed = completed || (s.Name == "batchwork.stage.complete" && v.AsString() == "b")
			if s.Name == "batchwork.commit" {
				commits++
			}
		}
		if root.SpanContext.IsValid() && completed && commits >= 3 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("job %s's spans never all ended (submit span %v, stage b complete %v, %d of 3 commits); spans: %d",
				id, root.SpanContext.IsValid(), completed, commits, len(spans))
		}
		time.Sleep(50 * time.Millisecond)
	}
	if root.Parent.IsValid() {
		t.Fatalf("the submit span of job %s has a parent", id)
	}
	trace := root.SpanContext.TraceID()
	var mine tracetest.SpanStubs
	for _, s := range spans {
		if s.SpanContext.TraceID() == trace {
			mine = append(mine, s)
		}
	}
	byName := func(name, stage string) []tracetest.SpanStub {
		var out []tracetest.SpanStub
		for _, s := range mine {
			if v, _ := spanAttr(s, tracing.StageKey); s.Name == name && v.AsString() == stage {
				out = append(out, s)
			}
		}
		return out
	}
	for _, stage := range []string{"a", "b"} {
		for _, name := range []string{"batchwork.materialize", "batchwork.stage.complete"} {
			got := byName(name, stage)
			if len(got) != 1 || got[0].Parent.SpanID() != root.SpanContext.SpanID() {
				t.Fatalf("stage %s: %d %s spans, want 1 under the submit span", stage, len(got), name)
			}
		}
	}
	records := append(stageTasks(t, e, id, 0), stageTasks(t, e, id, 1)...)
	steps := []string{"batchwork.queue.wait", "batchwork.claim", "batchwork.run", "batchwork.outputs", "batchwork.commit"}
	for _, tc := range []struct {
		stage     string
		partition int
		record    int // index in records
		attempts  map[int][]string
	}{
		{"a", 0, 0, map[int][]string{1: steps}},
		{"a", 1, 1, map[int][]string{1: steps[:3], 2: steps}},
		{"b", 0, 2, map[int][]string{1: steps}},
	} {
		mat := byName("batchwork.materialize", tc.stage)[0]
		var task tracetest.SpanStub
		for _, s := range byName("batchwork.task", tc.stage) {
			if v, _ := spanAttr(s, tracing.PartitionKey); int(v.AsInt64()) == tc.partition {
				task = s
			}
		}
		if !task.SpanContext.IsValid() || task.Parent.SpanID() != mat.SpanContext.SpanID() {
			t.Fatalf("%s/%d: no task span under its stage's materialization", tc.stage, tc.partition)
		}
		if rec := records[tc.record]; rec.TraceSpan != task.SpanContext.SpanID().String() {
			t.Errorf("%s/%d: the record's span %q, want its task span's %s", tc.stage, tc.partition, rec.TraceSpan, task.SpanContext.SpanID())
		}
		got := map[int][]tracetest.SpanStub{}
		for _, s := range mine {
			if s.Parent.SpanID() != task.SpanContext.SpanID() {
				continue
			}
			a, ok := spanAttr(s, tracing.AttemptKey)
			if !ok {
				t.Fatalf("%s/%d: span %s has no attempt", tc.stage, tc.partition, s.Name)
			}
			got[int(a.AsInt64())] = append(got[int(a.AsInt64())], s)
		}
		if len(got) != len(tc.attempts) {
			t.Fatalf("%s/%d: spans of %d attempts, want %d", tc.stage, tc.partition, len(got), len(tc.attempts))
		}
		for att, want := range tc.attempts {
			ss := got[att]
			slices.SortStableFunc(ss, func(x, y tracetest.SpanStub) int { return x.StartTime.Compare(y.StartTime) })
			var names []string
			for i, s := range ss {
				names = append(names, s.Name)
				if i > 0 && s.StartTime.Before(ss[i-1].EndTime) {
					t.Errorf("%s/%d attempt %d: %s starts before %s ended", tc.stage, tc.partition, att, s.Name, ss[i-1].Name)
				}
			}
			if !slices.Equal(names, want) {
				t.Fatalf("%s/%d attempt %d: steps %v, want %v in this order", tc.stage, tc.partition, att, names, want)
			}
			last := ss[len(ss)-1]
			if failed := att == 1 && tc.partition == 1 && tc.stage == "a"; failed != (last.Status.Code == codes.Error) {
				t.Errorf("%s/%d attempt %d: %s status %v", tc.stage, tc.partition, att, last.Name, last.Status)
			}
		}
	}
}
