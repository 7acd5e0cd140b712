package batchwork

import (
	"slices"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsiam"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslogs"
	"github.com/aws/jsii-runtime-go"

	"github.com/batchwork/batchwork/shared/lambdaenv"
)

// LogReadActions are what the api function does with the stack's log
// groups: GET /jobs/{id}/logs filters a job's lines out of them for its
// owner, so no user needs access to the log groups, which hold every
// owner's lines.
var LogReadActions = []string{"logs:FilterLogEvents"}

// logGroups are the groups a job's lines are in: every function's
// (the control plane's and the Lambda executor's) and the Fargate
// executor's, in a stable order.
func (b *Batchwork) logGroups() []awslogs.ILogGroup {
	names := make([]string, 0, len(b.Functions))
	for name := range b.Functions {
		names = append(names, name)
	}
	slices.Sort(names)
	var groups []awslogs.ILogGroup
	for _, name := range names {
		groups = append(groups, b.Functions[name].LogGroup())
	}
	if b.fargateLogs != nil {
		groups = append(groups, b.fargateLogs)
	}
	return groups
}

// logReader tells the api function the log groups (lambdaenv.EnvLogGroups)
// and lets it filter them: those groups only, that action only.
func (b *Batchwork) logReader() {
	api, ok := b.Functions[FnAPI]
	if !ok {
		return
	}
	groups := b.logGroups()
	names, arns := make([]*string, len(groups)), make([]*string, len(groups))
	for i, g := range groups {
		names[i], arns[i] = g.LogGroupName(), g.LogGroupArn()
	}
	api.AddEnvironment(jsii.String(lambdaenv.EnvLogGroups), awscdk.Fn_Join(jsii.String(","), &names), nil)
	awsiam.Grant_AddToPrincipal(&awsiam.GrantOnPrincipalOptions{Grantee: api, Actions: jsii.Strings(LogReadActions...), ResourceArns: &arns})
}
