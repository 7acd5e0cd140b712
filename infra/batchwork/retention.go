package batchwork

import (
	"fmt"
	"strconv"
	"time"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awss3"
	"github.com/aws/jsii-runtime-go"

	"github.com/batchwork/batchwork/shared/lambdaenv"
)

// Retention (Props.Retention): how long ended jobs are kept.
//
//   - Records: whatever ends a job (lambdaenv.EnvRetentionDays on every
//     function and the Fargate executor; dynamo.Store.SetRetention) puts
//     it in the sweep index at its end plus the retention, when the sweep
//     deletes every record of it, and gives the records it writes then
//     (the job item, its list entry, its state copies) a TTL a day later
//     in the table's TTL attribute, as a backstop (DynamoDB deletes
//     expired items in the background, typically within 48 hours).
//   - Objects: a lifecycle rule expires every object under jobs/ (plans,
//     attempt outputs, manifests) the retention after it was written.
//     S3 counts age from an object's creation, not from its job's end, so
//     a job must end before its first objects expire: the construct
//     refuses a retention under lambdaenv.MinRetentionDays (the longest
//     deadline, spec.MaxDeadline, and a day), and the submitting
//     functions give a job without a deadline the longest one
//     (control.Config.Retention).
//
// Published folders (a spec's output, in the owners' outputs area or an
// output bucket) and inputs are the owners' and never expire.

const retentionRuleID = "expire-ended-jobs"

// retentionDays checks Props.Retention and returns it in days (0: jobs
// are kept).
func retentionDays(p Props) int {
	if p.Retention == 0 {
		return 0
	}
	const day = 24 * time.Hour
	days := int(p.Retention / day)
	if p.Retention < 0 || p.Retention%day != 0 || days < lambdaenv.MinRetentionDays {
		panic(fmt.Sprintf("batchwork: retention %v: want 0 (keep jobs) or a whole number of days from %d "+
			"(a job runs up to 7 days, and objects under jobs/ expire by their age, so a shorter retention "+
			"could expire a running job's own plans and outputs)", p.Retention, lambdaenv.MinRetentionDays))
	}
	return days
}

// retain adds the lifecycle rule that expires the job area after the
// retention, and remembers the retention for the functions' environment.
func (b *Batchwork) retain(p Props) {
	b.retentionDays = retentionDays(p)
	if b.retentionDays == 0 {
		return
	}
	b.Bucket.AddLifecycleRule(&awss3.LifecycleRule{
		Id:         jsii.String(retentionRuleID),
		Prefix:     jsii.String("jobs/"),
		Expiration: awscdk.Duration_Days(jsii.Number(float64(b.retentionDays))),
	})
}

// retentionEnv adds the retention to a function's environment.
func (b *Batchwork) retentionEnv(env map[string]*string) {
	if b.retentionDays > 0 {
		env[lambdaenv.EnvRetentionDays] = jsii.String(strconv.Itoa(b.retentionDays))
	}
}
