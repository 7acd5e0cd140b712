package batchwork

import (
	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awscloudwatch"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssqs"
	"github.com/aws/constructs-go/constructs/v10"
	"github.com/aws/jsii-runtime-go"

	"github.com/batchwork/batchwork/shared/tuning"
)

// operations adds the alarms and the dashboard. Alarms have no actions:
// add yours (an SNS topic, a pager) through Batchwork.Alarms.
func (b *Batchwork) operations(c constructs.Construct) {
	minute := awscdk.Duration_Minutes(jsii.Number(1))
	five := awscdk.Duration_Minutes(jsii.Number(5))
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
	// Job and task states are counted from the handlers' structured logs
	// (slog JSON, "msg"), so no custom metric has to be published.
	logs := func(title string, lines ...string) awscloudwatch.IWidget {
		return awscloudwatch.NewLogQueryWidget(&awscloudwatch.LogQueryWidgetProps{
			Title: jsii.String(title), LogGroupNames: &groups, QueryLines: jsii.Strings(lines...),
			View: awscloudwatch.LogQueryVisualizationType_STACKEDAREA, Width: jsii.Number(12),
		})
	}
	b.Dashboard = awscloudwatch.NewDashboard(c, jsii.String("Dashboard"), &awscloudwatch.DashboardProps{
		Widgets: &[]*[]awscloudwatch.IWidget{
			{
				logs("Jobs by state", `filter msg in ["job submitted", "job succeeded", "job failed"]`, "stats count(*) by msg, bin(5m)"),
				logs("Tasks by outcome", `filter msg in ["task committed", "task failed, will retry", "lease lost; abandoning attempt", "commit fenced: a newer attempt holds the task"]`, "stats count(*) by msg, bin(5m)"),
			},
			{
				awscloudwatch.NewGraphWidget(&awscloudwatch.GraphWidgetProps{Title: jsii.String("Throughput: task messages done"), Left: &done, Width: jsii.Number(8)}),
				awscloudwatch.NewGraphWidget(&awscloudwatch.GraphWidgetProps{Title: jsii.String("Queue depth (ready, dead letters)"), Left: &depth, Width: jsii.Number(8)}),
				awscloudwatch.NewGraphWidget(&awscloudwatch.GraphWidgetProps{Title: jsii.String("Failures: function errors"), Left: &errs, Width: jsii.Number(8)}),
			},
		},
	})
}
