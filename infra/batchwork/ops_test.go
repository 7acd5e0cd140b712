package batchwork_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/assertions"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssns"
	"github.com/aws/jsii-runtime-go"
	"github.com/google/go-cmp/cmp"

	"github.com/batchwork/batchwork/infra/batchwork"
	"github.com/batchwork/batchwork/infra/template"
	"github.com/batchwork/batchwork/internal/metrics"
	"github.com/batchwork/batchwork/shared/control"
)

// constructAlarms are the alarms of the construct's own (not the Fargate
// scaling alarms, whose actions are scaling policies), by metric name.
func constructAlarms(s *synthesized) map[string]resource {
	out := map[string]resource{}
	for id, r := range s.ofType("AWS::CloudWatch::Alarm") {
		switch r.Properties["MetricName"] {
		case "ApproximateNumberOfMessagesVisible", "Errors", "ApproximateAgeOfOldestMessage", metrics.JobsFailed:
			if ns, _ := r.Properties["Namespace"].(string); ns == "AWS/ApplicationELB" {
				continue
			}
			out[id] = r
		}
	}
	return out
}

// Without Props.AlarmTopic the construct creates an encrypted, TLS-only
// topic, every alarm notifies it (and its recovery), and its ARN is an
// output.
func TestAlarmsNotifyTheirTopic(t *testing.T) {
	s := defaultStack(t)
	topics := s.ofType("AWS::SNS::Topic")
	if len(topics) != 1 {
		t.Fatalf("%d topics, want 1", len(topics))
	}
	var topic string
	for id, r := range topics {
		topic = id
		if r.Properties["KmsMasterKeyId"] == nil {
			t.Errorf("topic %s is not encrypted", id)
		}
	}
	keys := s.ofType("AWS::KMS::Key")
	if len(keys) != 1 {
		t.Fatalf("%d KMS keys, want the topic's", len(keys))
	}
	for id, k := range keys {
		if k.Properties["EnableKeyRotation"] != true {
			t.Errorf("key %s is not rotated", id)
		}
		policy, _ := json.Marshal(k.Properties["KeyPolicy"])
		if !strings.Contains(string(policy), "cloudwatch.amazonaws.com") {
			t.Errorf("key %s does not let CloudWatch publish: %s", id, policy)
		}
	}
	check(t, func() {
		s.template.HasResourceProperties(jsii.String("AWS::SNS::TopicPolicy"), map[string]any{
			"Topics": []any{map[string]any{"Ref": topic}},
			"PolicyDocument": assertions.Match_ObjectLike(&map[string]any{"Statement": assertions.Match_ArrayWith(&[]any{
				assertions.Match_ObjectLike(&map[string]any{"Effect": "Deny", "Condition": map[string]any{"Bool": map[string]any{"aws:SecureTransport": "false"}}}),
			})}),
		})
	})
	alarms := constructAlarms(s)
	if len(alarms) != 6 {
		t.Errorf("%d alarms, want 6 (dead letters, sweep errors, 3 oldest messages, failed jobs)", len(alarms))
	}
	want := []any{map[string]any{"Ref": topic}}
	for id, a := range alarms {
		if diff := cmp.Diff(want, a.Properties["AlarmActions"]); diff != "" {
			t.Errorf("alarm %s actions (-want +got):\n%s", id, diff)
		}
		if diff := cmp.Diff(want, a.Properties["OKActions"]); diff != "" {
			t.Errorf("alarm %s OK actions (-want +got):\n%s", id, diff)
		}
	}
	out, ok := s.json.Outputs[template.OutAlarmTopic]
	if !ok {
		t.Fatalf("no %s output", template.OutAlarmTopic)
	}
	if raw, _ := json.Marshal(out); !strings.Contains(string(raw), `{"Ref":"`+topic+`"}`) {
		t.Errorf("output %s = %s, want the topic", template.OutAlarmTopic, raw)
	}
}

// A failed job raises an alarm: JobsFailed, Batchwork's own metric of this
// stack, summed over five minutes.
func TestFailedJobsAlarm(t *testing.T) {
	s := defaultStack(t)
	check(t, func() {
		s.template.HasResourceProperties(jsii.String("AWS::CloudWatch::Alarm"), map[string]any{
			"Namespace": metrics.Namespace, "MetricName": metrics.JobsFailed,
			"Dimensions": []any{map[string]any{"Name": metrics.DimStack, "Value": *s.stack.StackName()}},
			"Statistic":  "Sum", "Period": 300, "Threshold": 1,
			"ComparisonOperator": "GreaterThanOrEqualToThreshold", "TreatMissingData": "notBreaching",
		})
	})
}

// The dashboard graphs Batchwork's own metrics: every name, the latency
// percentiles, the priorities and every repair kind.
func TestDashboardShowsBatchworkMetrics(t *testing.T) {
	s := defaultStack(t)
	var body string
	for _, d := range s.ofType("AWS::CloudWatch::Dashboard") {
		raw, _ := json.Marshal(d.Properties["DashboardBody"])
		body = string(raw)
	}
	want := []string{`\"Batchwork\"`, `\"Stack\"`, "p90", `\"Priority\",\"high\"`, `\"Priority\",\"low\"`}
	for _, m := range []string{metrics.TasksClaimed, metrics.TasksCommitted, metrics.TasksRetried, metrics.TasksFailed, metrics.JobsFailed,
		metrics.ReadyToClaimed, metrics.TaskDuration, metrics.CommitLatency, metrics.SweepRepairs} {
		want = append(want, `\"`+m+`\"`)
	}
	for _, k := range control.Repairs {
		want = append(want, `\"Kind\",\"`+string(k)+`\"`)
	}
	for _, w := range want {
		if !strings.Contains(body, w) {
			t.Errorf("dashboard does not show %s", w)
		}
	}
}

// Every function knows its stack, the metrics' Stack dimension.
func TestFunctionsNameTheirStackForMetrics(t *testing.T) {
	s := defaultStack(t)
	for id, fn := range s.ofType("AWS::Lambda::Function") {
		env, _ := fn.Properties["Environment"].(map[string]any)
		vars, _ := env["Variables"].(map[string]any)
		if diff := cmp.Diff(any(*s.stack.StackName()), vars[metrics.EnvStack]); diff != "" {
			t.Errorf("function %s %s (-want +got):\n%s", id, metrics.EnvStack, diff)
		}
	}
}

// With Props.AlarmTopic the alarms notify that topic, the output names it,
// and the construct creates no topic or key of its own.
func TestAcceptedAlarmTopic(t *testing.T) {
	app := awscdk.NewApp(&awscdk.AppProps{Outdir: jsii.String(t.TempDir())})
	stack := awscdk.NewStack(app, jsii.String("Mine"), nil)
	mine := awssns.NewTopic(stack, jsii.String("OpsTopic"), nil)
	b := batchwork.NewBatchwork(stack, "Batchwork", &batchwork.Props{
		BinDir: fakeBins(t), DockerContext: fakeDockerContext(t), TaskNames: []string{"wordcount.map"}, AlarmTopic: mine,
	})
	if b.AlarmTopic != mine {
		t.Error("Batchwork.AlarmTopic is not the accepted topic")
	}
	tp := assertions.Template_FromStack(stack, nil)
	raw, err := json.Marshal(tp.ToJSON())
	if err != nil {
		t.Fatal(err)
	}
	s := &synthesized{stack: stack, template: tp, b: b}
	if err := json.Unmarshal(raw, &s.json); err != nil {
		t.Fatal(err)
	}
	id := *stack.GetLogicalId(mine.Node().DefaultChild().(awscdk.CfnElement))
	if topics := s.ofType("AWS::SNS::Topic"); len(topics) != 1 || topics[id].Type == "" {
		t.Errorf("topics %v, want only the accepted %s", topics, id)
	}
	if keys := s.ofType("AWS::KMS::Key"); len(keys) != 0 {
		t.Errorf("%d KMS keys, want none", len(keys))
	}
	alarms := constructAlarms(s)
	if len(alarms) != 6 {
		t.Errorf("%d alarms, want 6", len(alarms))
	}
	for aid, a := range alarms {
		if diff := cmp.Diff([]any{map[string]any{"Ref": id}}, a.Properties["AlarmActions"]); diff != "" {
			t.Errorf("alarm %s actions (-want +got):\n%s", aid, diff)
		}
	}
	if out, _ := json.Marshal(s.json.Outputs[template.OutAlarmTopic]); !strings.Contains(string(out), `{"Ref":"`+id+`"}`) {
		t.Errorf("output %s = %s, want the accepted topic", template.OutAlarmTopic, out)
	}
}
