package emuprobe

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/batchwork/batchwork/shared/queue"
	"github.com/batchwork/batchwork/shared/sqswire"
)

// probeStepSplit is how long each half of the split runs.
const probeStepSplit = 2 * time.Second

// sendShare is moto's CPU for a SendMessageBatch of ten over its mean
// request's in the SQS probe's cycle (a send, a receive, a delete): 0
// when it cannot be measured. It is measured with the runner's client,
// on a queue of its own: a chain's sends alone (queue.SendBatch of a
// 100-task chunk, eight requests at a time, from two chains), then
// receives of ten and their deletes alone, from eight clients. moto
// spends more on a send than on a receive or a delete, and a load job's
// chains are nothing but sends while its executors mostly wait on them,
// so the chains' time to queue runs at the sends' price, not the mean's.
func sendShare(ctx context.Context, cfg aws.Config) float64 {
	sq := sqs.NewFromConfig(cfg)
	made, err := sq.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(fmt.Sprintf("bench-split-%d", time.Now().UnixNano()))})
	if err != nil {
		return 0
	}
	url := aws.ToString(made.QueueUrl)
	defer func() { _, _ = sq.DeleteQueue(context.WithoutCancel(ctx), &sqs.DeleteQueueInput{QueueUrl: &url}) }()
	api, err := sqswire.ForQueues(cfg, os.Getenv(sqswire.EnvClient))
	if err != nil {
		return 0
	}
	q := queue.New(api)
	// moto's CPU a request at one level of workers (0: not measured).
	cpuOf := func(workers int, fn func(int) int) time.Duration {
		return sweep([]int{workers}, probeStepSplit, fn).CPU
	}
	chunk := make([]queue.Send, 100)
	for i := range chunk {
		chunk[i] = queue.Send{Body: fmt.Sprintf("j1a1fd8fa5144ffa078bd8/0/%d", i)}
	}
	send := cpuOf(2, func(int) int {
		if q.SendBatch(ctx, url, chunk) != nil {
			return 0
		}
		return len(chunk) / 10
	})
	// The sends left ten messages for each of their requests: the
	// receives do not find the queue empty within the step.
	take := cpuOf(8, func(int) int {
		msgs, err := q.Receive(ctx, url, 10, 0, 30*time.Second)
		if err != nil || len(msgs) == 0 {
			return 0
		}
		receipts := make([]string, len(msgs))
		for i, m := range msgs {
			receipts[i] = m.Receipt
		}
		return 1 + served(q.DeleteBatch(ctx, url, receipts))
	})
	if send <= 0 || take <= 0 {
		return 0
	}
	return 3 * float64(send) / float64(send+2*take)
}
