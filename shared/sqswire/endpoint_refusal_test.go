package sqswire_test

import (
	"context"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/batchwork/batchwork/shared/sqswire"
)

// TestReviewFIPSRefusalNamesTheEscapeHatch: with AWS_USE_FIPS_ENDPOINT or
// AWS_USE_DUALSTACK_ENDPOINT set, the lean SQS client, now the default of
// every function (shared/lambdaenv.Wire) and of the runner, refuses the
// config, so a deployment that ran on the SDK's SQS client (FIPS worked
// there) stops starting. The refusal is the design, but unlike the
// refusal of a custom resolver it does not name BATCHWORK_SQS_CLIENT=sdk,
// the one setting that makes the deployment start again.
func TestReviewFIPSRefusalNamesTheEscapeHatch(t *testing.T) {
	for _, c := range []struct {
		name string
		set  func(*aws.Config)
	}{
		{"fips", func(cfg *aws.Config) { cfg.ConfigSources = append(cfg.ConfigSources, fipsSource{}) }},
		{"dualstack", func(cfg *aws.Config) { cfg.ConfigSources = append(cfg.ConfigSources, dualStackSource{}) }},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg := aws.Config{Region: "us-gov-west-1"}
			c.set(&cfg)
			_, err := sqswire.New(cfg)
			if err == nil {
				t.Fatal("New accepted the config")
			}
			if !strings.Contains(err.Error(), sqswire.EnvClient) {
				t.Errorf("the refusal %q does not name %s=sdk", err, sqswire.EnvClient)
			}
		})
	}
}

// fipsSource and dualStackSource are what config.LoadDefaultConfig puts
// in ConfigSources for AWS_USE_FIPS_ENDPOINT=true and
// AWS_USE_DUALSTACK_ENDPOINT=true.
type fipsSource struct{}

func (fipsSource) GetUseFIPSEndpoint(context.Context) (aws.FIPSEndpointState, bool, error) {
	return aws.FIPSEndpointStateEnabled, true, nil
}

type dualStackSource struct{}

func (dualStackSource) GetUseDualStackEndpoint(context.Context) (aws.DualStackEndpointState, bool, error) {
	return aws.DualStackEndpointStateEnabled, true, nil
}
