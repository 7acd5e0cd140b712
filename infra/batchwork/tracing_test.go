package batchwork_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/assertions"
	"github.com/aws/jsii-runtime-go"

	"github.com/batchwork/batchwork/infra/batchwork"
	"github.com/batchwork/batchwork/shared/lineage"
	"github.com/batchwork/batchwork/shared/tracing"
)

// envOf is a function's environment variables.
func (s *synthesized) envOf(id string) map[string]any {
	env, _ := s.json.Resources[id].Properties["Environment"].(map[string]any)
	vars, _ := env["Variables"].(map[string]any)
	return vars
}

// containerEnv is the Fargate executor's container's variables.
func (s *synthesized) containerEnv(t *testing.T) map[string]any {
	t.Helper()
	out := map[string]any{}
	tds := s.ofType("AWS::ECS::TaskDefinition")
	if len(tds) == 0 {
		t.Fatal("no Fargate task definition")
	}
	for _, td := range tds {
		for _, c := range td.Properties["ContainerDefinitions"].([]any) {
			for _, kv := range asAnyList(c.(map[string]any)["Environment"]) {
				kv := kv.(map[string]any)
				out[kv["Name"].(string)] = kv["Value"]
			}
		}
	}
	return out
}

// Props.Tracing gives every control-plane function and every executor
// (Lambda and Fargate) the OTEL_* variables, which the functions' own
// tracing.ConfigFromEnv reads as on; without it no function has any.
func TestTracingReachesEveryFunction(t *testing.T) {
	s := synth(t, "tracing", batchwork.Props{Executor: batchwork.ExecutorBoth, RemoteExecutorRoleArns: remoteRoles,
		Tracing: &batchwork.Tracing{Endpoint: "http://localhost:4318", ServiceName: "batchwork-prod", Sampler: "parentbased_traceidratio", SamplerArg: "0.25"}}, nil)
	want := map[string]any{tracing.EnvEndpoint: "http://localhost:4318", tracing.EnvServiceName: "batchwork-prod",
		batchwork.EnvTracesSampler: "parentbased_traceidratio", batchwork.EnvTracesSamplerArg: "0.25"}
	ids := s.functionIDs(t)
	if len(ids) != 5 {
		t.Errorf("%d functions, want all five", len(ids))
	}
	envs := map[string]map[string]any{"fargate executor": s.containerEnv(t)}
	for name, id := range ids {
		envs[name] = s.envOf(id)
	}
	for name, env := range envs {
		for k, v := range want {
			if env[k] != v {
				t.Errorf("%s: %s=%v, want %v", name, k, env[k], v)
			}
		}
		c, err := tracing.ConfigFromEnv(func(k string) string { v, _ := env[k].(string); return v })
		if err != nil || !c.On {
			t.Errorf("%s reads tracing %+v, %v; want on", name, c, err)
		}
	}

	d := defaultStack(t)
	for name, id := range d.functionIDs(t) {
		for k := range d.envOf(id) {
			if strings.HasPrefix(k, "OTEL_") {
				t.Errorf("default stack: %s has %s; tracing is off by default", name, k)
			}
		}
	}
}

// Props.OpenLineage gives every function that publishes events the
// OPENLINEAGE_* variables, and the claim function (which can fail a job
// but reads no job objects) a read of the plans, whose pinned ETags a run
// event names; the default stack has neither.
func TestOpenLineageReachesThePublishers(t *testing.T) {
	s := synth(t, "lineage", batchwork.Props{Executor: batchwork.ExecutorBoth, RemoteExecutorRoleArns: remoteRoles,
		OpenLineage: &batchwork.OpenLineage{URL: "https://marquez.example.com", Namespace: "prod", APIKey: "k"}}, nil)
	want := map[string]any{lineage.EnvURL: "https://marquez.example.com", lineage.EnvNamespace: "prod", lineage.EnvAPIKey: "k"}
	envs := map[string]map[string]any{"fargate executor": s.containerEnv(t)}
	for name, id := range s.functionIDs(t) {
		envs[name] = s.envOf(id)
	}
	for name, env := range envs {
		for k, v := range want {
			if env[k] != v {
				t.Errorf("%s: %s=%v, want %v", name, k, env[k], v)
			}
		}
		if _, ok := env[lineage.EnvEndpoint]; ok {
			t.Errorf("%s: %s set though the props leave it to its default", name, lineage.EnvEndpoint)
		}
	}
	plans := func(s *synthesized) bool {
		return slices.ContainsFunc(s.grantsOf(t, s.roles(t)[batchwork.FnClaim], "s3:GetObject"), func(g string) bool {
			return strings.HasSuffix(g, "/jobs/*/plan/*.json")
		})
	}
	if !plans(s) {
		t.Errorf("claim's s3:GetObject grants %v: no read of jobs/*/plan/*", s.grantsOf(t, s.roles(t)[batchwork.FnClaim], "s3:GetObject"))
	}

	d := defaultStack(t)
	for name, id := range d.functionIDs(t) {
		for k := range d.envOf(id) {
			if strings.HasPrefix(k, "OPENLINEAGE_") {
				t.Errorf("default stack: %s has %s; lineage is off by default", name, k)
			}
		}
	}
	if plans(d) {
		t.Errorf("default stack: claim reads the plans without lineage")
	}
	check(t, func() { // the Fargate executor's as well
		s.template.HasResourceProperties(jsii.String("AWS::ECS::TaskDefinition"), map[string]any{
			"ContainerDefinitions": []any{assertions.Match_ObjectLike(&map[string]any{
				"Environment": assertions.Match_ArrayWith(&[]any{map[string]any{"Name": lineage.EnvURL, "Value": "https://marquez.example.com"}}),
			})},
		})
	})
}

// A bad Tracing or OpenLineage field panics at synth, naming it: a
// deployed function would otherwise refuse to start.
func TestBadTracingAndLineagePropsPanic(t *testing.T) {
	for _, c := range []struct {
		name  string
		props batchwork.Props
		want  string
	}{
		{"tracing no endpoint", batchwork.Props{Tracing: &batchwork.Tracing{}}, `Tracing.Endpoint ""`},
		{"tracing grpc", batchwork.Props{Tracing: &batchwork.Tracing{Endpoint: "grpc://collector:4317"}}, `Tracing.Endpoint "grpc://collector:4317"`},
		{"tracing sampler", batchwork.Props{Tracing: &batchwork.Tracing{Endpoint: "http://c:4318", Sampler: "sometimes"}}, `Tracing.Sampler "sometimes"`},
		{"tracing ratio", batchwork.Props{Tracing: &batchwork.Tracing{Endpoint: "http://c:4318", SamplerArg: "2"}}, `Tracing.SamplerArg "2"`},
		{"lineage url", batchwork.Props{OpenLineage: &batchwork.OpenLineage{URL: "marquez:5000"}}, `OpenLineage: OPENLINEAGE_URL: "marquez:5000"`},
		{"lineage endpoint", batchwork.Props{OpenLineage: &batchwork.OpenLineage{URL: "http://marquez:5000", Endpoint: "http://elsewhere/x"}}, `OpenLineage: OPENLINEAGE_ENDPOINT`},
	} {
		t.Run(c.name, func(t *testing.T) {
			defer func() {
				if r := recover(); r == nil || !strings.Contains(fmt.Sprint(r), c.want) {
					t.Fatalf("panic %v, want one naming %q", r, c.want)
				}
			}()
			app := awscdk.NewApp(&awscdk.AppProps{Outdir: jsii.String(t.TempDir())})
			batchwork.NewBatchwork(awscdk.NewStack(app, jsii.String("Bad"), nil), "Batchwork", &c.props)
		})
	}
}
