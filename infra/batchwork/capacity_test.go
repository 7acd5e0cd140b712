package batchwork_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/jsii-runtime-go"
	"github.com/google/go-cmp/cmp"

	"github.com/batchwork/batchwork/infra/batchwork"
)

// stageThrottle is the HTTP API stage's default route throttle.
func (s *synthesized) stageThrottle(t *testing.T) any {
	t.Helper()
	stages := s.ofType("AWS::ApiGatewayV2::Stage")
	if len(stages) != 1 {
		t.Fatalf("%d API stages, want 1", len(stages))
	}
	for _, st := range stages {
		return st.Properties["DefaultRouteSettings"]
	}
	return nil
}

// Without capacity settings the API takes 250 requests a second (burst
// 500), the table keeps AWS's warm throughput and no function reserves
// concurrency.
func TestCapacityDefaults(t *testing.T) {
	s := defaultStack(t)
	want := map[string]any{"ThrottlingRateLimit": float64(batchwork.DefaultAPIRateLimit), "ThrottlingBurstLimit": float64(batchwork.DefaultAPIBurstLimit)}
	if diff := cmp.Diff(want, s.stageThrottle(t)); diff != "" {
		t.Errorf("API throttle (-want +got):\n%s", diff)
	}
	if want["ThrottlingRateLimit"] != float64(250) || want["ThrottlingBurstLimit"] != float64(500) {
		t.Errorf("default throttle %v, want 250 a second, burst 500", want)
	}
	for id, tb := range s.ofType("AWS::DynamoDB::Table") {
		if w, ok := tb.Properties["WarmThroughput"]; ok {
			t.Errorf("table %s has warm throughput %v, want none", id, w)
		}
	}
	for id, fn := range s.ofType("AWS::Lambda::Function") {
		if r, ok := fn.Properties["ReservedConcurrentExecutions"]; ok {
			t.Errorf("function %s reserves %v, want unreserved", id, r)
		}
	}
}

// Each capacity setting shows in the template; reserved concurrency on
// every Lambda executor (each size's too) and on no other function.
func TestCapacitySettingsReachTheTemplate(t *testing.T) {
	s := synth(t, "capacity", batchwork.Props{
		APIRateLimit: 1000, APIBurstLimit: 2000,
		TableWarmReadUnitsPerSecond: 15000, TableWarmWriteUnitsPerSecond: 24000,
		ExecutorMaxConcurrency: 50, ExecutorReservedConcurrency: 150,
		ExecutorSizes: []string{"2GiB"},
	}, nil)
	want := map[string]any{"ThrottlingRateLimit": float64(1000), "ThrottlingBurstLimit": float64(2000)}
	if diff := cmp.Diff(want, s.stageThrottle(t)); diff != "" {
		t.Errorf("API throttle (-want +got):\n%s", diff)
	}
	tables := s.ofType("AWS::DynamoDB::Table")
	if len(tables) != 1 {
		t.Fatalf("%d tables, want 1", len(tables))
	}
	for id, tb := range tables {
		want := map[string]any{"ReadUnitsPerSecond": float64(15000), "WriteUnitsPerSecond": float64(24000)}
		if diff := cmp.Diff(want, tb.Properties["WarmThroughput"]); diff != "" {
			t.Errorf("table %s warm throughput (-want +got):\n%s", id, diff)
		}
	}
	executors := map[string]bool{}
	for name, id := range s.functionIDs(t) {
		if name == batchwork.FnExecutor || strings.HasPrefix(name, batchwork.FnExecutor+"@") {
			executors[id] = true
		}
	}
	if len(executors) != 2 {
		t.Fatalf("%d Lambda executors, want the default and 2GiB", len(executors))
	}
	for id, fn := range s.ofType("AWS::Lambda::Function") {
		got, ok := fn.Properties["ReservedConcurrentExecutions"]
		switch {
		case executors[id] && got != float64(150):
			t.Errorf("executor %s reserves %v, want 150", id, got)
		case !executors[id] && ok:
			t.Errorf("function %s reserves %v, want unreserved", id, got)
		}
	}
}

// A table with only one side set keeps AWS's default on the other.
func TestWarmThroughputOneSide(t *testing.T) {
	s := synth(t, "warm write", batchwork.Props{TableWarmWriteUnitsPerSecond: 4000}, nil)
	for id, tb := range s.ofType("AWS::DynamoDB::Table") {
		if diff := cmp.Diff(map[string]any{"WriteUnitsPerSecond": float64(4000)}, tb.Properties["WarmThroughput"]); diff != "" {
			t.Errorf("table %s warm throughput (-want +got):\n%s", id, diff)
		}
	}
}

func TestBadCapacityPanicsWithTheField(t *testing.T) {
	cases := []struct {
		name  string
		props batchwork.Props
		want  string
	}{
		{"negative rate", batchwork.Props{APIRateLimit: -1}, "APIRateLimit -1: must be between 1 and"},
		{"burst below rate", batchwork.Props{APIRateLimit: 300, APIBurstLimit: 200}, "APIBurstLimit 200: must be between APIRateLimit (300) and"},
		{"burst below default rate", batchwork.Props{APIBurstLimit: 100}, "APIBurstLimit 100: must be between APIRateLimit (250)"},
		{"warm reads", batchwork.Props{TableWarmReadUnitsPerSecond: 11999}, "TableWarmReadUnitsPerSecond 11999: must be 0 (AWS's default) or between 12000 and"},
		{"warm writes", batchwork.Props{TableWarmWriteUnitsPerSecond: 3999}, "TableWarmWriteUnitsPerSecond 3999: must be 0 (AWS's default) or between 4000 and"},
		{"negative warm writes", batchwork.Props{TableWarmWriteUnitsPerSecond: -5}, "TableWarmWriteUnitsPerSecond -5"},
		{"reserved below the event sources", batchwork.Props{ExecutorMaxConcurrency: 100, ExecutorReservedConcurrency: 299},
			"ExecutorReservedConcurrency 299: must be 0 (unreserved) or between 300 (3 ready queues × ExecutorMaxConcurrency 100) and"},
		{"negative reserved", batchwork.Props{ExecutorReservedConcurrency: -1}, "ExecutorReservedConcurrency -1"},
		{"reserved without Lambda executors", batchwork.Props{Executor: batchwork.ExecutorFargate, ExecutorReservedConcurrency: 300},
			"ExecutorReservedConcurrency: must be 0 when Executor is fargate"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			defer func() {
				r := recover()
				if r == nil || !strings.Contains(fmt.Sprint(r), c.want) {
					t.Fatalf("panic %v, want one naming %q", r, c.want)
				}
			}()
			app := awscdk.NewApp(&awscdk.AppProps{Outdir: jsii.String(t.TempDir())})
			batchwork.NewBatchwork(awscdk.NewStack(app, jsii.String("Bad"), nil), "Batchwork", &c.props)
		})
	}
}
