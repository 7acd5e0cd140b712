package integration

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/smithy-go/middleware"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/batchwork/batchwork/shared/awswire"
	"github.com/batchwork/batchwork/shared/batchwork"
	"github.com/batchwork/batchwork/shared/domain"
	"github.com/batchwork/batchwork/shared/queue"
	"github.com/batchwork/batchwork/shared/tracing"
)

// untracedRedeliveries strips the trace attribute from every delivery of a
// task's message after its first, as if each later attempt came on a new
// message that carries none (the sweep's resend of a lost or long-delayed
// message, a message forwarded to another size's queue): what the
// executor sees is the same, a message with no traceparent. stripped
// counts the deliveries it stripped, by body.
type untracedRedeliveries struct {
	mu       sync.Mutex
	seen     map[string]int
	stripped map[string]int
}

func (u *untracedRedeliveries) install(cfg *aws.Config) {
	cfg.APIOptions = append(cfg.APIOptions, func(st *middleware.Stack) error {
		return st.Initialize.Add(middleware.InitializeMiddlewareFunc("UntracedRedeliveries",
			func(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
				out, md, err := next.HandleInitialize(ctx, in)
				if res, ok := out.Result.(*sqs.ReceiveMessageOutput); ok && err == nil {
					u.strip(res)
				}
				return out, md, err
			}), middleware.Before)
	})
	awswire.Install(cfg, u)
}

// Call strips the lean SQS client's receives as the middleware strips
// the SDK's.
func (u *untracedRedeliveries) Call(ctx context.Context, c *awswire.Call, next func(context.Context) error) error {
	err := next(ctx)
	if res, ok := c.Output.(*sqs.ReceiveMessageOutput); ok && err == nil {
		u.strip(res)
	}
	return err
}

// Attempt sends the attempt.
func (u *untracedRedeliveries) Attempt(_ context.Context, _ *awswire.Call, req *http.Request, send awswire.Send) (*http.Response, error) {
	return send(req)
}

func (u *untracedRedeliveries) strip(res *sqs.ReceiveMessageOutput) {
	u.mu.Lock()
	defer u.mu.Unlock()
	for _, m := range res.Messages {
		body := aws.ToString(m.Body)
		if u.seen[body]++; u.seen[body] > 1 && m.MessageAttributes != nil {
			if _, ok := m.MessageAttributes[queue.TraceAttribute]; ok {
				delete(m.MessageAttributes, queue.TraceAttribute)
				u.stripped[body]++
			}
		}
	}
}

// A retried attempt whose message carries no trace still joins its task's
// trace, under the task's span, through the span id its record holds:
// here the record's span was written by the first attempt's claim (the
// stage's tasks are unwritten at materialization, so the first message's
// traceparent is the only other place it was), and the retry's delivery
// has none. The record keeps its span through the second claim.
//
// Not parallel: the tracer provider is the process's.
func TestTracesJoinARetryWithoutTraceAttribute(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	defer tracing.Install(tp, tp.ForceFlush)()

	reg := batchwork.NewRegistry()
	reg.Register("untraced", func(ctx context.Context, tk *batchwork.Task) error {
		if tk.Partition == 1 && tk.Attempt == 1 {
			return errors.New("connection reset")
		}
		_, err := fmt.Fprintln(tk.Out, "ok")
		return err
	})
	u := &untracedRedeliveries{seen: map[string]int{}, stripped: map[string]int{}}
	e := newEnv(t, reg, envOptions{install: u.install})
	id := e.submit("untraced", []byte(`{"name":"untraced","retry":{"maxAttempts":3,"backoff":"1ms"},"stages":[
		{"name":"a","task":"untraced","partitions":{"count":2}}]}`))
	if st := e.waitJob(id, time.Minute); st.State != "SUCCEEDED" {
		t.Fatalf("job %s ended %s (%s)", id, st.State, st.Error)
	}
	ref := domain.TaskRef{Job: id, Stage: 0, Partition: 1}
	u.mu.Lock()
	stripped := u.stripped[ref.String()]
	u.mu.Unlock()
	if stripped == 0 {
		t.Fatalf("the retry of %s was delivered with its trace attribute: the test tests nothing", ref)
	}

	// The attempt's commit span ends after the commit, which ends the job.
	// The task's span is found in the job's trace (the submit span's, the
	// one span that names the job without being an attempt's); the
	// attempt's spans by their attributes wherever they are.
	attemptSpans := func() (task tracetest.SpanStub, second []tracetest.SpanStub) {
		spans := exp.GetSpans()
		var trace [16]byte
		for _, s := range spans {
			if v, _ := spanAttr(s, tracing.JobKey); s.Name == "batchwork.submit" && v.AsString() == id {
				trace = s.SpanContext.TraceID()
			}
		}
		for _, s := range spans {
			if p, _ := spanAttr(s, tracing.PartitionKey); p.AsInt64() != 1 {
				continue
			}
			if s.Name == "batchwork.task" && s.SpanContext.TraceID() == trace {
				task = s
			}
			j, _ := spanAttr(s, tracing.JobKey)
			if a, _ := spanAttr(s, tracing.AttemptKey); j.AsString() == id && a.AsInt64() == 2 {
				second = append(second, s)
			}
		}
		return task, second
	}
	waitFor(t, 30*time.Second, "the second attempt's commit span", func() bool {
		_, second := attemptSpans()
		for _, s := range second {
			if s.Name == "batchwork.commit" {
				return true
			}
		}
		return false
	})
	task, second := attemptSpans()
	if !task.SpanContext.IsValid() {
		t.Fatalf("%s: no task span", ref)
	}
	rec := stageTasks(t, e, id, 0)[1]
	if rec.Attempt != 2 || rec.TraceSpan != task.SpanContext.SpanID().String() {
		t.Errorf("%s: record attempt %d span %q, want attempt 2 and its task span's %s", ref, rec.Attempt, rec.TraceSpan, task.SpanContext.SpanID())
	}
	names := map[string]bool{}
	for _, s := range second {
		names[s.Name] = true
		if s.SpanContext.TraceID() != task.SpanContext.TraceID() || s.Parent.SpanID() != task.SpanContext.SpanID() {
			t.Errorf("%s attempt 2: %s in trace %s under %s, want trace %s under the task span %s", ref, s.Name,
				s.SpanContext.TraceID(), s.Parent.SpanID(), task.SpanContext.TraceID(), task.SpanContext.SpanID())
		}
	}
	for _, want := range []string{"batchwork.queue.wait", "batchwork.claim", "batchwork.run", "batchwork.outputs", "batchwork.commit"} {
		if !names[want] {
			t.Errorf("%s attempt 2: no %s span among %v", ref, want, names)
		}
	}
}
