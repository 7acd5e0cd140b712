// Package tracing is Batchwork's OpenTelemetry tracing: the provider the
// standard OTEL_* environment variables describe (off when they describe
// none), span helpers that cost nothing while it is off, and the W3C
// traceparent strings that carry a job's and a task's span context through
// records and messages.
//
// One job is one trace: its root span is the submit; materialization,
// stage completion and one span per task hang under it, and every attempt
// of a task (queue wait, claim, run, output writes, commit) is a child of
// its task's span, whichever process runs it. The traceparent of the
// submit span is written with the job and its stages, and a task's with
// its record and its message, so redelivered and retried attempts join
// the same trace.
package tracing

import (
	"context"
	"errors"
	"slices"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
)

// Scope is the instrumentation scope of every Batchwork span.
const Scope = "github.com/batchwork/batchwork"

// state is what is installed: nil while tracing is off, which every
// helper checks first, so that off costs one atomic load.
type state struct {
	tracer trace.Tracer
	flush  func(context.Context) error
}

var current atomic.Pointer[state]

// Enabled reports whether spans are recorded (a provider is installed).
func Enabled() bool { return current.Load() != nil }

// Install makes tp the provider of every span (Setup's, a test's
// in-memory one, the bench's) and returns what puts the previous one
// back. flush, if not nil, is what Flush calls.
func Install(tp trace.TracerProvider, flush func(context.Context) error) (restore func()) {
	prev := current.Swap(&state{tracer: tp.Tracer(Scope), flush: flush})
	return func() { current.Store(prev) }
}

// Flush exports the spans ended so far: a Lambda function calls it before
// its handler returns, since the process may be frozen after that.
func Flush(ctx context.Context) error {
	if s := current.Load(); s != nil && s.flush != nil {
		return s.flush(ctx)
	}
	return nil
}

// noSpan is what helpers return while tracing is off: a zero-sized value,
// so returning it allocates nothing.
var noSpan trace.Span = noop.Span{}

// Start starts a span named name, a child of the span in ctx (or a root),
// and returns ctx with it. Off, it returns ctx and a no-op span.
func Start(ctx context.Context, name string, attrs ...attribute.KeyValue) (context.Context, trace.Span) {
	s := current.Load()
	if s == nil {
		return ctx, noSpan
	}
	// A copy, so that attrs does not escape: the caller's variadic
	// slice then stays on its stack while tracing is off.
	return s.tracer.Start(ctx, name, trace.WithAttributes(slices.Clone(attrs)...))
}

// StartAt is Start for a span that began at t: the queue wait, which
// began when the message was sent.
func StartAt(ctx context.Context, name string, t time.Time, attrs ...attribute.KeyValue) (context.Context, trace.Span) {
	s := current.Load()
	if s == nil {
		return ctx, noSpan
	}
	return s.tracer.Start(ctx, name, trace.WithTimestamp(t), trace.WithAttributes(slices.Clone(attrs)...))
}

// Record emits a span that ran from start to end, under ctx's span.
func Record(ctx context.Context, name string, start, end time.Time, attrs ...attribute.KeyValue) {
	if !Enabled() {
		return
	}
	_, sp := StartAt(ctx, name, start, attrs...)
	sp.End(trace.WithTimestamp(end))
}

// Mark emits a span that starts and ends now, under ctx's span, and
// returns its traceparent ("" while tracing is off): a task's span, made
// at materialization, which its attempts' spans are children of.
func Mark(ctx context.Context, name string, attrs ...attribute.KeyValue) string {
	s := current.Load()
	if s == nil {
		return ""
	}
	_, sp := s.tracer.Start(ctx, name, trace.WithAttributes(slices.Clone(attrs)...))
	sp.End()
	return Of(sp.SpanContext())
}

// End ends sp, marking it failed with err when err is not nil.
func End(sp trace.Span, err error) {
	if err != nil && sp.IsRecording() {
		sp.RecordError(err)
		sp.SetStatus(codes.Error, err.Error())
	}
	sp.End()
}

var traceContext = propagation.TraceContext{}

// Parent returns ctx under the span context a traceparent names (from a
// record or a message): spans started from it are that span's children.
// Off, or with an empty or malformed string, it returns ctx.
func Parent(ctx context.Context, traceparent string) context.Context {
	if traceparent == "" || !Enabled() {
		return ctx
	}
	return traceContext.Extract(ctx, propagation.MapCarrier{headerName: traceparent})
}

// Traceparent is the W3C traceparent of the span in ctx, "" when there is
// none (always, while tracing is off).
func Traceparent(ctx context.Context) string {
	if !Enabled() {
		return ""
	}
	return Of(trace.SpanContextFromContext(ctx))
}

// SpanID is the span id (16 hex digits) a traceparent names, "" if none:
// what a task record keeps of its span (its trace is its job's).
func SpanID(traceparent string) string {
	sc := spanContext(traceparent)
	if !sc.IsValid() {
		return ""
	}
	return sc.SpanID().String()
}

// Join is the traceparent of span id span (SpanID) in the trace of
// traceparent job, "" when either is missing or malformed.
func Join(job, span string) string {
	sc := spanContext(job)
	sid, err := trace.SpanIDFromHex(span)
	if !sc.IsValid() || err != nil {
		return ""
	}
	return Of(sc.WithSpanID(sid))
}

func spanContext(traceparent string) trace.SpanContext {
	if traceparent == "" {
		return trace.SpanContext{}
	}
	return trace.SpanContextFromContext(traceContext.Extract(context.Background(), propagation.MapCarrier{headerName: traceparent}))
}

// Of is the W3C traceparent of sc, "" when sc is not valid.
func Of(sc trace.SpanContext) string {
	if !sc.IsValid() {
		return ""
	}
	c := propagation.MapCarrier{}
	traceContext.Inject(trace.ContextWithSpanContext(context.Background(), sc), c)
	return c[headerName]
}

// TraceID is the trace id a traceparent names, "" when it names none: the
// console shows it on a task's row and links to it.
func TraceID(traceparent string) string {
	sc := spanContext(traceparent)
	if !sc.IsValid() {
		return ""
	}
	return sc.TraceID().String()
}

const headerName = "traceparent"

// The attributes of Batchwork's spans.
const (
	JobKey       = attribute.Key("batchwork.job.id")
	StageKey     = attribute.Key("batchwork.stage")
	PartitionKey = attribute.Key("batchwork.partition")
	AttemptKey   = attribute.Key("batchwork.attempt")
	TasksKey     = attribute.Key("batchwork.tasks")
)

// MaxLen bounds a stored traceparent (version, 32 and 16 hex digits,
// flags): records reserve this much for it.
const MaxLen = 55

// carried is the context key of the traceparent a task's message carried,
// which the claim writes into the record of a task it creates (a task not
// written at materialization).
type carried struct{}

// WithCarried returns ctx holding the traceparent a message carried; ctx
// itself when there is none.
func WithCarried(ctx context.Context, traceparent string) context.Context {
	if traceparent == "" {
		return ctx
	}
	return context.WithValue(ctx, carried{}, traceparent)
}

// Carried is the traceparent WithCarried put in ctx, "" if none.
func Carried(ctx context.Context) string {
	s, _ := ctx.Value(carried{}).(string)
	return s
}

// errHandler keeps the SDK's export errors out of stderr's way: they are
// counted, not fatal, and a collector that is down must not flood logs.
type errHandler struct{ log func(error) }

func (h errHandler) Handle(err error) {
	if h.log != nil {
		h.log(err)
	}
}

func setErrorHandler(log func(error)) { otel.SetErrorHandler(errHandler{log: log}) }

// ErrConfig is wrapped by Setup's errors about the environment.
var ErrConfig = errors.New("tracing configuration")
