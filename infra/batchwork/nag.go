package batchwork

import (
	"github.com/aws/aws-cdk-go/awscdk/v2/awsecspatterns"
	"github.com/aws/jsii-runtime-go"
	"github.com/cdklabs/cdk-nag-go/cdknag/v2"
)

// suppressNagFindings records, next to the resources, why each cdk-nag
// AwsSolutions finding the construct keeps is acceptable. Every
// suppression is as narrow as cdk-nag allows (a rule, on one resource,
// for one wildcard) and carries its reason; the nag test fails on any
// finding not listed here.
func (b *Batchwork) suppressNagFindings() {
	objects := &[]interface{}{&cdknag.RegexAppliesTo{Regex: jsii.String(`/^Resource::<[A-Za-z0-9]*Data[A-Za-z0-9]*\.Arn>\/\*$/`)}}
	objectsReason := "Object keys are per job, stage, partition and attempt (jobs/<job>/...) and inputs sit under prefixes the user chooses, " +
		"so object actions need the bucket's object wildcard; the grant is confined to this installation's bucket and to the listed actions."
	for _, fn := range b.Functions {
		cdknag.NagSuppressions_AddResourceSuppressions(fn.Role(), &[]*cdknag.NagPackSuppression{
			{Id: jsii.String("AwsSolutions-IAM5"), Reason: jsii.String(objectsReason), AppliesTo: objects},
		}, jsii.Bool(true))
	}
	cdknag.NagSuppressions_AddResourceSuppressions(b.Bucket, &[]*cdknag.NagPackSuppression{{
		Id: jsii.String("AwsSolutions-S1"),
		Reason: jsii.String("Every access goes through the IAM-authorized API or a function role of this installation, and their logs record it; " +
			"server access logs would need a second bucket per installation. Enable CloudTrail S3 data events for an object-level audit trail."),
	}}, jsii.Bool(false))
}

// suppressFargateNagFindings covers the Fargate executor's resources.
func suppressFargateNagFindings(svc awsecspatterns.QueueProcessingFargateService) {
	td := svc.TaskDefinition()
	cdknag.NagSuppressions_AddResourceSuppressions(td, &[]*cdknag.NagPackSuppression{{
		Id: jsii.String("AwsSolutions-ECS2"),
		Reason: jsii.String("The environment holds resource names and URLs (table, bucket, queues) and a slot count, no secrets; " +
			"they change only when the stack does, which redeploys the task definition anyway."),
	}}, jsii.Bool(false))
	cdknag.NagSuppressions_AddResourceSuppressions(td.ObtainExecutionRole(), &[]*cdknag.NagPackSuppression{{
		Id:        jsii.String("AwsSolutions-IAM5"),
		Reason:    jsii.String("ecr:GetAuthorizationToken, which pulling the image needs, cannot be scoped to a resource (the rest of this CDK-generated policy names the image repository and the log group)."),
		AppliesTo: &[]interface{}{jsii.String("Resource::*")},
	}}, jsii.Bool(true))
	cdknag.NagSuppressions_AddResourceSuppressions(td.TaskRole(), &[]*cdknag.NagPackSuppression{{
		Id:        jsii.String("AwsSolutions-IAM5"),
		Reason:    jsii.String("The executor reads inputs and writes attempt outputs under per-job keys in this installation's bucket only (see the functions' roles)."),
		AppliesTo: &[]interface{}{&cdknag.RegexAppliesTo{Regex: jsii.String(`/^Resource::<[A-Za-z0-9]*Data[A-Za-z0-9]*\.Arn>\/\*$/`)}},
	}}, jsii.Bool(true))
}
