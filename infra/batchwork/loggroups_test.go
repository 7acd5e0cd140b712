package batchwork_test

import (
	"strings"
	"testing"

	"github.com/aws/aws-cdk-go/awscdk/v2/assertions"
	"github.com/aws/jsii-runtime-go"
)

// Every log group goes with the stack and expires: the functions', the
// Fargate executors' and the VPC's flow logs alike keep their lines a
// month, and a deleted stack leaves none behind. (The API's access logs
// keep theirs three months, an audit trail, and go with the stack too.)
func TestLogGroupsExpireAndGoWithTheStack(t *testing.T) {
	s := everything(t) // every function, both executors, the VPC
	groups := s.ofType("AWS::Logs::LogGroup")
	raw := s.template.ToJSON()
	var fargate, flow int
	for id, g := range groups {
		want := float64(30)
		if strings.Contains(id, "ApiAccessLogs") {
			want = 90
		}
		if got := g.Properties["RetentionInDays"]; got != want {
			t.Errorf("log group %s: RetentionInDays %v, want %v", id, got, want)
		}
		if strings.Contains(id, "Fargate") {
			fargate++
		}
		if strings.Contains(id, "FlowLogs") {
			flow++
		}
		res := (*raw)["Resources"].(map[string]any)[id].(map[string]any)
		if res["DeletionPolicy"] != "Delete" || res["UpdateReplacePolicy"] != "Delete" {
			t.Errorf("log group %s: DeletionPolicy %v, UpdateReplacePolicy %v; want Delete (log groups go with the stack)",
				id, res["DeletionPolicy"], res["UpdateReplacePolicy"])
		}
	}
	if fargate != 1 || flow != 1 {
		t.Errorf("%d Fargate executor log groups and %d flow-log groups, want one each; log groups: %v", fargate, flow, idsOf(groups))
	}
	// Every Fargate service writes to that one group, which the api reads
	// (logs.go).
	for id, td := range s.ofType("AWS::ECS::TaskDefinition") {
		for _, c := range td.Properties["ContainerDefinitions"].([]any) {
			opts := c.(map[string]any)["LogConfiguration"].(map[string]any)["Options"].(map[string]any)
			if g := refID(opts["awslogs-group"]); !strings.Contains(g, "Fargate") {
				t.Errorf("task definition %s logs to %v, want the Fargate executors' group", id, opts["awslogs-group"])
			}
		}
	}
	// The flow log writes to that group.
	for id, fl := range s.ofType("AWS::EC2::FlowLog") {
		if g := fl.Properties["LogGroupName"]; !strings.Contains(refID(g), "FlowLogs") {
			t.Errorf("flow log %s writes to %v, want the stack's flow-log group", id, g)
		}
	}
}

func idsOf[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}

// CloudWatch may use the alarm topic's key only for alarms of this
// account and region (the confused deputy: another account's alarm
// could otherwise have CloudWatch publish through it).
func TestAlarmTopicKeyIsForThisAccountsAlarms(t *testing.T) {
	s := defaultStack(t)
	check(t, func() {
		s.template.HasResourceProperties(jsii.String("AWS::KMS::Key"), map[string]any{
			"KeyPolicy": map[string]any{"Statement": assertions.Match_ArrayWith(&[]any{map[string]any{
				"Sid":       "CloudWatchAlarmsPublish",
				"Effect":    "Allow",
				"Principal": map[string]any{"Service": "cloudwatch.amazonaws.com"},
				"Action":    []any{"kms:Decrypt", "kms:GenerateDataKey*"},
				"Resource":  "*",
				"Condition": map[string]any{
					"StringEquals": map[string]any{"aws:SourceAccount": map[string]any{"Ref": "AWS::AccountId"}},
					"ArnLike": map[string]any{"aws:SourceArn": map[string]any{"Fn::Join": []any{"", []any{
						"arn:", map[string]any{"Ref": "AWS::Partition"}, ":cloudwatch:", map[string]any{"Ref": "AWS::Region"}, ":",
						map[string]any{"Ref": "AWS::AccountId"}, ":alarm:*",
					}}}},
				},
			}})},
		})
	})
}

// A Fargate deployment whose tasks do not reach a steady state stops and
// rolls back to the last one that did, instead of replacing tasks forever.
func TestFargateDeploymentsRollBack(t *testing.T) {
	s := everything(t)
	services := s.ofType("AWS::ECS::Service")
	if len(services) == 0 {
		t.Fatal("no Fargate service")
	}
	for id, svc := range services {
		dc, _ := svc.Properties["DeploymentConfiguration"].(map[string]any)
		if cb, _ := dc["DeploymentCircuitBreaker"].(map[string]any); cb["Enable"] != true || cb["Rollback"] != true {
			t.Errorf("service %s: deployment circuit breaker %v, want enabled with rollback", id, dc["DeploymentCircuitBreaker"])
		}
	}
}
