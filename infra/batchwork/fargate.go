package batchwork

import (
	"strconv"

	"github.com/aws/aws-cdk-go/awscdk/v2/awsapplicationautoscaling"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsec2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsecrassets"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsecs"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsecspatterns"
	"github.com/aws/constructs-go/constructs/v10"
	"github.com/aws/jsii-runtime-go"
)

// EnvSlots is the Fargate executor's concurrent task count
// (cmd/batchwork-executor).
const EnvSlots = "BATCHWORK_SLOTS"

// fargateExecutor runs the long-polling executor (cmd/batchwork-executor,
// built from the repository's Dockerfile at deploy time) as a service that
// scales on the normal queue's depth, for tasks longer than Lambda's 15
// minutes. Its tasks poll all three ready queues.
//
// The VPC has public subnets only and no NAT gateway: the tasks only call
// AWS APIs, and a NAT gateway would cost more than a small fleet.
func (b *Batchwork) fargateExecutor(c constructs.Construct, p Props) {
	vpc := awsec2.NewVpc(c, jsii.String("ExecutorVpc"), &awsec2.VpcProps{
		MaxAzs:      jsii.Number(2),
		NatGateways: jsii.Number(0),
		SubnetConfiguration: &[]*awsec2.SubnetConfiguration{
			{Name: jsii.String("public"), SubnetType: awsec2.SubnetType_PUBLIC},
		},
		FlowLogs: &map[string]*awsec2.FlowLogOptions{
			"rejected": {TrafficType: awsec2.FlowLogTrafficType_REJECT},
		},
	})
	cluster := awsecs.NewCluster(c, jsii.String("ExecutorCluster"), &awsecs.ClusterProps{
		Vpc:                 vpc,
		ContainerInsightsV2: awsecs.ContainerInsights_ENABLED,
	})
	env := *b.environment(FnExecutor)
	env[EnvSlots] = jsii.String(strconv.Itoa(p.FargateSlots))
	svc := awsecspatterns.NewQueueProcessingFargateService(c, jsii.String("FargateExecutor"), &awsecspatterns.QueueProcessingFargateServiceProps{
		Cluster: cluster,
		Queue:   b.Normal,
		Image:   fargateImage(p),
		RuntimePlatform: &awsecs.RuntimePlatform{
			CpuArchitecture:       awsecs.CpuArchitecture_ARM64(),
			OperatingSystemFamily: awsecs.OperatingSystemFamily_LINUX(),
		},
		Cpu:                    jsii.Number(1024),
		MemoryLimitMiB:         jsii.Number(2048),
		Environment:            &env,
		AssignPublicIp:         jsii.Bool(true),
		TaskSubnets:            &awsec2.SubnetSelection{SubnetType: awsec2.SubnetType_PUBLIC},
		MinScalingCapacity:     jsii.Number(0),
		MaxScalingCapacity:     jsii.Number(float64(p.FargateMaxTasks)),
		DisableCpuBasedScaling: jsii.Bool(true),
		ScalingSteps: &[]*awsapplicationautoscaling.ScalingInterval{
			{Upper: jsii.Number(0), Change: jsii.Number(-1)},
			{Lower: jsii.Number(1), Change: jsii.Number(1)},
			{Lower: jsii.Number(100), Change: jsii.Number(5)},
		},
		EnableLogging: jsii.Bool(true),
	})
	role := svc.TaskDefinition().TaskRole()
	g := permissions[FnExecutor]
	b.grant(role, g)
	// The pattern grants consuming its own queue; the executor polls the
	// other two as well.
	for _, q := range b.readyQueues() {
		q.Grant(role, *jsii.Strings("sqs:ReceiveMessage", "sqs:DeleteMessage")...)
	}
	suppressFargateNagFindings(svc)
}

// fargateImage is Props.FargateImage, else the image built at deploy time
// from the Dockerfile in Props.DockerContext (for linux/arm64, which the
// service runs on).
func fargateImage(p Props) awsecs.ContainerImage {
	if p.FargateImage != nil {
		return p.FargateImage
	}
	return awsecs.ContainerImage_FromAsset(jsii.String(p.DockerContext), &awsecs.AssetImageProps{
		File:      jsii.String("Dockerfile"),
		Platform:  awsecrassets.Platform_LINUX_ARM64(),
		Exclude:   jsii.Strings(".git", ".venv", "node_modules", "cdk.out", "bin", "dist"),
		BuildArgs: buildArgs(p.FargateBuildArgs),
	})
}

// buildArgs is args as jsii wants them; nil when empty, so the asset's
// hash (and the template) stay as they were without build arguments.
func buildArgs(args map[string]string) *map[string]*string {
	if len(args) == 0 {
		return nil
	}
	m := make(map[string]*string, len(args))
	for k, v := range args {
		m[k] = jsii.String(v)
	}
	return &m
}
