package batchwork

import (
	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsevents"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsiam"
	"github.com/aws/constructs-go/constructs/v10"
	"github.com/aws/jsii-runtime-go"
)

// Events (shared/events): the construct creates the bus Batchwork puts its
// events on (source "batchwork"; detail types "Batchwork Job Submitted",
// "... Job Started", "... Job Succeeded", "... Job Failed", "... Job Cancelled", "... Stage
// Completed", "... Task Failed"), tells the functions that publish its
// name (lambdaenv.EnvEventBus), and grants them events:PutEvents on
// exactly that bus. Rules on the bus route events, e.g. a failed job to
// an SNS topic:
//
//	awsevents.NewRule(stack, jsii.String("JobFailed"), &awsevents.RuleProps{
//		EventBus:     bw.EventBus,
//		EventPattern: &awsevents.EventPattern{
//			Source:     jsii.Strings("batchwork"),
//			DetailType: jsii.Strings("Batchwork Job Failed"),
//		},
//		Targets: &[]awsevents.IRuleTarget{awseventstargets.NewSnsTopic(topic, nil)},
//	})
//
// Every function makes transitions that have events (the api submits and
// cancels, claim fails a task whose last lease ran out, commit and the
// executors complete stages and end jobs, the sweep does all of these and
// publishes what the others left), so every one publishes, and deletes
// the outbox records it published (dynamodb:DeleteItem, a transaction's
// Delete part).

// eventsActions are what a publisher needs on the bus.
var eventsActions = []string{"events:PutEvents"}

// eventBus creates the installation's bus.
func (b *Batchwork) eventBus(c constructs.Construct) {
	// A bus needs a name, unique in its account and region: the stack's
	// name and the construct's id in it, so that two stacks (or two
	// installations in one stack) never share one.
	name := awscdk.Fn_Join(jsii.String("-"), &[]*string{awscdk.Aws_STACK_NAME(), jsii.String(*awscdk.Names_NodeUniqueId(c.Node()) + "Events")})
	b.EventBus = awsevents.NewEventBus(c, jsii.String("Events"), &awsevents.EventBusProps{
		EventBusName: name,
		Description:  jsii.String("Batchwork events: jobs submitted and ended, stages completed, tasks failed for good"),
	})
}

// eventBusName is the bus's name, as its Name attribute (Fn::GetAtt)
// rather than its Ref, which is the same on AWS and which moto's
// CloudFormation, where the local runner deploys the bus, answers alone.
func (b *Batchwork) eventBusName() *string {
	return b.EventBus.Node().DefaultChild().(awsevents.CfnEventBus).AttrName()
}

// grantEvents lets to put events on the bus, and only on it.
func (b *Batchwork) grantEvents(to awsiam.IGrantable) {
	awsiam.Grant_AddToPrincipal(&awsiam.GrantOnPrincipalOptions{
		Grantee: to, Actions: jsii.Strings(eventsActions...), ResourceArns: &[]*string{b.EventBus.EventBusArn()},
	})
}
