package faults

import (
	"context"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsmiddleware "github.com/aws/aws-sdk-go-v2/aws/middleware"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/smithy-go/middleware"
)

// Duplicate is SQS's at-least-once delivery at its worst: the same
// message delivered to two receivers at once. Right after a
// ReceiveMessage returns, the injector sets the visibility of some of the
// received messages to 0 with the receipt handles just returned, so the
// next ReceiveMessage on the queue, by this receiver or another, gets the
// message again while the first receiver still works on it, and the
// first's later visibility changes and delete use a handle that is no
// longer the latest. Rate is per received message. The receiver itself
// sees no error.
const Duplicate Kind = "duplicate"

const (
	opReceive           = "ReceiveMessage"
	duplicateMiddleware = "batchwork.faults.duplicate"
)

// duplicates is what the Duplicate kind needs besides the rules: a
// client to reopen messages with, made from the config the injector was
// installed on before the injector was (its own calls get no faults).
type duplicates struct {
	sqs *sqs.Client
}

// installDuplicates keeps a fault-free SQS client of cfg, once.
func (i *Injector) installDuplicates(cfg aws.Config) {
	i.mu.Lock()
	defer i.mu.Unlock()
	if i.dup.sqs == nil {
		i.dup.sqs = sqs.NewFromConfig(cfg)
	}
}

// duplicateStep reopens received messages after the whole operation (its
// retries included) returned them: an Initialize-step middleware, as only
// there the output is the typed *sqs.ReceiveMessageOutput.
func (i *Injector) duplicateStep(st *middleware.Stack) error {
	if _, ok := st.Initialize.Get(duplicateMiddleware); ok {
		return nil
	}
	step := middleware.InitializeMiddlewareFunc(duplicateMiddleware,
		func(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
			out, md, err := next.HandleInitialize(ctx, in)
			if err != nil || !i.enabled.Load() {
				return out, md, err
			}
			if awsmiddleware.GetServiceID(ctx) == "SQS" {
				i.duplicate(ctx, in.Parameters, out.Result)
			}
			return out, md, err
		})
	return st.Initialize.Add(step, middleware.After)
}

// duplicate reopens some of the messages a ReceiveMessage call (in, out)
// returned, for the SDK's client (duplicateStep) and the lean one (hook.go).
func (i *Injector) duplicate(ctx context.Context, in, out any) {
	rin, ok1 := in.(*sqs.ReceiveMessageInput)
	rout, ok2 := out.(*sqs.ReceiveMessageOutput)
	if !ok1 || !ok2 {
		return
	}
	for _, m := range rout.Messages {
		if m.ReceiptHandle != nil && i.decideDuplicate("SQS", opReceive) {
			i.reopen(ctx, aws.ToString(rin.QueueUrl), aws.ToString(m.ReceiptHandle))
		}
	}
}

// decideDuplicate says whether one received message gets delivered again.
func (i *Injector) decideDuplicate(svc, op string) bool {
	i.mu.Lock()
	defer i.mu.Unlock()
	for _, r := range i.rules {
		if r.Kind != Duplicate || !matchPattern(r.Service, svc) || !matchPattern(r.Operation, op) {
			continue
		}
		if r.Count > 0 && r.fired >= r.Count {
			continue
		}
		if rate := r.effectiveRate(); rate < 1 && i.rng.Float64() >= rate {
			continue
		}
		r.fired++
		return true
	}
	return false
}

// reopen makes a message visible again now. Counted only when SQS took
// it: a message that was not reopened is not delivered twice.
func (i *Injector) reopen(ctx context.Context, queue, handle string) {
	i.mu.Lock()
	cli := i.dup.sqs
	i.mu.Unlock()
	if cli == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	_, err := cli.ChangeMessageVisibility(ctx, &sqs.ChangeMessageVisibilityInput{
		QueueUrl: aws.String(queue), ReceiptHandle: aws.String(handle), VisibilityTimeout: 0,
	})
	if err != nil {
		return
	}
	i.mu.Lock()
	i.counts[fmt.Sprintf("SQS.%s %s", opReceive, Duplicate)]++
	i.total++
	i.mu.Unlock()
}
