package tracing

import (
	"context"
	"encoding/binary"
	"errors"
	"strings"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
)

func env(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

func TestConfigFromEnv(t *testing.T) {
	for _, tc := range []struct {
		name    string
		env     map[string]string
		want    Config
		wantErr string
	}{
		{name: "nothing set: off", env: nil},
		{name: "an endpoint turns it on", env: map[string]string{EnvEndpoint: "http://collector:4318"}, want: Config{On: true}},
		{name: "a traces endpoint turns it on", env: map[string]string{EnvTracesEndpoint: "http://c:4318/v1/traces"}, want: Config{On: true}},
		{name: "otlp with no endpoint: on (the exporter's default)", env: map[string]string{EnvExporter: "otlp"}, want: Config{On: true}},
		{name: "none wins over an endpoint", env: map[string]string{EnvExporter: "none", EnvEndpoint: "http://c:4318"}},
		{name: "disabled SDK", env: map[string]string{EnvDisabled: "true", EnvEndpoint: "http://c:4318"}},
		{name: "on Lambda: X-Ray ids", env: map[string]string{EnvEndpoint: "http://c:4318", "AWS_LAMBDA_FUNCTION_NAME": "f"}, want: Config{On: true, XRay: true}},
		{name: "asked for X-Ray ids", env: map[string]string{EnvEndpoint: "http://c:4318", EnvIDs: "xray"}, want: Config{On: true, XRay: true}},
		{name: "w3c ids on Lambda", env: map[string]string{EnvEndpoint: "http://c:4318", EnvIDs: "w3c", "AWS_LAMBDA_FUNCTION_NAME": "f"}, want: Config{On: true}},
		{name: "another exporter", env: map[string]string{EnvExporter: "zipkin"}, wantErr: EnvExporter},
		{name: "gRPC", env: map[string]string{EnvEndpoint: "http://c:4317", EnvProtocol: "grpc"}, wantErr: EnvProtocol},
		{name: "the traces' protocol wins", env: map[string]string{EnvEndpoint: "http://c:4318", EnvProtocol: "grpc", EnvTracesProtocol: "http/protobuf"}, want: Config{On: true}},
		{name: "bad ids", env: map[string]string{EnvIDs: "random"}, wantErr: EnvIDs},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ConfigFromEnv(env(tc.env))
			if tc.wantErr != "" {
				if err == nil || !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want one naming %s", err, tc.wantErr)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("ConfigFromEnv = %+v, %v; want %+v", got, err, tc.want)
			}
		})
	}
}

// With no OTEL variables nothing is installed: spans are no-ops, no
// traceparent is made, and the helpers allocate nothing.
func TestOffByDefault(t *testing.T) {
	shutdown, err := Setup(context.Background(), env(nil), "test", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer shutdown(context.Background())
	if Enabled() {
		t.Fatal("tracing is on with no OTEL variables")
	}
	ctx := context.Background()
	allocs := testing.AllocsPerRun(100, func() {
		c := Parent(ctx, "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01")
		c, sp := Start(c, "step", JobKey.String("j"), StageKey.String("s"), PartitionKey.Int(3))
		if sp.IsRecording() || Traceparent(c) != "" {
			t.Fatal("a span recorded with tracing off")
		}
		End(sp, nil)
		Record(c, "wait", time.Now(), time.Now(), AttemptKey.Int(2))
	})
	if allocs != 0 {
		t.Fatalf("tracing off allocates %v times per step, want 0", allocs)
	}
}

// A traceparent written down and read back makes children of the same
// span, in the same trace.
func TestTraceparentRoundTrip(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp), sdktrace.WithIDGenerator(XRayIDs()))
	defer Install(tp, tp.ForceFlush)()
	ctx, parent := Start(context.Background(), "task")
	tpString := Traceparent(ctx)
	parent.End()
	if len(tpString) != MaxLen {
		t.Fatalf("traceparent %q is %d bytes, want %d", tpString, len(tpString), MaxLen)
	}
	_, child := Start(Parent(context.Background(), tpString), "claim")
	End(child, errors.New("refused"))
	spans := exp.GetSpans()
	if len(spans) != 2 {
		t.Fatalf("%d spans, want 2", len(spans))
	}
	if spans[1].Parent.SpanID() != spans[0].SpanContext.SpanID() || spans[1].SpanContext.TraceID() != spans[0].SpanContext.TraceID() {
		t.Fatalf("the child's parent %v, want %v in the same trace", spans[1].Parent, spans[0].SpanContext)
	}
	if spans[1].Status.Description != "refused" {
		t.Fatalf("status %+v, want the error", spans[1].Status)
	}
	if got := TraceID(tpString); got != spans[0].SpanContext.TraceID().String() {
		t.Fatalf("TraceID = %q, want %s", got, spans[0].SpanContext.TraceID())
	}
	if TraceID("junk") != "" || Traceparent(Parent(context.Background(), "junk")) != "" {
		t.Fatal("a malformed traceparent named a trace")
	}
}

func TestXRayIDs(t *testing.T) {
	at := time.Unix(1_700_000_000, 0)
	g := newXRayIDs(func() time.Time { return at })
	seen := map[trace.TraceID]bool{}
	for range 100 {
		tid, sid := g.NewIDs(context.Background())
		if got := binary.BigEndian.Uint32(tid[:4]); got != uint32(at.Unix()) {
			t.Fatalf("trace id %s starts with %d, want the epoch seconds %d", tid, got, at.Unix())
		}
		if !tid.IsValid() || !sid.IsValid() || seen[tid] {
			t.Fatalf("ids %s %s invalid or repeated", tid, sid)
		}
		seen[tid] = true
	}
}

// The no-op path of a task's steps, as the executor takes it: compare
// with tracing on (go test -bench . ./shared/tracing/).
func BenchmarkStepOff(b *testing.B) {
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		c := Parent(ctx, "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01")
		c, sp := Start(c, "step")
		End(sp, nil)
		_ = Traceparent(c)
	}
}

func BenchmarkStepOn(b *testing.B) {
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(sdktrace.NewSimpleSpanProcessor(tracetest.NewNoopExporter())))
	defer Install(tp, nil)()
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		c := Parent(ctx, "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01")
		c, sp := Start(c, "step")
		End(sp, nil)
		_ = Traceparent(c)
	}
}
