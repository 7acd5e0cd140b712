// Package sqswire is a lean SQS client: the five operations the queues
// call (shared/queue's API port), with the SDK's input, output and error
// types, sent as AWS JSON 1.0 (X-Amz-Target AmazonSQS.<operation>, as the
// SDK sends them) on the core the lean clients share (shared/awswire:
// the config's endpoint, cached credentials and SigV4, the config's
// retryer in the SDK's retry loop, the hooks), without the SDK's
// middleware stack. What SQS adds to the core is here: the SDK's checks
// of required members (validate.go), its MD5 checks of message bodies
// (md5.go), its typed errors (errors.go) and the X-Amzn-Query-Mode header
// that has SQS name its old error codes too.
package sqswire

import (
	"context"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/smithy-go"
	smithyendpoints "github.com/aws/smithy-go/endpoints"

	"github.com/batchwork/batchwork/shared/awswire"
)

// Operation names, as the SDK's middleware names them.
const (
	opSend        = "SendMessageBatch"
	opReceive     = "ReceiveMessage"
	opDelete      = "DeleteMessageBatch"
	opChange      = "ChangeMessageVisibility"
	opChangeBatch = "ChangeMessageVisibilityBatch"
)

// Client is the lean client. Its methods are safe for concurrent use.
type Client struct {
	core *awswire.Client
}

var service = awswire.Service{
	ID:          "SQS",
	Package:     "sqswire",
	EnvClient:   EnvClient,
	SigningName: "sqs",
	Target:      "AmazonSQS.",
	Header:      map[string]string{"X-Amzn-Query-Mode": "true"},
	Encode:      encode,
	Decode:      decode,
	DecodeError: decodeError,
}

// New builds a client from cfg as sqs.NewFromConfig would build the
// SDK's: the same endpoint (BaseEndpoint, AWS_ENDPOINT_URL_SQS and the
// config's service endpoints, else the regional endpoint), credentials
// (cached), HTTP client and retryer. Like the SDK's, it sends every
// request to that endpoint, whatever host a call's QueueUrl names (the
// queue URL is a member of the body). Its hooks are cfg's
// (awswire.Install).
func New(cfg aws.Config) (*Client, error) {
	o := sqs.NewFromConfig(cfg).Options()
	core, err := awswire.New(cfg, service, awswire.Options{
		Region:      o.Region,
		HTTPClient:  o.HTTPClient,
		Credentials: o.Credentials,
		Retryer:     o.Retryer,
		FIPS:        o.EndpointOptions.UseFIPSEndpoint == aws.FIPSEndpointStateEnabled,
		DualStack:   o.EndpointOptions.UseDualStackEndpoint == aws.DualStackEndpointStateEnabled,
		HasResolver: cfg.EndpointResolverWithOptions != nil || cfg.EndpointResolver != nil, //nolint:staticcheck // refused, not used
		ResolveEndpoint: func(ctx context.Context) (smithyendpoints.Endpoint, error) {
			return o.EndpointResolverV2.ResolveEndpoint(ctx, sqs.EndpointParameters{
				Region: aws.String(o.Region), Endpoint: o.BaseEndpoint, UseFIPS: aws.Bool(false), UseDualStack: aws.Bool(false),
			})
		},
	})
	if err != nil {
		return nil, err
	}
	return &Client{core: core}, nil
}

// do runs one operation; an error comes back as the SDK's does, in a
// *smithy.OperationError.
func (c *Client) do(ctx context.Context, op string, in any, optFns []func(*sqs.Options), check func(in, out any) error) (any, error) {
	if len(optFns) > 0 {
		return nil, &smithy.OperationError{ServiceID: "SQS", OperationName: op,
			Err: fmt.Errorf("sqswire: %s's per-call options are not supported (%s=sdk uses the SDK's client)", op, EnvClient)}
	}
	if err := validate(in); err != nil {
		return nil, &smithy.OperationError{ServiceID: "SQS", OperationName: op, Err: err}
	}
	return c.core.Do(ctx, op, in, check)
}

// SendMessageBatch is sqs.Client.SendMessageBatch, with its check of the
// sent bodies' MD5.
func (c *Client) SendMessageBatch(ctx context.Context, in *sqs.SendMessageBatchInput, optFns ...func(*sqs.Options)) (*sqs.SendMessageBatchOutput, error) {
	if in == nil {
		in = &sqs.SendMessageBatchInput{}
	}
	out, err := c.do(ctx, opSend, in, optFns, checkSent)
	if err != nil {
		return nil, err
	}
	return out.(*sqs.SendMessageBatchOutput), nil
}

// ReceiveMessage is sqs.Client.ReceiveMessage, with its check of the
// received bodies' MD5. A long poll (WaitTimeSeconds) waits in the
// config's HTTP client, as the SDK's does: the client adds no timeout.
func (c *Client) ReceiveMessage(ctx context.Context, in *sqs.ReceiveMessageInput, optFns ...func(*sqs.Options)) (*sqs.ReceiveMessageOutput, error) {
	if in == nil {
		in = &sqs.ReceiveMessageInput{}
	}
	out, err := c.do(ctx, opReceive, in, optFns, checkReceived)
	if err != nil {
		return nil, err
	}
	return out.(*sqs.ReceiveMessageOutput), nil
}

// DeleteMessageBatch is sqs.Client.DeleteMessageBatch.
func (c *Client) DeleteMessageBatch(ctx context.Context, in *sqs.DeleteMessageBatchInput, optFns ...func(*sqs.Options)) (*sqs.DeleteMessageBatchOutput, error) {
	if in == nil {
		in = &sqs.DeleteMessageBatchInput{}
	}
	out, err := c.do(ctx, opDelete, in, optFns, nil)
	if err != nil {
		return nil, err
	}
	return out.(*sqs.DeleteMessageBatchOutput), nil
}

// ChangeMessageVisibility is sqs.Client.ChangeMessageVisibility.
func (c *Client) ChangeMessageVisibility(ctx context.Context, in *sqs.ChangeMessageVisibilityInput, optFns ...func(*sqs.Options)) (*sqs.ChangeMessageVisibilityOutput, error) {
	if in == nil {
		in = &sqs.ChangeMessageVisibilityInput{}
	}
	out, err := c.do(ctx, opChange, in, optFns, nil)
	if err != nil {
		return nil, err
	}
	return out.(*sqs.ChangeMessageVisibilityOutput), nil
}

// ChangeMessageVisibilityBatch is sqs.Client.ChangeMessageVisibilityBatch.
func (c *Client) ChangeMessageVisibilityBatch(ctx context.Context, in *sqs.ChangeMessageVisibilityBatchInput, optFns ...func(*sqs.Options)) (*sqs.ChangeMessageVisibilityBatchOutput, error) {
	if in == nil {
		in = &sqs.ChangeMessageVisibilityBatchInput{}
	}
	out, err := c.do(ctx, opChangeBatch, in, optFns, nil)
	if err != nil {
		return nil, err
	}
	return out.(*sqs.ChangeMessageVisibilityBatchOutput), nil
}
