package awsconf

import (
	"math/rand/v2"
	"slices"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/ratelimit"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
)

// Retry settings of the control plane's clients. The SDK's default of 3
// attempts lets one burst of throttling end a step (a job once failed on
// "exceeded maximum number of attempts, 3, ... SlowDown"). The SDK's
// default backoff waits up to 2^attempt seconds, so its first retry waits
// a second on average: a claim of five requests under 5% throttling then
// took over a second one time in four, and an executor that took a dead
// one's task over was often killed in turn before its claim landed.
// Retries here start at RetryBaseBackoff and double to RetryMaxBackoff
// (full jitter), and 14 attempts ride out about 10 s of throttling, as
// before.
const (
	RetryMaxAttempts = 14
	RetryBaseBackoff = 50 * time.Millisecond
	RetryMaxBackoff  = 2 * time.Second
)

// NewRetryer is the control plane's retryer: the SDK's standard retry
// rules (throttling, 5xx, connection errors, TransactionInProgress) and
// DynamoDB's TransactionConflictException (a single-item write refused
// by a transaction in flight on its item applied nothing), more attempts, a quicker backoff, and no client-side retry quota: under
// sustained throttling the quota would refuse retries outright, failing
// requests that one more try would have carried.
func NewRetryer() aws.Retryer {
	return retry.NewStandard(func(o *retry.StandardOptions) {
		o.MaxAttempts = RetryMaxAttempts
		o.MaxBackoff = RetryMaxBackoff
		o.Backoff = backoff{base: RetryBaseBackoff, max: RetryMaxBackoff}
		o.RateLimiter = ratelimit.None
		o.Retryables = append(slices.Clone(o.Retryables), retry.RetryableErrorCode{Codes: map[string]struct{}{"TransactionConflictException": {}}})
	})
}

// backoff is exponential backoff with full jitter: a uniform delay up to
// base * 2^(attempt-1), capped at max.
type backoff struct{ base, max time.Duration }

func (b backoff) BackoffDelay(attempt int, _ error) (time.Duration, error) {
	ceiling := b.max
	if attempt >= 1 && attempt < 32 {
		ceiling = min(b.base<<(attempt-1), b.max)
	}
	return time.Duration(rand.Int64N(int64(ceiling) + 1)), nil
}

// Harden gives cfg the control plane's retryer unless it has one, and its
// HTTP client (httpclient.go).
func Harden(cfg *aws.Config) {
	if cfg.Retryer == nil {
		cfg.Retryer = NewRetryer
	}
	if _, ok := cfg.HTTPClient.(httpClient); !ok {
		cfg.HTTPClient = newHTTPClient(*cfg)
	}
}
