package host

import (
	"fmt"
	"time"

	"github.com/batchwork/batchwork/internal/executor"
)

// EnvSplitAfter is how long an input task of a dynamicSplit stage runs on
// the long-polling host before it offers to split (a Go duration; unset:
// executor.DefaultSplitAfter). A chaos run sets it to seconds, so that
// its small inputs split within the run; a deployment leaves it unset.
const EnvSplitAfter = "BATCHWORK_SPLIT_AFTER"

// The bounds of EnvSplitAfter: below the lower one every input task
// would offer, a control-plane call each; above an hour no task waits.
const (
	minSplitAfter = 100 * time.Millisecond
	maxSplitAfter = time.Hour
)

// SplitAfter reads EnvSplitAfter.
func SplitAfter(getenv func(string) string) (time.Duration, error) {
	s := getenv(EnvSplitAfter)
	if s == "" {
		return executor.DefaultSplitAfter, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d < minSplitAfter || d > maxSplitAfter {
		return 0, fmt.Errorf("%s=%q: want a duration from %s to %s", EnvSplitAfter, s, minSplitAfter, maxSplitAfter)
	}
	return d, nil
}
