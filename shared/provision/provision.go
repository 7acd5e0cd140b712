// Package provision creates Batchwork's table, queues and bucket directly
// through the APIs, for the local runner and the integration tests.
// Deployed stacks get the same resources from the CDK app in infra/.
package provision

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	dtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/batchwork/batchwork/shared/control"
	"github.com/batchwork/batchwork/shared/dynamo"
)

// Resources names what a Batchwork installation uses.
type Resources struct {
	Table  string
	Bucket string
	Queues control.Queues
}

// Settings shape the resources. Visibility is the default lease; the DLQ
// receives a message after MaxReceives deliveries.
type Settings struct {
	Visibility  int32 // seconds
	MaxReceives int
}

// DefaultSettings match the spec defaults: a 60 s lease, and enough
// deliveries for the default attempts plus duplicate and backoff bounces.
var DefaultSettings = Settings{Visibility: 60, MaxReceives: 10}

// Create makes the resources named prefix-* (idempotent on an emulator).
func Create(ctx context.Context, cfg aws.Config, s3opt func(*s3.Options), prefix string, set Settings) (Resources, error) {
	r := Resources{Table: prefix + "-state", Bucket: prefix + "-data"}
	if err := createTable(ctx, dynamodb.NewFromConfig(cfg), r.Table); err != nil {
		return r, err
	}
	s3c := s3.NewFromConfig(cfg, s3opt)
	if _, err := s3c.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: &r.Bucket}); err != nil {
		var owned *s3types.BucketAlreadyOwnedByYou
		if !errors.As(err, &owned) {
			return r, fmt.Errorf("create bucket %s: %w", r.Bucket, err)
		}
	}
	sq := sqs.NewFromConfig(cfg)
	dlq, err := createQueue(ctx, sq, prefix+"-dlq", nil)
	if err != nil {
		return r, err
	}
	attrs, err := sq.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: &dlq, AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameQueueArn}})
	if err != nil {
		return r, fmt.Errorf("read dlq arn: %w", err)
	}
	redrive := fmt.Sprintf(`{"deadLetterTargetArn":%q,"maxReceiveCount":"%d"}`, attrs.Attributes["QueueArn"], set.MaxReceives)
	qa := map[string]string{"VisibilityTimeout": strconv.Itoa(int(set.Visibility)), "RedrivePolicy": redrive}
	r.Queues.DLQ = dlq
	for _, q := range []struct {
		name string
		dst  *string
	}{{"high", &r.Queues.High}, {"normal", &r.Queues.Normal}, {"low", &r.Queues.Low}} {
		if *q.dst, err = createQueue(ctx, sq, prefix+"-ready-"+q.name, qa); err != nil {
			return r, err
		}
	}
	return r, nil
}

func createQueue(ctx context.Context, c *sqs.Client, name string, attrs map[string]string) (string, error) {
	out, err := c.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: &name, Attributes: attrs})
	if err != nil {
		return "", fmt.Errorf("create queue %s: %w", name, err)
	}
	return aws.ToString(out.QueueUrl), nil
}

func createTable(ctx context.Context, c *dynamodb.Client, name string) error {
	s := func(n string) dtypes.AttributeDefinition {
		return dtypes.AttributeDefinition{AttributeName: aws.String(n), AttributeType: dtypes.ScalarAttributeTypeS}
	}
	_, err := c.CreateTable(ctx, &dynamodb.CreateTableInput{
		TableName:   &name,
		BillingMode: dtypes.BillingModePayPerRequest,
		AttributeDefinitions: []dtypes.AttributeDefinition{s("pk"), s("sk"), s("gpk"),
			{AttributeName: aws.String("due"), AttributeType: dtypes.ScalarAttributeTypeN}},
		KeySchema: []dtypes.KeySchemaElement{
			{AttributeName: aws.String("pk"), KeyType: dtypes.KeyTypeHash},
			{AttributeName: aws.String("sk"), KeyType: dtypes.KeyTypeRange},
		},
		GlobalSecondaryIndexes: []dtypes.GlobalSecondaryIndex{{
			IndexName: aws.String(dynamo.DueIndex),
			KeySchema: []dtypes.KeySchemaElement{
				{AttributeName: aws.String("gpk"), KeyType: dtypes.KeyTypeHash},
				{AttributeName: aws.String("due"), KeyType: dtypes.KeyTypeRange},
			},
			Projection: &dtypes.Projection{ProjectionType: dtypes.ProjectionTypeKeysOnly},
		}},
	})
	var inUse *dtypes.ResourceInUseException
	if err != nil && !errors.As(err, &inUse) {
		return fmt.Errorf("create table %s: %w", name, err)
	}
	return nil
}
