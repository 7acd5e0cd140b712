package lambdaenv

import (
	"fmt"
	"strconv"
	"time"
)

// EnvRetentionDays is how many days an installation keeps ended jobs
// (the construct's Retention, in whole days), set on every function and
// the Fargate executor: whatever ends a job schedules its deletion by the
// sweep at its end plus this, with a TTL on its own records as a backstop
// (dynamo.Store.SetRetention; the sweep's control.Config.Retention), and
// the submitting functions give a job without a deadline the longest one
// (control.Config.Retention), so no job outlives the bucket's lifecycle
// rule on jobs/. Unset or 0: jobs are kept.
const EnvRetentionDays = "BATCHWORK_RETENTION_DAYS"

// MinRetentionDays is the shortest retention: a job runs at most 7 days
// (spec.MaxDeadline), and an object under jobs/ expires that many days
// after it was written, so a running job's plans and outputs must outlive
// the longest job by a day.
const MinRetentionDays = 8

// RetentionFromEnv reads EnvRetentionDays through get.
func RetentionFromEnv(get func(string) string) (time.Duration, error) {
	s := get(EnvRetentionDays)
	if s == "" {
		return 0, nil
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 0 || (n > 0 && n < MinRetentionDays) {
		return 0, fmt.Errorf("%s=%q: want 0 (keep jobs) or a whole number of days from %d", EnvRetentionDays, s, MinRetentionDays)
	}
	return time.Duration(n) * 24 * time.Hour, nil
}
