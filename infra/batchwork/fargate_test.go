package batchwork_test

import (
	"testing"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/assertions"
	"github.com/aws/jsii-runtime-go"
	"github.com/google/go-cmp/cmp"
)

func TestFargateExecutorIsOptIn(t *testing.T) {
	for _, typ := range []string{"AWS::ECS::Service", "AWS::ECS::TaskDefinition", "AWS::EC2::VPC", "AWS::ApplicationAutoScaling::ScalableTarget"} {
		check(t, func() { defaultStack(t).template.ResourceCountIs(jsii.String(typ), jsii.Number(0)) })
	}
}

func TestFargateExecutor(t *testing.T) {
	s := everything(t)
	check(t, func() {
		s.template.HasResourceProperties(jsii.String("AWS::ECS::TaskDefinition"), map[string]any{
			"RuntimePlatform": map[string]any{"CpuArchitecture": "ARM64", "OperatingSystemFamily": "LINUX"},
			"ContainerDefinitions": []any{assertions.Match_ObjectLike(&map[string]any{
				"Environment": assertions.Match_ArrayWith(&[]any{map[string]any{"Name": "BATCHWORK_SLOTS", "Value": "4"}}),
			})},
		})
	})
	// It scales on queue depth, from zero.
	check(t, func() {
		s.template.HasResourceProperties(jsii.String("AWS::ApplicationAutoScaling::ScalableTarget"), map[string]any{
			"MinCapacity": 0, "MaxCapacity": 10, "ScalableDimension": "ecs:service:DesiredCount",
		})
	})
	check(t, func() {
		s.template.HasResourceProperties(jsii.String("AWS::CloudWatch::Alarm"), map[string]any{
			"MetricName": "ApproximateNumberOfMessagesVisible", "Namespace": "AWS/SQS",
			"AlarmActions": assertions.Match_AnyValue(),
		})
	})
	// Its task role polls all three ready queues and otherwise has the
	// Lambda executor's actions.
	td := s.b.Construct.Node().FindChild(jsii.String("FargateExecutor")).Node().FindChild(jsii.String("QueueProcessingTaskDef"))
	role := td.Node().FindChild(jsii.String("TaskRole")).Node().DefaultChild().(awscdk.CfnElement)
	want := dedupe(sorted(tableRW, batchRead, objectsRW, tagObjects, sendReady, setVisible, abortUploads, []string{"sqs:DeleteMessage", "sqs:ReceiveMessage"},
		// the pattern's own grant on the queue it scales on
		[]string{"sqs:ChangeMessageVisibility", "sqs:DeleteMessage", "sqs:GetQueueAttributes", "sqs:GetQueueUrl", "sqs:ReceiveMessage"}))
	if diff := cmp.Diff(want, s.actionsOf(t, *s.stack.GetLogicalId(role))); diff != "" {
		t.Errorf("Fargate task role actions (-want +got):\n%s", diff)
	}
}
