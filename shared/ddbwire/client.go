// Package ddbwire is a lean DynamoDB client: the seven operations the store
// calls (shared/dynamo's API port), with the SDK's input, output and error
// types, sent as AWS JSON 1.0 without the SDK's middleware stack, on the
// core the lean clients share (shared/awswire: the config's endpoint,
// cached credentials and SigV4, the config's retryer in the SDK's retry
// loop, the hooks). The stack cost a no-op task about a third of the
// control plane's CPU (docs/performance.md); what it did that the store
// needs beyond the core is here: Accept-Encoding identity and the
// response's CRC32, the typed errors, and an idempotency token on every
// transaction.
package ddbwire

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"github.com/batchwork/batchwork/shared/awswire/wirejson"
	"hash/crc32"
	"net/http"
	"strconv"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/smithy-go"
	smithyendpoints "github.com/aws/smithy-go/endpoints"

	"github.com/batchwork/batchwork/shared/awswire"
)

// Client is the lean client. Its methods are safe for concurrent use.
type Client struct {
	core *awswire.Client
}

// service is what DynamoDB adds to the lean clients' core.
var service = awswire.Service{
	ID:          "DynamoDB",
	Package:     "ddbwire",
	EnvClient:   EnvClient,
	SigningName: "dynamodb",
	Target:      "DynamoDB_20120810.",
	// DynamoDB's CRC32 is of the bytes it sends: no transparent gzip.
	Header: map[string]string{"Accept-Encoding": "identity"},
	Encode: encode,
	Decode: decode,
	DecodeError: func(_ string, h http.Header, body []byte) (error, error) {
		return decodeError(h.Get("X-Amzn-ErrorType"), body)
	},
	Check: checkCRC,
}

// New builds a client from cfg as dynamodb.NewFromConfig would build the
// SDK's: the same endpoint (BaseEndpoint, AWS_ENDPOINT_URL_DYNAMODB and the
// config's service endpoints, else the regional endpoint), credentials
// (cached), HTTP client and retryer. Its hooks are cfg's (Install).
func New(cfg aws.Config) (*Client, error) {
	o := dynamodb.NewFromConfig(cfg).Options()
	core, err := awswire.New(cfg, service, awswire.Options{
		Region:      o.Region,
		HTTPClient:  o.HTTPClient,
		Credentials: o.Credentials,
		Retryer:     o.Retryer,
		FIPS:        o.EndpointOptions.UseFIPSEndpoint == aws.FIPSEndpointStateEnabled,
		DualStack:   o.EndpointOptions.UseDualStackEndpoint == aws.DualStackEndpointStateEnabled,
		HasResolver: cfg.EndpointResolverWithOptions != nil || cfg.EndpointResolver != nil, //nolint:staticcheck // refused, not used
		ResolveEndpoint: func(ctx context.Context) (smithyendpoints.Endpoint, error) {
			return o.EndpointResolverV2.ResolveEndpoint(ctx, dynamodb.EndpointParameters{
				Region: aws.String(o.Region), Endpoint: o.BaseEndpoint, UseFIPS: aws.Bool(false), UseDualStack: aws.Bool(false),
				AccountIdEndpointMode: aws.String(string(aws.AccountIDEndpointModeDisabled)),
			})
		},
	})
	if err != nil {
		return nil, err
	}
	return &Client{core: core}, nil
}

func noOptions(op string, optFns []func(*dynamodb.Options)) error {
	if len(optFns) > 0 {
		return unsupported(op + "'s per-call options")
	}
	return nil
}

// GetItem is dynamodb.Client.GetItem.
func (c *Client) GetItem(ctx context.Context, in *dynamodb.GetItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error) {
	out, err := c.do(ctx, "GetItem", in, optFns)
	if err != nil {
		return nil, err
	}
	return out.(*dynamodb.GetItemOutput), nil
}

// PutItem is dynamodb.Client.PutItem.
func (c *Client) PutItem(ctx context.Context, in *dynamodb.PutItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error) {
	out, err := c.do(ctx, "PutItem", in, optFns)
	if err != nil {
		return nil, err
	}
	return out.(*dynamodb.PutItemOutput), nil
}

// UpdateItem is dynamodb.Client.UpdateItem.
func (c *Client) UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	out, err := c.do(ctx, "UpdateItem", in, optFns)
	if err != nil {
		return nil, err
	}
	return out.(*dynamodb.UpdateItemOutput), nil
}

// Query is dynamodb.Client.Query.
func (c *Client) Query(ctx context.Context, in *dynamodb.QueryInput, optFns ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error) {
	out, err := c.do(ctx, "Query", in, optFns)
	if err != nil {
		return nil, err
	}
	return out.(*dynamodb.QueryOutput), nil
}

// Scan is dynamodb.Client.Scan.
func (c *Client) Scan(ctx context.Context, in *dynamodb.ScanInput, optFns ...func(*dynamodb.Options)) (*dynamodb.ScanOutput, error) {
	out, err := c.do(ctx, "Scan", in, optFns)
	if err != nil {
		return nil, err
	}
	return out.(*dynamodb.ScanOutput), nil
}

// BatchGetItem is dynamodb.Client.BatchGetItem.
func (c *Client) BatchGetItem(ctx context.Context, in *dynamodb.BatchGetItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.BatchGetItemOutput, error) {
	out, err := c.do(ctx, "BatchGetItem", in, optFns)
	if err != nil {
		return nil, err
	}
	return out.(*dynamodb.BatchGetItemOutput), nil
}

// TransactWriteItems is dynamodb.Client.TransactWriteItems. A transaction
// without a ClientRequestToken gets a random one, as from the SDK, so
// that its retries are idempotent.
func (c *Client) TransactWriteItems(ctx context.Context, in *dynamodb.TransactWriteItemsInput, optFns ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error) {
	out, err := c.do(ctx, "TransactWriteItems", in, optFns)
	if err != nil {
		return nil, err
	}
	return out.(*dynamodb.TransactWriteItemsOutput), nil
}

// BatchExecuteStatement is dynamodb.Client.BatchExecuteStatement.
func (c *Client) BatchExecuteStatement(ctx context.Context, in *dynamodb.BatchExecuteStatementInput, optFns ...func(*dynamodb.Options)) (*dynamodb.BatchExecuteStatementOutput, error) {
	out, err := c.do(ctx, "BatchExecuteStatement", in, optFns)
	if err != nil {
		return nil, err
	}
	return out.(*dynamodb.BatchExecuteStatementOutput), nil
}

// do runs one operation through the core; an error comes back as the
// SDK's does, in a *smithy.OperationError.
func (c *Client) do(ctx context.Context, op string, in any, optFns []func(*dynamodb.Options)) (any, error) {
	if err := noOptions(op, optFns); err != nil {
		return nil, &smithy.OperationError{ServiceID: "DynamoDB", OperationName: op, Err: err}
	}
	return c.core.Do(ctx, op, in, nil)
}

// encode writes the call's input, once for all its attempts.
func encode(call *Call) ([]byte, error) {
	// 1 KB: a task's claim or commit is 500-900 bytes, and growing
	// from a smaller buffer copies it once more.
	e := &enc{wirejson.Enc{B: make([]byte, 0, 1024)}}
	var err error
	switch in := call.Input.(type) {
	case *dynamodb.GetItemInput:
		err = encodeGetItem(e, in)
	case *dynamodb.PutItemInput:
		err = encodePutItem(e, in)
	case *dynamodb.UpdateItemInput:
		err = encodeUpdateItem(e, in)
	case *dynamodb.QueryInput:
		err = encodeQuery(e, in)
	case *dynamodb.ScanInput:
		err = encodeScan(e, in)
	case *dynamodb.BatchGetItemInput:
		err = encodeBatchGetItem(e, in)
	case *dynamodb.TransactWriteItemsInput:
		token := aws.ToString(in.ClientRequestToken)
		if in.ClientRequestToken == nil {
			token = newToken()
		}
		err = encodeTransactWriteItems(e, in, token)
	case *dynamodb.BatchExecuteStatementInput:
		err = encodeBatchExecuteStatement(e, in)
	default:
		return nil, fmt.Errorf("ddbwire: %s with input %T", call.Operation, call.Input)
	}
	if err != nil {
		return nil, fmt.Errorf("ddbwire: %s: %w", call.Operation, err)
	}
	return e.B, nil
}

func decode(op string, body []byte) (any, error) {
	d := &dec{wirejson.Dec{B: body}}
	var out any
	switch op {
	case "GetItem":
		out = decodeGetItem(d)
	case "PutItem":
		o := &dynamodb.PutItemOutput{}
		o.Attributes, o.ConsumedCapacity, o.ItemCollectionMetrics = decodeWrite(d)
		out = o
	case "UpdateItem":
		o := &dynamodb.UpdateItemOutput{}
		o.Attributes, o.ConsumedCapacity, o.ItemCollectionMetrics = decodeWrite(d)
		out = o
	case "Query":
		out = decodeQuery(d)
	case "Scan":
		out = decodeScan(d)
	case "BatchGetItem":
		out = decodeBatchGetItem(d)
	case "TransactWriteItems":
		out = decodeTransactWriteItems(d)
	case "BatchExecuteStatement":
		out = decodeBatchExecuteStatement(d)
	}
	d.End()
	if d.Err != nil {
		return nil, &smithy.DeserializationError{Err: fmt.Errorf("ddbwire: %s response: %w", op, d.Err), Snapshot: snapshot(body)}
	}
	return out, nil
}

// newToken is a random UUID, as the SDK's idempotency tokens are.
func newToken() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	h := hex.EncodeToString(b[:])
	return h[:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}

// errCRCMismatch: the body is not the one the service checksummed.
var errCRCMismatch = errors.New("ddbwire: response did not match expected checksum")

// checkCRC checks the body against the X-Amz-Crc32 header, when there is
// one. (The SDK's DynamoDB client computes it too but drops a mismatch
// when it closes the body.)
func checkCRC(h http.Header, body []byte) error {
	v := h.Get("X-Amz-Crc32")
	if v == "" {
		return nil
	}
	want, err := strconv.ParseUint(v, 10, 32)
	if err != nil {
		return fmt.Errorf("ddbwire: unable to parse checksum header %q: %w", v, err)
	}
	if got := crc32.ChecksumIEEE(body); uint32(want) != got {
		return awswire.Damaged(fmt.Errorf("%w, %d, %d", errCRCMismatch, want, got))
	}
	return nil
}
