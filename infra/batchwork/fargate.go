package batchwork

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsapplicationautoscaling"
	"github.com/aws/aws-cdk-go/awscdk/v2/awscloudwatch"
	"github.com/aws/aws-cdk-go/awscdk/v2/awscloudwatchactions"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsec2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsecrassets"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsecs"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslogs"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssqs"
	"github.com/aws/constructs-go/constructs/v10"
	"github.com/aws/jsii-runtime-go"
)

// EnvSlots is the Fargate executor's concurrent task count
// (cmd/batchwork-executor).
const EnvSlots = "BATCHWORK_SLOTS"

// Fargate executor scaling (scaleOnBacklog).
const (
	// scalePeriod is the scaling metric's period: SQS publishes its queue
	// metrics every minute.
	scalePeriod = 1 // minute
	// scaleInWindow is how many periods the fleet remembers its largest
	// need: it shrinks only after the need has been lower for this long,
	// and stops its last task after this many periods with nothing
	// queued or running.
	scaleInWindow = 5
	// maxScalingSteps is Application Auto Scaling's default quota of step
	// adjustments in one policy.
	maxScalingSteps = 20
	// stopTimeout is how long ECS waits between SIGTERM and SIGKILL: the
	// longest Fargate allows. The host drains for 110 s (internal/host).
	stopTimeout = 120 // seconds
)

// fargateExecutor runs the long-polling executor (cmd/batchwork-executor,
// built from the repository's Dockerfile at deploy time) as a service of
// 0 to FargateMaxTasks tasks, for tasks longer than Lambda's 15 minutes.
// Each task polls all three ready queues with FargateSlots slots, and
// protects itself from scale-in while a slot runs a task
// (internal/host/protection.go); the service scales on the backlog of all
// three queues (scaleOnBacklog).
//
// The VPC has public subnets only and no NAT gateway: the tasks only call
// AWS APIs, and a NAT gateway would cost more than a small fleet.
//
// The construct ids are those of the ecs-patterns
// QueueProcessingFargateService this replaces (see scaleOnBacklog for
// why), so an update keeps the task definition's family, the service and
// its scalable target.
func (b *Batchwork) fargateExecutor(c constructs.Construct, p Props) {
	// The flow log's own group would keep its lines two years and outlive
	// the stack; this one expires and goes with it, as every group does.
	flowLogs := awslogs.NewLogGroup(c, jsii.String("ExecutorVpcFlowLogs"), &awslogs.LogGroupProps{
		Retention:     logRetention,
		RemovalPolicy: awscdk.RemovalPolicy_DESTROY,
	})
	vpc := awsec2.NewVpc(c, jsii.String("ExecutorVpc"), &awsec2.VpcProps{
		MaxAzs:      jsii.Number(2),
		NatGateways: jsii.Number(0),
		SubnetConfiguration: &[]*awsec2.SubnetConfiguration{
			{Name: jsii.String("public"), SubnetType: awsec2.SubnetType_PUBLIC},
		},
		FlowLogs: &map[string]*awsec2.FlowLogOptions{
			"rejected": {TrafficType: awsec2.FlowLogTrafficType_REJECT, Destination: awsec2.FlowLogDestination_ToCloudWatchLogs(flowLogs, nil)},
		},
	})
	cluster := awsecs.NewCluster(c, jsii.String("ExecutorCluster"), &awsecs.ClusterProps{
		Vpc:                 vpc,
		ContainerInsightsV2: awsecs.ContainerInsights_ENABLED,
	})
	b.oomKillRule(c, cluster) // oom.go
	base := fargateService{scope: "FargateExecutor", cpu: 1024, memoryMiB: 2048, slots: p.FargateSlots,
		queues: b.readyQueues(), queueNames: []string{"High", "Normal", "Low"}}
	if executorSizes(p) != nil { // executorsizes.go: it runs the default size's tasks
		base.size = defaultSizeName()
	}
	b.fargateService(c, p, cluster, base)
	b.sizedFargateExecutors(c, p, cluster) // executorsizes.go
}

// fargateService is one Fargate executor service: its construct id, its
// task's cpu and memory (a valid Fargate combination), its slots, the
// ready queues it polls (named for the scaling metric), and the executor
// size it is told (empty: none).
type fargateService struct {
	scope          string
	cpu, memoryMiB int
	slots          int
	queues         []awssqs.Queue
	queueNames     []string
	size           string
}

// fargateService deploys the task definition and service of f, scaled on
// the backlog of its queues, whose role may receive from those queues
// only. The first service deployed creates the executors' log group
// (b.fargateLogs, which the api reads; see logRetention); the others
// write to it too.
func (b *Batchwork) fargateService(c constructs.Construct, p Props, cluster awsecs.Cluster, f fargateService) {
	env := *b.environment(FnExecutor)
	env[EnvSlots] = jsii.String(strconv.Itoa(f.slots))
	if f.size != "" {
		env[EnvExecutorMemory] = jsii.String(f.size)
	}
	scope := constructs.NewConstruct(c, jsii.String(f.scope))
	td := awsecs.NewFargateTaskDefinition(scope, jsii.String("QueueProcessingTaskDef"), &awsecs.FargateTaskDefinitionProps{
		Cpu:            jsii.Number(float64(f.cpu)),
		MemoryLimitMiB: jsii.Number(float64(f.memoryMiB)),
		RuntimePlatform: &awsecs.RuntimePlatform{
			CpuArchitecture:       awsecs.CpuArchitecture_ARM64(),
			OperatingSystemFamily: awsecs.OperatingSystemFamily_LINUX(),
		},
	})
	if b.fargateLogs == nil {
		// The log driver's own group would never expire and would outlive
		// the stack.
		b.fargateLogs = awslogs.NewLogGroup(c, jsii.String("FargateExecutorLogs"), &awslogs.LogGroupProps{
			Retention:     logRetention,
			RemovalPolicy: awscdk.RemovalPolicy_DESTROY,
		})
	}
	logDriver := awsecs.NewAwsLogDriver(&awsecs.AwsLogDriverProps{StreamPrefix: jsii.String(f.scope), LogGroup: b.fargateLogs})
	td.AddContainer(jsii.String("QueueProcessingContainer"), &awsecs.ContainerDefinitionOptions{
		Image:       fargateImage(p),
		Environment: &env,
		Logging:     logDriver,
		// ECS's default is 30 s: a scale-in or a deployment would kill
		// running tasks before the host's drain lets them commit.
		StopTimeout: awscdk.Duration_Seconds(jsii.Number(stopTimeout)),
	})
	svc := awsecs.NewFargateService(scope, jsii.String("QueueProcessingFargateService"), &awsecs.FargateServiceProps{
		Cluster:           cluster,
		TaskDefinition:    td,
		AssignPublicIp:    jsii.Bool(true),
		VpcSubnets:        &awsec2.SubnetSelection{SubnetType: awsec2.SubnetType_PUBLIC},
		MinHealthyPercent: jsii.Number(50),
		MaxHealthyPercent: jsii.Number(200),
		// A deployment whose tasks never reach a steady state (a bad image,
		// a crash at start) stops and returns to the last one that did,
		// rather than replacing tasks until someone notices.
		CircuitBreaker: &awsecs.DeploymentCircuitBreaker{Enable: jsii.Bool(true), Rollback: jsii.Bool(true)},
	})
	b.scaleOnBacklog(svc, p, b.tasksNeeded(f.queues, f.queueNames, f.slots))
	role := td.TaskRole()
	b.grant(role, permissions[FnExecutor])
	for _, q := range f.queues {
		q.Grant(role, *jsii.Strings("sqs:ReceiveMessage", "sqs:DeleteMessage")...)
	}
	if f.size != "" && f.size != defaultSizeName() {
		// grant gives visibility changes on the priority queues; a sized
		// executor changes its own queue's messages' visibility.
		for _, q := range f.queues {
			q.Grant(role, *jsii.Strings(visibilityActions...)...)
		}
	}
	// Scale-in protection: the ECS agent endpoint calls
	// UpdateTaskProtection with the task role's credentials. Granted on
	// this cluster's tasks only.
	cluster.GrantTaskProtection(role)
	suppressFargateNagFindings(td)
}

// scaleOnBacklog scales the service to the tasks its backlog needs:
//
//	desired = ceil((visible + in flight, summed over the high, normal
//	          and low ready queues) / FargateSlots), 0..FargateMaxTasks
//
// Visible messages are tasks waiting; messages not visible are tasks
// running (a slot holds its message hidden while it runs) or waiting out
// a retry's delay. Counting those running keeps the fleet that runs them:
// without them, an empty queue would scale a busy fleet in.
//
// It is step scaling with ExactCapacity on that metric-math expression,
// in two policies:
//   - out: an alarm when the expression is 1 or more in any of the last
//     scaleInWindow minutes, setting the capacity to its largest value
//     over those minutes (the policy's Maximum aggregation). So a new
//     backlog scales out within a minute of SQS reporting it, from zero
//     and on any priority, and the fleet shrinks only once its need has
//     been lower for scaleInWindow minutes.
//   - to zero: an alarm when the expression has been 0 (nothing queued,
//     nothing running) for all of the last scaleInWindow minutes.
//
// Tasks that a scale-in would stop while they run are protected by the
// host (ECS task scale-in protection), so a shrinking fleet stops idle
// tasks only.
//
// Why not the alternatives:
//   - ecs-patterns' QueueProcessingFargateService, which this used before,
//     always adds a step policy on one queue's visible messages: a backlog
//     on the high or low queue alone never started a task, and the fleet
//     scaled in while its tasks ran once that queue was empty.
//   - Target tracking on backlog per task (the AWS-documented SQS
//     pattern) divides by the running task count, which is zero when
//     the fleet is: it cannot scale from zero without a second policy,
//     and it scales in on its own 15-minute alarms.
//   - ChangeInCapacity steps move by fixed amounts per alarm; the need
//     is a number of tasks, which ExactCapacity sets directly.
//
// One step per task count up to maxScalingSteps; beyond that, steps
// round the need up (scalingSteps).
func (b *Batchwork) scaleOnBacklog(svc awsecs.FargateService, p Props, need awscloudwatch.MathExpression) {
	count := svc.AutoScaleTaskCount(&awsapplicationautoscaling.EnableScalingProps{
		MinCapacity: jsii.Number(0),
		MaxCapacity: jsii.Number(float64(p.FargateMaxTasks)),
	})

	out := awsapplicationautoscaling.NewStepScalingAction(count, jsii.String("BacklogScaleOut"), &awsapplicationautoscaling.StepScalingActionProps{
		ScalingTarget:         count,
		AdjustmentType:        awsapplicationautoscaling.AdjustmentType_EXACT_CAPACITY,
		MetricAggregationType: awsapplicationautoscaling.MetricAggregationType_MAXIMUM,
		Cooldown:              awscdk.Duration_Minutes(jsii.Number(scalePeriod)),
	})
	// Bounds are relative to the alarm's threshold of 1 task.
	lower := 0
	steps := scalingSteps(p.FargateMaxTasks, maxScalingSteps)
	for i, n := range steps {
		tier := &awsapplicationautoscaling.AdjustmentTier{Adjustment: jsii.Number(float64(n)), LowerBound: jsii.Number(float64(lower))}
		if i < len(steps)-1 {
			tier.UpperBound = jsii.Number(float64(n))
		}
		out.AddAdjustment(tier)
		lower = n
	}
	awscloudwatch.NewAlarm(count, jsii.String("BacklogScaleOutAlarm"), &awscloudwatch.AlarmProps{
		AlarmDescription:   jsii.String("Tasks are queued or running: scale the Fargate executor to the most tasks needed in the last " + strconv.Itoa(scaleInWindow) + " minutes"),
		Metric:             need,
		ComparisonOperator: awscloudwatch.ComparisonOperator_GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
		Threshold:          jsii.Number(1),
		EvaluationPeriods:  jsii.Number(scaleInWindow),
		DatapointsToAlarm:  jsii.Number(1),
		TreatMissingData:   awscloudwatch.TreatMissingData_NOT_BREACHING,
	}).AddAlarmAction(awscloudwatchactions.NewApplicationScalingAction(out))

	zero := awsapplicationautoscaling.NewStepScalingAction(count, jsii.String("BacklogScaleToZero"), &awsapplicationautoscaling.StepScalingActionProps{
		ScalingTarget:         count,
		AdjustmentType:        awsapplicationautoscaling.AdjustmentType_EXACT_CAPACITY,
		MetricAggregationType: awsapplicationautoscaling.MetricAggregationType_MAXIMUM,
		Cooldown:              awscdk.Duration_Minutes(jsii.Number(scaleInWindow)),
	})
	zero.AddAdjustment(&awsapplicationautoscaling.AdjustmentTier{Adjustment: jsii.Number(0), UpperBound: jsii.Number(0)})
	// Missing data is not breaching: no task stops because CloudWatch
	// has no data points.
	awscloudwatch.NewAlarm(count, jsii.String("BacklogScaleToZeroAlarm"), &awscloudwatch.AlarmProps{
		AlarmDescription:   jsii.String("Nothing queued or running for " + strconv.Itoa(scaleInWindow) + " minutes: stop the Fargate executor's tasks"),
		Metric:             need,
		ComparisonOperator: awscloudwatch.ComparisonOperator_LESS_THAN_OR_EQUAL_TO_THRESHOLD,
		Threshold:          jsii.Number(0),
		EvaluationPeriods:  jsii.Number(scaleInWindow),
		DatapointsToAlarm:  jsii.Number(scaleInWindow),
		TreatMissingData:   awscloudwatch.TreatMissingData_NOT_BREACHING,
	}).AddAlarmAction(awscloudwatchactions.NewApplicationScalingAction(zero))
}

// tasksNeeded is the metric-math expression scaleOnBacklog scales on: the
// tasks the backlog of a service's ready queues (names: parallel, for the
// metric ids) needs, slots to a task. FILL makes a queue without data
// points (SQS stops publishing for a queue idle for six hours) count as
// empty rather than leave the sum without a value.
func (b *Batchwork) tasksNeeded(queues []awssqs.Queue, names []string, slots int) awscloudwatch.MathExpression {
	opts := &awscloudwatch.MetricOptions{Period: awscdk.Duration_Minutes(jsii.Number(scalePeriod)), Statistic: jsii.String("Maximum")}
	using := map[string]awscloudwatch.IMetric{}
	var terms []string
	for i, q := range queues {
		name := names[i]
		using["visible"+name] = q.MetricApproximateNumberOfMessagesVisible(opts)
		using["inFlight"+name] = q.MetricApproximateNumberOfMessagesNotVisible(opts)
		terms = append(terms, "FILL(visible"+name+", 0)", "FILL(inFlight"+name+", 0)")
	}
	return awscloudwatch.NewMathExpression(&awscloudwatch.MathExpressionProps{
		Expression:   jsii.String(fmt.Sprintf("CEIL((%s) / %d)", strings.Join(terms, " + "), slots)),
		UsingMetrics: &using,
		Label:        jsii.String("Fargate tasks needed"),
		Period:       awscdk.Duration_Minutes(jsii.Number(scalePeriod)),
	})
}

// scalingSteps are the capacities the scale-out policy sets, ascending,
// ending at max, at most limit of them: a need of n tasks sets the first
// step at or above n. Up to limit tasks, every count is a step; beyond,
// the first half of the steps are 1, 2, ... and the rest grow
// geometrically to max, so a large need is rounded up by a bounded
// fraction rather than capped.
func scalingSteps(max, limit int) []int {
	if max <= limit {
		steps := make([]int, max)
		for i := range steps {
			steps[i] = i + 1
		}
		return steps
	}
	exact := limit / 2
	steps := make([]int, 0, limit)
	for n := 1; n <= exact; n++ {
		steps = append(steps, n)
	}
	rest := limit - exact
	ratio := math.Pow(float64(max)/float64(exact), 1/float64(rest))
	for i := 1; i <= rest; i++ {
		n := int(math.Ceil(float64(exact) * math.Pow(ratio, float64(i))))
		if i == rest || n > max {
			n = max
		}
		if n > steps[len(steps)-1] {
			steps = append(steps, n)
		}
	}
	return steps
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
