package batchwork

import (
	"github.com/aws/aws-cdk-go/awscdk/v2/awsecs"
	"github.com/aws/jsii-runtime-go"
	"github.com/cdklabs/cdk-nag-go/cdknag/v2"
)

// suppressNagFindings records, next to the resources, why each cdk-nag
// AwsSolutions finding the construct keeps is acceptable. Every
// suppression is as narrow as cdk-nag allows (a rule, on one resource,
// for one wildcard) and carries its reason; the nag test fails on any
// finding not listed here.
func (b *Batchwork) suppressNagFindings() {
	objects := &[]interface{}{&cdknag.RegexAppliesTo{Regex: jsii.String(dataObjectPatterns)}, &cdknag.RegexAppliesTo{Regex: jsii.String(inputBucketObjects)}}
	objectsReason := "Object keys are per job, stage, partition and attempt (jobs/<job>/...) and per owner under the inputs area (inputs/<owner key>/...), " +
		"so object actions need wildcards in this installation's bucket; reads are confined to those two areas (the inputs area to the executor) " +
		"and to the input buckets the operator allows (Props.InputBuckets); writes, tags and deletes to the job area (jobs/*), " +
		"where the bucket policy lets writes only create objects and lets no other principal write, tag or delete; " +
		"only the api deletes, an ended job's objects at its owner's request (DELETE /jobs/{id}/data); and every grant is to the listed actions."
	for _, fn := range b.Functions {
		cdknag.NagSuppressions_AddResourceSuppressions(fn.Role(), &[]*cdknag.NagPackSuppression{
			{Id: jsii.String("AwsSolutions-IAM5"), Reason: jsii.String(objectsReason), AppliesTo: objects},
		}, jsii.Bool(true))
	}
}

// suppressFargateNagFindings covers the Fargate executor's resources.
func suppressFargateNagFindings(td awsecs.FargateTaskDefinition) {
	cdknag.NagSuppressions_AddResourceSuppressions(td, &[]*cdknag.NagPackSuppression{{
		Id: jsii.String("AwsSolutions-ECS2"),
		Reason: jsii.String("The environment holds resource names and URLs (table, bucket, queues), the slot count and, when set, " +
			"the owners' concurrency limits (principal ARNs and numbers): no secrets; they change only when the stack does, which redeploys the task definition anyway."),
	}}, jsii.Bool(false))
	cdknag.NagSuppressions_AddResourceSuppressions(td.ObtainExecutionRole(), &[]*cdknag.NagPackSuppression{{
		Id:        jsii.String("AwsSolutions-IAM5"),
		Reason:    jsii.String("ecr:GetAuthorizationToken, which pulling the image needs, cannot be scoped to a resource (the rest of this CDK-generated policy names the image repository and the log group)."),
		AppliesTo: &[]interface{}{jsii.String("Resource::*")},
	}}, jsii.Bool(true))
	cdknag.NagSuppressions_AddResourceSuppressions(td.TaskRole(), &[]*cdknag.NagPackSuppression{{
		Id: jsii.String("AwsSolutions-IAM5"),
		Reason: jsii.String("The executor reads inputs (the inputs area, the input buckets the operator allows, and its job's plans, manifests and upstream outputs under jobs/), " +
			"and writes and tags objects only in this installation's job area (jobs/*: attempt outputs, and a stage's plans and manifests as its last committer); see the functions' roles."),
		AppliesTo: &[]interface{}{&cdknag.RegexAppliesTo{Regex: jsii.String(dataObjectPatterns)}, &cdknag.RegexAppliesTo{Regex: jsii.String(inputBucketObjects)}},
	}, {
		Id: jsii.String("AwsSolutions-IAM5"),
		Reason: jsii.String("ecs:UpdateTaskProtection on the executor cluster's tasks (task/<cluster>/*), which the ECS agent endpoint calls with the task role " +
			"when a task protects itself from scale-in: a task's id is only known once it runs."),
		AppliesTo: &[]interface{}{&cdknag.RegexAppliesTo{Regex: jsii.String(clusterTasks)}},
	}}, jsii.Bool(true))
}

// clusterTasks matches the tasks of a cluster of this stack
// (Cluster.ArnForTasks("*")).
const clusterTasks = `/^Resource::arn:<AWS::Partition>:ecs:<AWS::Region>:<AWS::AccountId>:task\/<[A-Za-z0-9]*ExecutorCluster[A-Za-z0-9]*>\/\*$/`

// dataObjectPatterns matches the wildcard object patterns of the data
// bucket (<bucket ARN>/<key pattern>, such as /* or /jobs/*/out/*), and
// nothing of another resource.
const dataObjectPatterns = `/^Resource::<[A-Za-z0-9]*Data[A-Za-z0-9]*\.Arn>\/[A-Za-z0-9_.*\/-]*\*[A-Za-z0-9_.*\/-]*$/`

// inputBucketObjects matches the objects of an operator-allowed input
// bucket (Props.InputBuckets), which the executor reads whole.
const inputBucketObjects = `/^Resource::arn:<AWS::Partition>:s3:::[a-z0-9.-]+\/\*$/`
