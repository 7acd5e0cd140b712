package sqswire

import (
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/batchwork/batchwork/shared/queue"
)

// EnvClient names the variable that picks the queues' SQS client: "sdk"
// for the SDK's (to compare, e.g. in make bench), "" or "lean" for this
// package's.
const EnvClient = "BATCHWORK_SQS_CLIENT"

// ForQueues returns the client the queues use, by choice (EnvClient's
// value).
func ForQueues(cfg aws.Config, choice string) (queue.API, error) {
	switch choice {
	case "", "lean":
		return New(cfg)
	case "sdk":
		return sqs.NewFromConfig(cfg), nil
	}
	return nil, fmt.Errorf("%s=%q: want lean or sdk", EnvClient, choice)
}
