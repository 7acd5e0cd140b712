package tracing

import (
	"context"
	"fmt"
	"strings"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
)

// The environment variables Setup reads beside the ones the OpenTelemetry
// SDK and its OTLP exporter read themselves (OTEL_EXPORTER_OTLP_*
// endpoints, headers, timeouts; OTEL_TRACES_SAMPLER and its argument;
// OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES).
const (
	EnvExporter       = "OTEL_TRACES_EXPORTER"
	EnvEndpoint       = "OTEL_EXPORTER_OTLP_ENDPOINT"
	EnvTracesEndpoint = "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"
	EnvProtocol       = "OTEL_EXPORTER_OTLP_PROTOCOL"
	EnvTracesProtocol = "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"
	EnvDisabled       = "OTEL_SDK_DISABLED"
	EnvServiceName    = "OTEL_SERVICE_NAME"
	// EnvIDs set to "xray" makes trace ids X-Ray compatible (their first
	// four bytes the start's epoch seconds), as they are on Lambda
	// whatever it says; "w3c" turns that off there.
	EnvIDs = "BATCHWORK_TRACE_IDS"
)

// Config is what the environment asks for.
type Config struct {
	// On: an exporter is configured. Off, nothing is installed and every
	// span is a no-op.
	On bool
	// XRay: trace ids X-Ray accepts (xrayIDs).
	XRay bool
}

// ConfigFromEnv reads the configuration from getenv. Tracing is on when
// OTEL_TRACES_EXPORTER is "otlp", or is unset and an OTLP endpoint is set;
// "none", OTEL_SDK_DISABLED=true or no endpoint leave it off. Only OTLP
// over HTTP (http/protobuf) is built in: another exporter or protocol is
// an error naming the variable.
func ConfigFromEnv(getenv func(string) string) (Config, error) {
	var c Config
	if strings.EqualFold(getenv(EnvDisabled), "true") {
		return c, nil
	}
	switch exp := strings.TrimSpace(getenv(EnvExporter)); exp {
	case "none":
		return c, nil
	case "otlp":
		c.On = true
	case "":
		c.On = getenv(EnvEndpoint) != "" || getenv(EnvTracesEndpoint) != ""
	default:
		return c, fmt.Errorf("%w: %s=%q: only \"otlp\" (OTLP over HTTP) and \"none\" are supported", ErrConfig, EnvExporter, exp)
	}
	for _, name := range []string{EnvTracesProtocol, EnvProtocol} {
		if p := getenv(name); p != "" && p != "http/protobuf" {
			return c, fmt.Errorf("%w: %s=%q: only \"http/protobuf\" is supported", ErrConfig, name, p)
		}
		if getenv(name) != "" {
			break // the traces' own setting wins over the general one
		}
	}
	switch ids := getenv(EnvIDs); ids {
	case "xray":
		c.XRay = true
	case "w3c":
	case "":
		c.XRay = getenv("AWS_LAMBDA_FUNCTION_NAME") != ""
	default:
		return c, fmt.Errorf("%w: %s=%q: want \"xray\" or \"w3c\"", ErrConfig, EnvIDs, ids)
	}
	return c, nil
}

// Setup installs the provider the environment describes for a process
// named service (OTEL_SERVICE_NAME overrides it) and returns its shutdown,
// which flushes what is left. With tracing off it installs nothing and
// its shutdown does nothing. logErr, if not nil, hears export errors.
func Setup(ctx context.Context, getenv func(string) string, service string, logErr func(error)) (shutdown func(context.Context) error, err error) {
	c, err := ConfigFromEnv(getenv)
	if err != nil || !c.On {
		return func(context.Context) error { return nil }, err
	}
	exp, err := otlptracehttp.New(ctx) // endpoint, headers, timeout: OTEL_EXPORTER_OTLP_*
	if err != nil {
		return nil, fmt.Errorf("%w: OTLP exporter: %w", ErrConfig, err)
	}
	res, err := resource.New(ctx,
		resource.WithAttributes(semconv.ServiceName(service)),
		resource.WithFromEnv(), // OTEL_SERVICE_NAME, OTEL_RESOURCE_ATTRIBUTES: after, so they win
		resource.WithTelemetrySDK())
	if err != nil {
		return nil, fmt.Errorf("%w: resource: %w", ErrConfig, err)
	}
	opts := []sdktrace.TracerProviderOption{sdktrace.WithBatcher(exp), sdktrace.WithResource(res)}
	if c.XRay {
		opts = append(opts, sdktrace.WithIDGenerator(XRayIDs()))
	}
	tp := sdktrace.NewTracerProvider(opts...) // the sampler: OTEL_TRACES_SAMPLER(_ARG), parent-based always-on by default
	setErrorHandler(logErr)
	restore := Install(tp, tp.ForceFlush)
	// Task functions that trace with the global API join their attempt's
	// trace: the run's span is in their context.
	prevGlobal := otel.GetTracerProvider()
	otel.SetTracerProvider(tp)
	return func(ctx context.Context) error {
		restore()
		otel.SetTracerProvider(prevGlobal)
		return tp.Shutdown(ctx)
	}, nil
}
