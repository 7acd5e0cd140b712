package ddbwire_test

import (
	"context"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/batchwork/batchwork/shared/ddbwire"
)

// TestNewRefusesWhatItCannotHonour: a config the lean client would
// silently send elsewhere than the SDK's client is refused, naming why;
// so is an unknown client choice.
func TestNewRefusesWhatItCannotHonour(t *testing.T) {
	base := testConfig("http://127.0.0.1:1")
	for _, c := range []struct {
		name string
		edit func(*aws.Config)
		want string
	}{
		{"no region", func(c *aws.Config) { c.Region = "" }, "no region"},
		{"endpoint resolver", func(c *aws.Config) {
			c.EndpointResolverWithOptions = aws.EndpointResolverWithOptionsFunc(func(string, string, ...any) (aws.Endpoint, error) { return aws.Endpoint{}, nil })
		}, "endpoint resolver"},
		{"FIPS", func(c *aws.Config) { c.ConfigSources = append(c.ConfigSources, fips{}) }, "FIPS"},
	} {
		cfg := base.Copy()
		c.edit(&cfg)
		if _, err := ddbwire.New(cfg); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error about %s", c.name, err, c.want)
		}
	}
	if _, err := ddbwire.ForStore(base, "fast"); err == nil || !strings.Contains(err.Error(), ddbwire.EnvClient) {
		t.Errorf("choice fast: %v", err)
	}
	for choice, want := range map[string]any{"": &ddbwire.Client{}, "lean": &ddbwire.Client{}, "sdk": &dynamodb.Client{}} {
		db, err := ddbwire.ForStore(base, choice)
		if err != nil || !sameType(db, want) {
			t.Errorf("choice %q: %T, %v", choice, db, err)
		}
	}
}

type fips struct{}

func (fips) GetUseFIPSEndpoint(context.Context) (aws.FIPSEndpointState, bool, error) {
	return aws.FIPSEndpointStateEnabled, true, nil
}

func sameType(a, b any) bool {
	switch a.(type) {
	case *ddbwire.Client:
		_, ok := b.(*ddbwire.Client)
		return ok
	case *dynamodb.Client:
		_, ok := b.(*dynamodb.Client)
		return ok
	}
	return false
}
