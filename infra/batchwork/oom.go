package batchwork

import (
	"github.com/aws/aws-cdk-go/awscdk/v2/awsecs"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsevents"
	"github.com/aws/aws-cdk-go/awscdk/v2/awseventstargets"
	"github.com/aws/constructs-go/constructs/v10"
	"github.com/aws/jsii-runtime-go"
)

// A Fargate executor's container that ECS stops for memory dies without a
// word to the control plane: its tasks' claims just lapse. ECS says why in
// its "ECS Task State Change" event (a container's reason, or the task's
// stopped reason, "OutOfMemoryError: Container killed due to memory
// usage"), on the account's default bus, from the event of the
// transition after the container's exit on (STOPPING, DEPROVISIONING,
// STOPPED: the earliest one marks the executor soonest, the later ones
// are idempotent). This rule sends those events of
// the executor cluster to the sweep function, which marks the executor's
// liveness record (the executor id is derived from the task's ARN:
// control.ExecutorIDForECSTask), so the stopped executor's attempts end
// as out of memory and retry one size up (shared/control/oomkill.go).

// OOMKillRuleID is the construct id of the rule.
const OOMKillRuleID = "ExecutorOutOfMemory"

// oomKillRule routes ECS's stopped-for-memory events of cluster's tasks to
// the sweep function.
func (b *Batchwork) oomKillRule(c constructs.Construct, cluster awsecs.ICluster) {
	oom := []any{map[string]any{"prefix": "OutOfMemoryError"}}
	awsevents.NewRule(c, jsii.String(OOMKillRuleID), &awsevents.RuleProps{
		Description: jsii.String("Batchwork: a Fargate executor stopped for memory; its attempts retry one size up"),
		EventPattern: &awsevents.EventPattern{
			Source:     jsii.Strings("aws.ecs"),
			DetailType: jsii.Strings("ECS Task State Change"),
			Detail: &map[string]any{
				"clusterArn": []any{cluster.ClusterArn()},
				"$or": []any{
					map[string]any{"stoppedReason": oom},
					map[string]any{"containers": map[string]any{"reason": oom}},
				},
			},
		},
		Targets: &[]awsevents.IRuleTarget{awseventstargets.NewLambdaFunction(b.Functions[FnSweep], nil)},
	})
}
