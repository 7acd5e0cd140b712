package tasks

import (
	"fmt"
	"testing"
	"time"

	"github.com/batchwork/batchwork/shared/spec"
)

func TestBackoff(t *testing.T) {
	t.Parallel()
	sp := parseSpec(t, `{"name":"unit","lease":"10s","retry":{"maxAttempts":3,"backoff":"2s"},"stages":[{"name":"s","task":"work","partitions":{"count":1}}]}`)
	s := newStubLifecycle(Config{}, nil)
	s.Jitter = func(time.Duration) time.Duration { return 0 }
	for _, c := range []struct {
		attempt int
		want    time.Duration
	}{
		{1, 2 * time.Second},
		{2, 4 * time.Second},
		{5, 32 * time.Second},
		{16, 65536 * time.Second},             // 18.2h, under the cap
		{17, time.Duration(spec.MaxBackoff)},  // 36.4h, capped
		{100, time.Duration(spec.MaxBackoff)}, // the shift itself is bounded
	} {
		t.Run(fmt.Sprint(c.attempt), func(t *testing.T) {
			if got := s.backoff(sp, 0, c.attempt); got != c.want {
				t.Errorf("backoff after attempt %d = %v, want %v", c.attempt, got, c.want)
			}
		})
	}
}
