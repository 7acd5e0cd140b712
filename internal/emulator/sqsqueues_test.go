package emulator

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
)

// moto's SQS walks its queues to find a new queue's dead-letter queue
// while other requests add queues to the same dict: without the
// launcher's lock, queues created at once (the integration tests' stacks,
// each with a queue that has a RedrivePolicy) failed with a 500,
// "dictionary changed size during iteration", and a CloudFormation stack
// so failed stayed CREATE_IN_PROGRESS for good. The race needs a thread
// switch inside the walk, so this test does not catch it every time.
func TestConcurrentQueueCreation(t *testing.T) {
	skipUnderShort(t)
	e := startTestMoto(t)
	ctx := context.Background()
	// No retries: a retried CreateQueue succeeds and would hide the 500.
	q := sqs.NewFromConfig(e.AWSConfig(), func(o *sqs.Options) { o.RetryMaxAttempts = 1 })
	// The dead-letter queue comes after many others, so that finding it
	// walks them, while the workers below add theirs.
	const workers, each = 8, 40
	var pre sync.WaitGroup
	for w := range workers {
		pre.Go(func() {
			for i := range each {
				if _, err := q.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(fmt.Sprintf("p-%d-%d", w, i))}); err != nil {
					t.Error(err)
				}
			}
		})
	}
	pre.Wait()
	dlq, err := q.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String("dlq")})
	if err != nil {
		t.Fatal(err)
	}
	arn, err := q.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: dlq.QueueUrl,
		AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameQueueArn}})
	if err != nil {
		t.Fatal(err)
	}
	redrive := fmt.Sprintf(`{"deadLetterTargetArn":%q,"maxReceiveCount":"10"}`, arn.Attributes["QueueArn"])
	var wg sync.WaitGroup
	errs := make(chan error, workers*each)
	for w := range workers {
		wg.Go(func() {
			for i := range each {
				if _, err := q.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(fmt.Sprintf("q-%d-%d", w, i)),
					Attributes: map[string]string{"RedrivePolicy": redrive}}); err != nil {
					errs <- err
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	n := 0
	for err := range errs {
		if n++; n == 1 {
			t.Errorf("CreateQueue: %v", err)
		}
	}
	if n > 0 {
		t.Fatalf("%d of %d concurrent CreateQueue calls failed", n, workers*each)
	}
}
