package batchwork

import (
	"fmt"
	"net/url"
	"strconv"

	"github.com/batchwork/batchwork/shared/tracing"
)

// Tracing sends the installation's OpenTelemetry spans (shared/tracing,
// docs/operations.md "Traces") to an OTLP endpoint: Props.Tracing. The
// control-plane functions and the executors (Lambda and Fargate) get the
// OTEL_* variables; the user's own task functions (Props.TaskFunctions)
// are theirs to configure. Nil, no variable is set and tracing is off.
type Tracing struct {
	// Endpoint is the OTLP over HTTP base URL
	// (OTEL_EXPORTER_OTLP_ENDPOINT), e.g. http://localhost:4318 for the
	// ADOT Lambda layer's collector, or a collector's URL. Required.
	Endpoint string
	// ServiceName (OTEL_SERVICE_NAME) names every function's spans; empty:
	// each function's own name.
	ServiceName string
	// Sampler (OTEL_TRACES_SAMPLER) and SamplerArg
	// (OTEL_TRACES_SAMPLER_ARG), e.g. "parentbased_traceidratio" and
	// "0.1"; empty: parent-based always-on.
	Sampler    string
	SamplerArg string
}

// The OpenTelemetry SDK's sampler variables (read by the SDK itself).
const (
	EnvTracesSampler    = "OTEL_TRACES_SAMPLER"
	EnvTracesSamplerArg = "OTEL_TRACES_SAMPLER_ARG"
)

// samplers are the OTEL_TRACES_SAMPLER values the Go SDK understands.
var samplers = map[string]bool{
	"always_on": true, "always_off": true, "traceidratio": true,
	"parentbased_always_on": true, "parentbased_always_off": true, "parentbased_traceidratio": true,
}

// tracingEnv checks p's Tracing and returns the functions' variables (nil
// when unset). A bad field panics at synth, naming it: a deployed function
// would otherwise refuse to start.
func tracingEnv(p Props) map[string]string {
	t := p.Tracing
	if t == nil {
		return nil
	}
	bad := func(field, v, why string) {
		panic(fmt.Sprintf("batchwork: Tracing.%s %q: %s", field, v, why))
	}
	if u, err := url.Parse(t.Endpoint); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		bad("Endpoint", t.Endpoint, "want an http or https URL, such as http://localhost:4318")
	}
	if t.Sampler != "" && !samplers[t.Sampler] {
		bad("Sampler", t.Sampler, "want always_on, always_off, traceidratio or parentbased_{always_on,always_off,traceidratio}")
	}
	if t.SamplerArg != "" {
		if f, err := strconv.ParseFloat(t.SamplerArg, 64); err != nil || f < 0 || f > 1 {
			bad("SamplerArg", t.SamplerArg, "want a ratio from 0 to 1")
		}
	}
	env := map[string]string{tracing.EnvEndpoint: t.Endpoint}
	if t.ServiceName != "" {
		env[tracing.EnvServiceName] = t.ServiceName
	}
	if t.Sampler != "" {
		env[EnvTracesSampler] = t.Sampler
	}
	if t.SamplerArg != "" {
		env[EnvTracesSamplerArg] = t.SamplerArg
	}
	if c, err := tracing.ConfigFromEnv(func(k string) string { return env[k] }); err != nil || !c.On {
		panic(fmt.Sprintf("batchwork: Tracing: %v (on: %v)", err, c.On))
	}
	return env
}
