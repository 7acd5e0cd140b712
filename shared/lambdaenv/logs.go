package lambdaenv

import (
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/cloudwatchlogs"

	"github.com/batchwork/batchwork/shared/logs"
)

// EnvLogGroups names the log groups GET /jobs/{id}/logs reads a job's
// lines from, comma-separated: every Batchwork function's and the Fargate
// executor's. The construct sets it on the api function, which alone may
// read them (logs:FilterLogEvents on exactly these groups).
const EnvLogGroups = "BATCHWORK_LOG_GROUPS"

// LogSource is the CloudWatch Logs source of EnvLogGroups, or false when
// it is unset (the route then answers 501).
func LogSource(cfg aws.Config, getenv func(string) string) (logs.Source, bool) {
	var groups []string
	for _, g := range strings.Split(getenv(EnvLogGroups), ",") {
		if g = strings.TrimSpace(g); g != "" {
			groups = append(groups, g)
		}
	}
	if len(groups) == 0 {
		return nil, false
	}
	return logs.CloudWatch{Client: cloudwatchlogs.NewFromConfig(cfg), Groups: groups}, true
}
