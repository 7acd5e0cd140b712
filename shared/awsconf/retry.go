package awsconf

import (
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/ratelimit"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
)

// Retry settings of the control plane's clients. The SDK's default of 3
// attempts lets one burst of throttling end a step (a job once failed on
// "exceeded maximum number of attempts, 3, ... SlowDown"); 10 attempts
// with backoff capped at 2 s ride out about 10 s of it.
const (
	RetryMaxAttempts = 10
	RetryMaxBackoff  = 2 * time.Second
)

// NewRetryer is the control plane's retryer: the SDK's standard retry
// rules (throttling, 5xx, connection errors, TransactionInProgress), more
// attempts, and no client-side retry quota: under sustained throttling
// the quota would refuse retries outright, failing requests that one
// more try would have carried.
func NewRetryer() aws.Retryer {
	return retry.NewStandard(func(o *retry.StandardOptions) {
		o.MaxAttempts = RetryMaxAttempts
		o.MaxBackoff = RetryMaxBackoff
		o.RateLimiter = ratelimit.None
	})
}

// Harden gives cfg the control plane's retryer unless it has one.
func Harden(cfg *aws.Config) {
	if cfg.Retryer == nil {
		cfg.Retryer = NewRetryer
	}
}
