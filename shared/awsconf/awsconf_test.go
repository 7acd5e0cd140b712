package awsconf

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
)

// isolate unsets the endpoint variables (the SDK tells set from unset,
// not empty from unset) and points the shared config files at nothing, so
// only the case's own settings count.
func isolate(t *testing.T) {
	t.Helper()
	dir := t.TempDir()
	t.Setenv("AWS_CONFIG_FILE", filepath.Join(dir, "config"))
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", filepath.Join(dir, "credentials"))
	t.Setenv("AWS_REGION", "us-east-1")
	for _, k := range []string{"AWS_PROFILE", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_ENDPOINT_URL",
		"AWS_ENDPOINT_URL_DYNAMODB", "AWS_ENDPOINT_URL_SQS", "AWS_IGNORE_CONFIGURED_ENDPOINT_URLS"} {
		t.Setenv(k, "") // restored after the test
		os.Unsetenv(k)
	}
}

// endpoints are where a DynamoDB and an SQS client built from cfg send
// their requests, as the SDK itself resolves them.
func endpoints(cfg aws.Config) (ddb, sq string) {
	return aws.ToString(dynamodb.NewFromConfig(cfg).Options().BaseEndpoint),
		aws.ToString(sqs.NewFromConfig(cfg).Options().BaseEndpoint)
}

// The SDKs' precedence: a service's own variable, then the endpoint given
// (the -endpoint flag, AWS_ENDPOINT_URL by default), then AWS_ENDPOINT_URL.
func TestLoadEndpointPrecedence(t *testing.T) {
	const moto, ddbLocal, flag = "http://127.0.0.1:4000", "http://127.0.0.1:8000", "http://127.0.0.1:5000"
	cases := []struct {
		name     string
		endpoint string
		env      map[string]string
		ddb, sqs string
	}{
		{"endpoint only", moto, nil, moto, moto},
		{"AWS_ENDPOINT_URL only", "", map[string]string{"AWS_ENDPOINT_URL": moto}, moto, moto},
		{"endpoint is AWS_ENDPOINT_URL", moto, map[string]string{"AWS_ENDPOINT_URL": moto}, moto, moto},
		{"endpoint over AWS_ENDPOINT_URL", flag, map[string]string{"AWS_ENDPOINT_URL": moto}, flag, flag},
		{"service variable over endpoint", moto, map[string]string{"AWS_ENDPOINT_URL_DYNAMODB": ddbLocal}, ddbLocal, moto},
		{"service variable over both", flag, map[string]string{"AWS_ENDPOINT_URL": moto, "AWS_ENDPOINT_URL_DYNAMODB": ddbLocal}, ddbLocal, flag},
		{"service variable over AWS_ENDPOINT_URL", "", map[string]string{"AWS_ENDPOINT_URL": moto, "AWS_ENDPOINT_URL_DYNAMODB": ddbLocal}, ddbLocal, moto},
		{"another service's variable", moto, map[string]string{"AWS_ENDPOINT_URL_SQS": ddbLocal}, moto, ddbLocal},
		{"no endpoint (AWS)", "", nil, "", ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			isolate(t)
			for k, v := range c.env {
				t.Setenv(k, v)
			}
			cfg, err := Load(context.Background(), c.endpoint)
			if err != nil {
				t.Fatal(err)
			}
			if ddb, sq := endpoints(cfg); ddb != c.ddb || sq != c.sqs {
				t.Errorf("DynamoDB %q, SQS %q; want %q, %q", ddb, sq, c.ddb, c.sqs)
			}
		})
	}
}

// ServiceEndpoints in ConfigSources sends one service elsewhere; the SDK
// skips the config sources when AWS_ENDPOINT_URL is set without the
// service's own variable, so a config built this way has to agree with
// the environment (internal/emulator does).
func TestServiceEndpoints(t *testing.T) {
	const moto, ddbLocal = "http://127.0.0.1:4000", "http://127.0.0.1:8000"
	cases := []struct {
		name     string
		env      map[string]string
		ddb, sqs string
	}{
		{"no environment", nil, ddbLocal, moto},
		{"service variable set", map[string]string{"AWS_ENDPOINT_URL": moto, "AWS_ENDPOINT_URL_DYNAMODB": "http://elsewhere"}, ddbLocal, moto},
		{"AWS_ENDPOINT_URL alone", map[string]string{"AWS_ENDPOINT_URL": moto}, moto, moto},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			isolate(t)
			for k, v := range c.env {
				t.Setenv(k, v)
			}
			cfg := aws.Config{Region: "us-east-1", BaseEndpoint: aws.String(moto),
				ConfigSources: []any{ServiceEndpoints{"DynamoDB": ddbLocal}}}
			if ddb, sq := endpoints(cfg); ddb != c.ddb || sq != c.sqs {
				t.Errorf("DynamoDB %q, SQS %q; want %q, %q", ddb, sq, c.ddb, c.sqs)
			}
		})
	}
}

// The first retries come quickly (a throttled claim must not stall for a
// second), no delay passes the cap, and the attempts together still ride
// out about 10 s of throttling.
func TestRetryBackoff(t *testing.T) {
	r := NewRetryer()
	throttled := errors.New("throttled")
	for range 200 {
		if d, err := r.RetryDelay(1, throttled); err != nil || d > 2*RetryBaseBackoff {
			t.Fatalf("first retry waits %v (%v); want at most %v", d, err, 2*RetryBaseBackoff)
		}
		for attempt := 1; attempt < RetryMaxAttempts; attempt++ {
			if d, _ := r.RetryDelay(attempt, throttled); d > RetryMaxBackoff {
				t.Fatalf("retry %d waits %v, over the cap %v", attempt, d, RetryMaxBackoff)
			}
		}
	}
	var ceilings time.Duration
	for attempt := 1; attempt < RetryMaxAttempts; attempt++ {
		ceilings += min(RetryBaseBackoff<<(attempt-1), RetryMaxBackoff)
	}
	if mean := ceilings / 2; mean < 8*time.Second {
		t.Fatalf("the retries wait %v on average in all; want about 10 s, to ride out throttling", mean)
	}
}
