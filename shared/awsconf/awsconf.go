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
)

// Load returns an aws.Config. With endpoint set (an emulator), requests go
// there, the region defaults to us-east-1 and, unless the environment has
// credentials, static test credentials are used.
func Load(ctx context.Context, endpoint string) (aws.Config, error) {
	var opts []func(*config.LoadOptions) error
	if endpoint != "" {
		opts = append(opts, config.WithBaseEndpoint(endpoint))
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
	return cfg, nil
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

// Install adds the counting middleware to cfg.
func (c *Counter) Install(cfg *aws.Config) {
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
