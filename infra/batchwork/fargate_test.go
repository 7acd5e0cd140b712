package batchwork_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/assertions"
	"github.com/aws/jsii-runtime-go"
	"github.com/google/go-cmp/cmp"

	"github.com/batchwork/batchwork/infra/batchwork"
)

func TestFargateExecutorIsOptIn(t *testing.T) {
	for _, typ := range []string{"AWS::ECS::Service", "AWS::ECS::TaskDefinition", "AWS::EC2::VPC", "AWS::ApplicationAutoScaling::ScalableTarget"} {
		check(t, func() { defaultStack(t).template.ResourceCountIs(jsii.String(typ), jsii.Number(0)) })
	}
}

func TestFargateExecutor(t *testing.T) {
	s := everything(t)
	// ECS waits 120 s (Fargate's longest) between SIGTERM and SIGKILL,
	// so the host's 110 s drain lets running tasks commit.
	check(t, func() {
		s.template.HasResourceProperties(jsii.String("AWS::ECS::TaskDefinition"), map[string]any{
			"RuntimePlatform": map[string]any{"CpuArchitecture": "ARM64", "OperatingSystemFamily": "LINUX"},
			"ContainerDefinitions": []any{assertions.Match_ObjectLike(&map[string]any{
				"Environment": assertions.Match_ArrayWith(&[]any{map[string]any{"Name": "BATCHWORK_SLOTS", "Value": "4"}}),
				"StopTimeout": 120,
			})},
		})
	})
	// Its task role polls all three ready queues, otherwise has the
	// Lambda executor's actions, and may set its own task's scale-in
	// protection (the ECS agent endpoint calls ECS with the task role).
	td := s.b.Construct.Node().FindChild(jsii.String("FargateExecutor")).Node().FindChild(jsii.String("QueueProcessingTaskDef"))
	role := *s.stack.GetLogicalId(td.Node().FindChild(jsii.String("TaskRole")).Node().DefaultChild().(awscdk.CfnElement))
	want := dedupe(sorted(tableRW, insertTasks, commitTasks, batchRead, deleteItem, objectsRW, tagObjects, sendReady, setVisible, abortUploads, []string{"sqs:DeleteMessage", "sqs:ReceiveMessage"},
		[]string{"ecs:UpdateTaskProtection"}, putEvents, pinVersions, readVersions))
	if diff := cmp.Diff(want, s.actionsOf(t, role)); diff != "" {
		t.Errorf("Fargate task role actions (-want +got):\n%s", diff)
	}
	// ... on this cluster's tasks only.
	cluster := ""
	for id := range s.ofType("AWS::ECS::Cluster") {
		cluster = id
	}
	check(t, func() {
		s.template.HasResourceProperties(jsii.String("AWS::IAM::Policy"), map[string]any{
			"Roles": []any{map[string]any{"Ref": role}},
			"PolicyDocument": map[string]any{"Statement": assertions.Match_ArrayWith(&[]any{map[string]any{
				"Action": "ecs:UpdateTaskProtection", "Effect": "Allow",
				"Resource": map[string]any{"Fn::Join": []any{"", []any{
					"arn:", map[string]any{"Ref": "AWS::Partition"}, ":ecs:", map[string]any{"Ref": "AWS::Region"}, ":",
					map[string]any{"Ref": "AWS::AccountId"}, ":task/", map[string]any{"Ref": cluster}, "/*",
				}}},
			}})},
		})
	})
}

// The service scales on the backlog of all three ready queues plus the
// tasks in flight, ceil(backlog / slots), from zero on any priority, up
// to FargateMaxTasks: one policy sets the capacity to the most tasks
// needed in the last 5 minutes as soon as anything is queued or running,
// another sets it to zero after 5 minutes with nothing.
func TestFargateScalesOnTheBacklogOfEveryQueue(t *testing.T) {
	for _, c := range []struct {
		name  string
		s     func(t *testing.T) *synthesized
		slots int
		steps []int // capacities the scale-out policy sets
	}{
		{"defaults", everything, 4, []int{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}},
		{"100 tasks of 8 slots", func(t *testing.T) *synthesized {
			return synth(t, "fargate-100x8", batchwork.Props{Executor: batchwork.ExecutorFargate, FargateMaxTasks: 100, FargateSlots: 8}, nil)
		}, 8, []int{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 13, 16, 20, 26, 32, 40, 51, 64, 80, 100}},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := c.s(t)
			max := c.steps[len(c.steps)-1]
			targets := s.ofType("AWS::ApplicationAutoScaling::ScalableTarget")
			if len(targets) != 1 {
				t.Fatalf("%d scalable targets, want 1", len(targets))
			}
			var target string
			for id, r := range targets {
				target = id
				if diff := cmp.Diff(map[string]any{"MinCapacity": 0.0, "MaxCapacity": float64(max), "ScalableDimension": "ecs:service:DesiredCount", "ServiceNamespace": "ecs"},
					pick(r.Properties, "MinCapacity", "MaxCapacity", "ScalableDimension", "ServiceNamespace")); diff != "" {
					t.Errorf("scalable target (-want +got):\n%s", diff)
				}
			}

			// Two step policies on the target, both ExactCapacity: no
			// other policy (the old one on the normal queue) remains.
			policies := map[string]map[string]any{}
			for id, r := range s.ofType("AWS::ApplicationAutoScaling::ScalingPolicy") {
				if refID(r.Properties["ScalingTargetId"]) != target {
					t.Errorf("policy %s scales another target", id)
				}
				if r.Properties["PolicyType"] != "StepScaling" {
					t.Errorf("policy %s is %v, want StepScaling", id, r.Properties["PolicyType"])
				}
				policies[id] = r.Properties["StepScalingPolicyConfiguration"].(map[string]any)
			}
			if len(policies) != 2 {
				t.Fatalf("%d scaling policies, want 2 (out, to zero)", len(policies))
			}

			out, zero := scalingAlarms(t, s, policies)
			// The metric: ceil((visible + not visible over the three
			// queues) / slots), each queue's series filled with 0.
			for _, a := range []map[string]any{out, zero} {
				checkBacklogMetric(t, s, a, c.slots)
			}

			// Out: as soon as 1 task is needed in any of the last 5
			// minutes, set the capacity to the most needed in them
			// (Maximum), one step per count up to 20 steps.
			if diff := cmp.Diff(map[string]any{"ComparisonOperator": "GreaterThanOrEqualToThreshold", "Threshold": 1.0, "EvaluationPeriods": 5.0, "DatapointsToAlarm": 1.0, "TreatMissingData": "notBreaching"},
				pick(out, "ComparisonOperator", "Threshold", "EvaluationPeriods", "DatapointsToAlarm", "TreatMissingData")); diff != "" {
				t.Errorf("scale-out alarm (-want +got):\n%s", diff)
			}
			cfg := policies[refID(out["AlarmActions"].([]any)[0])]
			if diff := cmp.Diff(map[string]any{"AdjustmentType": "ExactCapacity", "MetricAggregationType": "Maximum", "Cooldown": 60.0},
				pick(cfg, "AdjustmentType", "MetricAggregationType", "Cooldown")); diff != "" {
				t.Errorf("scale-out policy (-want +got):\n%s", diff)
			}
			var wantSteps []any
			lower := 0
			for i, n := range c.steps {
				step := map[string]any{"MetricIntervalLowerBound": float64(lower), "ScalingAdjustment": float64(n)}
				if i < len(c.steps)-1 {
					step["MetricIntervalUpperBound"] = float64(n)
				}
				wantSteps = append(wantSteps, step)
				lower = n
			}
			if diff := cmp.Diff(wantSteps, cfg["StepAdjustments"]); diff != "" {
				t.Errorf("scale-out steps (-want +got):\n%s", diff)
			}
			// Each step sets the capacity a need of its range asks for,
			// rounded up: a need of n tasks (the alarm's threshold 1
			// plus the bound) gets the first step at or above n.
			for need := 1; need <= max+5; need++ {
				got := stepFor(t, cfg["StepAdjustments"].([]any), float64(need-1))
				want := max
				for _, n := range c.steps {
					if n >= need {
						want = n
						break
					}
				}
				if got != want {
					t.Errorf("a need of %d tasks sets %d, want %d", need, got, want)
				}
			}

			// To zero: nothing queued or running in each of the last 5
			// minutes.
			if diff := cmp.Diff(map[string]any{"ComparisonOperator": "LessThanOrEqualToThreshold", "Threshold": 0.0, "EvaluationPeriods": 5.0, "DatapointsToAlarm": 5.0, "TreatMissingData": "notBreaching"},
				pick(zero, "ComparisonOperator", "Threshold", "EvaluationPeriods", "DatapointsToAlarm", "TreatMissingData")); diff != "" {
				t.Errorf("scale-to-zero alarm (-want +got):\n%s", diff)
			}
			cfg = policies[refID(zero["AlarmActions"].([]any)[0])]
			if diff := cmp.Diff(map[string]any{"AdjustmentType": "ExactCapacity", "MetricAggregationType": "Maximum", "Cooldown": 300.0,
				"StepAdjustments": []any{map[string]any{"MetricIntervalUpperBound": 0.0, "ScalingAdjustment": 0.0}}},
				pick(cfg, "AdjustmentType", "MetricAggregationType", "Cooldown", "StepAdjustments")); diff != "" {
				t.Errorf("scale-to-zero policy (-want +got):\n%s", diff)
			}
		})
	}
}

// scalingAlarms are the alarms acting on policies: the scale-out one
// (>=) and the scale-to-zero one (<=).
func scalingAlarms(t *testing.T, s *synthesized, policies map[string]map[string]any) (out, zero map[string]any) {
	t.Helper()
	for id, r := range s.ofType("AWS::CloudWatch::Alarm") {
		acts, _ := r.Properties["AlarmActions"].([]any)
		if len(acts) != 1 || policies[refID(acts[0])] == nil {
			continue
		}
		switch r.Properties["ComparisonOperator"] {
		case "GreaterThanOrEqualToThreshold":
			out = r.Properties
		case "LessThanOrEqualToThreshold":
			zero = r.Properties
		default:
			t.Errorf("scaling alarm %s: %v", id, r.Properties["ComparisonOperator"])
		}
	}
	if out == nil || zero == nil {
		t.Fatalf("scaling alarms: out %v, to zero %v", out != nil, zero != nil)
	}
	return out, zero
}

// checkBacklogMetric checks that the alarm's metric is the tasks the
// backlog needs: every ready queue's visible and not-visible messages,
// per minute (their maximum), summed and divided by the slots.
func checkBacklogMetric(t *testing.T, s *synthesized, alarm map[string]any, slots int) {
	t.Helper()
	queues := map[string]string{ // logical id -> priority
		*s.stack.GetLogicalId(s.b.High.Node().DefaultChild().(awscdk.CfnElement)):   "High",
		*s.stack.GetLogicalId(s.b.Normal.Node().DefaultChild().(awscdk.CfnElement)): "Normal",
		*s.stack.GetLogicalId(s.b.Low.Node().DefaultChild().(awscdk.CfnElement)):    "Low",
	}
	var expr string
	got := map[string]string{} // metric id -> "<priority> <metric name>"
	for _, m := range alarm["Metrics"].([]any) {
		m := m.(map[string]any)
		if e, ok := m["Expression"].(string); ok {
			if m["ReturnData"] != true {
				t.Errorf("the expression does not return data: %v", m)
			}
			expr = e
			continue
		}
		stat := m["MetricStat"].(map[string]any)
		metric := stat["Metric"].(map[string]any)
		if stat["Period"] != 60.0 || stat["Stat"] != "Maximum" || metric["Namespace"] != "AWS/SQS" || m["ReturnData"] != false {
			t.Errorf("metric %v: want AWS/SQS, Maximum per minute, not returned", m)
		}
		dims := metric["Dimensions"].([]any)
		q := queues[refID(dims[0].(map[string]any)["Value"])]
		got[m["Id"].(string)] = q + " " + metric["MetricName"].(string)
	}
	want := map[string]string{}
	var terms []string
	for _, q := range []string{"High", "Normal", "Low"} {
		want["visible"+q] = q + " ApproximateNumberOfMessagesVisible"
		want["inFlight"+q] = q + " ApproximateNumberOfMessagesNotVisible"
		terms = append(terms, "FILL(visible"+q+", 0)", "FILL(inFlight"+q+", 0)")
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("the alarm's metrics (-want +got):\n%s", diff)
	}
	if w := fmt.Sprintf("CEIL((%s) / %d)", strings.Join(terms, " + "), slots); expr != w {
		t.Errorf("expression %q, want %q", expr, w)
	}
}

// stepFor is the capacity the step adjustments set for a metric value
// this far above the alarm's threshold (lower bounds inclusive, upper
// exclusive).
func stepFor(t *testing.T, steps []any, above float64) int {
	t.Helper()
	for _, s := range steps {
		s := s.(map[string]any)
		lo, hasLo := s["MetricIntervalLowerBound"].(float64)
		hi, hasHi := s["MetricIntervalUpperBound"].(float64)
		if (!hasLo || above >= lo) && (!hasHi || above < hi) {
			return int(s["ScalingAdjustment"].(float64))
		}
	}
	t.Fatalf("no step for %v above the threshold", above)
	return 0
}

// pick is m's keys of keys, for comparing some properties at once.
func pick(m map[string]any, keys ...string) map[string]any {
	out := map[string]any{}
	for _, k := range keys {
		if v, ok := m[k]; ok {
			out[k] = v
		}
	}
	return out
}
