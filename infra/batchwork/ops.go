package batchwork

import (
	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awscloudwatch"
	"github.com/aws/aws-cdk-go/awscdk/v2/awscloudwatchactions"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsiam"
	"github.com/aws/aws-cdk-go/awscdk/v2/awskms"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssns"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssqs"
	"github.com/aws/constructs-go/constructs/v10"
	"github.com/aws/jsii-runtime-go"

	"github.com/batchwork/batchwork/infra/template"
	"github.com/batchwork/batchwork/internal/metrics"
	"github.com/batchwork/batchwork/shared/control"
	"github.com/batchwork/batchwork/shared/tuning"
)

// operations adds the alarms, the topic they notify (Props.AlarmTopic or
// one of the construct's, output as AlarmTopicArn) and the dashboard. The
// dashboard and the failed-jobs alarm read Batchwork's own metrics, which
// the functions and executors write as CloudWatch EMF (internal/metrics)
// in the Batchwork namespace, per stack.
func (b *Batchwork) operations(c constructs.Construct, p Props) {
	minute := awscdk.Duration_Minutes(jsii.Number(1))
	five := awscdk.Duration_Minutes(jsii.Number(5))
	stack := awscdk.Stack_Of(c).StackName()
	// own is one of Batchwork's metrics of this stack, over extra
	// dimensions (Priority, Kind: fixed sets, never job ids).
	own := func(name, stat, label string, period awscdk.Duration, extra map[string]string) awscloudwatch.Metric {
		dims := map[string]*string{metrics.DimStack: stack}
		for k, v := range extra {
			dims[k] = jsii.String(v)
		}
		mp := &awscloudwatch.MetricProps{
			Namespace: jsii.String(metrics.Namespace), MetricName: jsii.String(name), DimensionsMap: &dims,
			Statistic: jsii.String(stat), Period: period,
		}
		if label != "" { // an alarm's metric has none: with one, it would be metric math
			mp.Label = jsii.String(label)
		}
		return awscloudwatch.NewMetric(mp)
	}
	alarm := func(id string, m awscloudwatch.Metric, threshold float64, periods float64, desc string) {
		b.Alarms = append(b.Alarms, m.CreateAlarm(c, jsii.String(id), &awscloudwatch.CreateAlarmOptions{
			Threshold:          jsii.Number(threshold),
			EvaluationPeriods:  jsii.Number(periods),
			ComparisonOperator: awscloudwatch.ComparisonOperator_GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
			TreatMissingData:   awscloudwatch.TreatMissingData_NOT_BREACHING,
			AlarmDescription:   jsii.String(desc),
		}))
	}
	alarm("DeadLettersNotEmpty",
		b.DeadLetters.MetricApproximateNumberOfMessagesVisible(&awscloudwatch.MetricOptions{Period: minute, Statistic: jsii.String("Maximum")}),
		1, 1, "A message reached the dead-letter queue: the sweep moves live tasks' messages back; look at what stays.")
	alarm("SweepErrors",
		b.Functions[FnSweep].MetricErrors(&awscloudwatch.MetricOptions{Period: five, Statistic: jsii.String("Sum")}),
		1, 1, "The sweep failed: lost messages, expired leases and dead letters are not being repaired.")
	for _, q := range []struct {
		id string
		q  awssqs.Queue
	}{{"High", b.High}, {"Normal", b.Normal}, {"Low", b.Low}} {
		alarm("OldestMessage"+q.id,
			q.q.MetricApproximateAgeOfOldestMessage(&awscloudwatch.MetricOptions{Period: minute, Statistic: jsii.String("Maximum")}),
			tuning.OldestMessageAlarm.Seconds(), 5,
			"A ready message has waited too long: executors are missing, throttled or failing.")
	}
	alarm("JobsFailed", own(metrics.JobsFailed, "Sum", "", five, nil), 1, 1,
		"A job ended FAILED (a task failed after its last attempt, or a deadline passed): `batchwork status` and `batchwork tasks` show why.")

	b.AlarmTopic = p.AlarmTopic
	if b.AlarmTopic == nil {
		b.AlarmTopic = alarmTopic(c)
	}
	notify := awscloudwatchactions.NewSnsAction(b.AlarmTopic)
	for _, a := range b.Alarms {
		a.AddAlarmAction(notify)
		a.AddOkAction(notify) // so a chat channel also hears the recovery
	}
	out := awscdk.NewCfnOutput(c, jsii.String(template.OutAlarmTopic), &awscdk.CfnOutputProps{
		Value: b.AlarmTopic.TopicArn(),
		Description: jsii.String("SNS topic of Batchwork's alarms (dead letters, sweep errors, oldest ready message, failed jobs): " +
			"subscribe an email address, a pager or Slack through AWS Chatbot to it"),
	})
	out.OverrideLogicalId(jsii.String(p.OutputPrefix + template.OutAlarmTopic))

	var depth, done, errs []awscloudwatch.IMetric
	for _, q := range b.readyQueues() {
		depth = append(depth, q.MetricApproximateNumberOfMessagesVisible(nil))
		done = append(done, q.MetricNumberOfMessagesDeleted(nil))
	}
	depth = append(depth, b.DeadLetters.MetricApproximateNumberOfMessagesVisible(nil))
	var groups []*string
	for _, name := range []string{FnAPI, FnClaim, FnCommit, FnSweep, FnExecutor} {
		if b.Functions[name] == nil {
			continue // claim and commit: only for remote executors
		}
		errs = append(errs, b.Functions[name].MetricErrors(nil))
		groups = append(groups, b.Functions[name].LogGroup().LogGroupName())
	}
	// Job states are counted from the handlers' structured logs (slog
	// JSON, "msg"); tasks from Batchwork's metrics.
	logs := func(title string, lines ...string) awscloudwatch.IWidget {
		return awscloudwatch.NewLogQueryWidget(&awscloudwatch.LogQueryWidgetProps{
			Title: jsii.String(title), LogGroupNames: &groups, QueryLines: jsii.Strings(lines...),
			View: awscloudwatch.LogQueryVisualizationType_STACKEDAREA, Width: jsii.Number(12),
		})
	}
	graph := func(title string, width float64, left []awscloudwatch.IMetric) awscloudwatch.IWidget {
		return awscloudwatch.NewGraphWidget(&awscloudwatch.GraphWidgetProps{Title: jsii.String(title), Left: &left, Width: jsii.Number(width)})
	}
	tasks := []awscloudwatch.IMetric{
		own(metrics.TasksClaimed, "Sum", "claimed", minute, nil),
		own(metrics.TasksCommitted, "Sum", "committed", minute, nil),
		own(metrics.TasksRetried, "Sum", "retried", minute, nil),
		own(metrics.TasksFailed, "Sum", "failed for good", minute, nil),
		own(metrics.JobsFailed, "Sum", "jobs failed", minute, nil),
	}
	var latency []awscloudwatch.IMetric
	for _, l := range []struct{ name, label string }{
		{metrics.ReadyToClaimed, "ready → claimed"}, {metrics.TaskDuration, "task duration"}, {metrics.CommitLatency, "commit"},
	} {
		for _, stat := range []string{"p50", "p90", "p99"} {
			latency = append(latency, own(l.name, stat, l.label+" "+stat, minute, nil))
		}
	}
	var byPriority []awscloudwatch.IMetric
	for _, pr := range []string{"high", "normal", "low"} {
		byPriority = append(byPriority,
			own(metrics.TasksCommitted, "Sum", pr+" committed", minute, map[string]string{metrics.DimPriority: pr}),
			own(metrics.ReadyToClaimed, "p90", pr+" ready → claimed p90 (ms)", minute, map[string]string{metrics.DimPriority: pr}))
	}
	var repairs []awscloudwatch.IMetric
	for _, k := range control.Repairs {
		repairs = append(repairs, own(metrics.SweepRepairs, "Sum", string(k), five, map[string]string{metrics.DimKind: string(k)}))
	}
	b.Dashboard = awscloudwatch.NewDashboard(c, jsii.String("Dashboard"), &awscloudwatch.DashboardProps{
		Widgets: &[]*[]awscloudwatch.IWidget{
			{
				graph("Tasks: claimed, committed, retried, failed; jobs failed", 12, tasks),
				graph("Latency (ms): ready → claimed, task duration, commit", 12, latency),
			},
			{
				graph("By priority: committed, ready → claimed p90", 12, byPriority),
				graph("Sweep repairs by kind", 12, repairs),
			},
			{
				logs("Jobs by state", `filter msg in ["job submitted", "job succeeded", "job failed"]`, "stats count(*) by msg, bin(5m)"),
				logs("Tasks by outcome", `filter msg in ["task committed", "task failed, will retry", "lease lost; abandoning attempt", "commit fenced: a newer attempt holds the task"]`, "stats count(*) by msg, bin(5m)"),
			},
			{
				graph("Throughput: task messages done", 8, done),
				graph("Queue depth (ready, dead letters)", 8, depth),
				graph("Failures: function errors", 8, errs),
			},
		},
	})
}

// alarmTopic is the construct's own alarm topic: encrypted with a key of
// its own (rotated), which CloudWatch may use to publish (an AWS managed
// key would refuse it), and refusing requests without TLS.
func alarmTopic(c constructs.Construct) awssns.ITopic {
	key := awskms.NewKey(c, jsii.String("AlarmTopicKey"), &awskms.KeyProps{
		Description:       jsii.String("Batchwork alarm topic encryption"),
		EnableKeyRotation: jsii.Bool(true),
		RemovalPolicy:     awscdk.RemovalPolicy_DESTROY,
	})
	key.AddToResourcePolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
		Sid:        jsii.String("CloudWatchAlarmsPublish"),
		Principals: &[]awsiam.IPrincipal{awsiam.NewServicePrincipal(jsii.String("cloudwatch.amazonaws.com"), nil)},
		Actions:    jsii.Strings("kms:Decrypt", "kms:GenerateDataKey*"),
		Resources:  jsii.Strings("*"),
		// For this account's alarms only: without the conditions, an alarm
		// of any account could have CloudWatch use the key (the confused
		// deputy).
		Conditions: &map[string]any{
			"StringEquals": map[string]any{"aws:SourceAccount": awscdk.Aws_ACCOUNT_ID()},
			"ArnLike": map[string]any{"aws:SourceArn": awscdk.Fn_Join(jsii.String(""), &[]*string{
				jsii.String("arn:"), awscdk.Aws_PARTITION(), jsii.String(":cloudwatch:"), awscdk.Aws_REGION(), jsii.String(":"),
				awscdk.Aws_ACCOUNT_ID(), jsii.String(":alarm:*"),
			})},
		},
	}), jsii.Bool(true))
	return awssns.NewTopic(c, jsii.String("AlarmTopic"), &awssns.TopicProps{
		DisplayName: jsii.String("Batchwork alarms"),
		MasterKey:   key,
		EnforceSSL:  jsii.Bool(true),
	})
}
