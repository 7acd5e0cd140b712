// Package awsconf builds the one aws.Config a process uses, honouring an
// emulator endpoint, and counts AWS requests by service and operation.
package awsconf

import (
	"context"
	"fmt"
	"os"
	"sort"
	"sync"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsmiddleware "github.com/aws/aws-sdk-go-v2/aws/middleware"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/smithy-go/middleware"

	"github.com/batchwork/batchwork/shared/awswire"
)

// Load returns an aws.Config. With endpoint set (an emulator), requests go
// there, the region defaults to us-east-1 and, unless the environment has
// credentials, static test credentials are used.
//
// A service's own variable (AWS_ENDPOINT_URL_DYNAMODB, ...) wins over
// endpoint, as it wins over AWS_ENDPOINT_URL in every AWS SDK: endpoint
// is set as the config's BaseEndpoint after loading, not passed as
// config.WithBaseEndpoint, because the load options are the first of the
// config's ConfigSources and answer every service's endpoint lookup with
// their base endpoint, so the environment's per-service variables would
// never be read.
func Load(ctx context.Context, endpoint string) (aws.Config, error) {
	var opts []func(*config.LoadOptions) error
	if endpoint != "" {
		if os.Getenv("AWS_REGION") == "" {
			opts = append(opts, config.WithRegion("us-east-1"))
		}
		if os.Getenv("AWS_ACCESS_KEY_ID") == "" {
			opts = append(opts, config.WithCredentialsProvider(credentials.NewStaticCredentialsProvider("test", "test", "")))
		}
	}
	cfg, err := config.LoadDefaultConfig(ctx, opts...)
	if err != nil {
		return aws.Config{}, fmt.Errorf("load aws config: %w", err)
	}
	if endpoint != "" {
		cfg.BaseEndpoint = aws.String(endpoint)
	}
	return cfg, nil
}

// ServiceEndpoints maps SDK service ids ("DynamoDB", "SQS", ...) to
// endpoints. Put in aws.Config.ConfigSources, it is the SDK's own way to
// send one service elsewhere than BaseEndpoint: each client's
// resolveBaseEndpoint asks the config sources for its service's endpoint
// (internal/configsources.ResolveServiceBaseEndpoint), unless
// AWS_ENDPOINT_URL is set and the service's own variable is not.
type ServiceEndpoints map[string]string

// GetServiceBaseEndpoint implements the SDK's ServiceBaseEndpointProvider.
func (s ServiceEndpoints) GetServiceBaseEndpoint(_ context.Context, sdkID string) (string, bool, error) {
	u, ok := s[sdkID]
	return u, ok && u != "", nil
}

// S3Options sets path-style addressing when the config has a custom
// endpoint: an emulator on loopback cannot serve virtual-hosted buckets.
func S3Options(cfg aws.Config) func(*s3.Options) {
	return func(o *s3.Options) {
		if cfg.BaseEndpoint != nil {
			o.UsePathStyle = true
		}
	}
}

// Counter counts requests by "service.operation".
type Counter struct {
	mu sync.Mutex
	n  map[string]int
}

// Install adds the counting middleware to cfg, and the counter to the
// hooks of the lean clients (counterhook.go).
func (c *Counter) Install(cfg *aws.Config) {
	awswire.Install(cfg, c)
	cfg.APIOptions = append(cfg.APIOptions, func(st *middleware.Stack) error {
		return st.Initialize.Add(middleware.InitializeMiddlewareFunc("batchwork.count",
			func(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
				c.add(awsmiddleware.GetServiceID(ctx) + "." + awsmiddleware.GetOperationName(ctx))
				return next.HandleInitialize(ctx, in)
			}), middleware.After)
	})
}

func (c *Counter) add(k string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.n == nil {
		c.n = map[string]int{}
	}
	c.n[k]++
}

// Snapshot returns the counts so far, and their total.
func (c *Counter) Snapshot() (map[string]int, int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make(map[string]int, len(c.n))
	total := 0
	for k, v := range c.n {
		out[k] = v
		total += v
	}
	return out, total
}

// Keys returns the counted operations in order.
func Keys(m map[string]int) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}
