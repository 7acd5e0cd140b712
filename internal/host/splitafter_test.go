package host

import (
	"strings"
	"testing"
	"time"

	"github.com/batchwork/batchwork/internal/executor"
)

// BATCHWORK_SPLIT_AFTER sets how long an input task of a dynamicSplit
// stage runs before it offers to split; unset, it is the executor's
// default, and anything but a duration in bounds is refused, naming the
// variable.
func TestSplitAfter(t *testing.T) {
	t.Parallel()
	cases := []struct {
		value   string
		want    time.Duration
		wantErr string
	}{
		{"", executor.DefaultSplitAfter, ""},
		{"1s", time.Second, ""},
		{"250ms", 250 * time.Millisecond, ""},
		{"1h", time.Hour, ""},
		{"0s", 0, `BATCHWORK_SPLIT_AFTER="0s": want a duration from 100ms to 1h0m0s`},
		{"50ms", 0, `BATCHWORK_SPLIT_AFTER="50ms": want a duration from 100ms to 1h0m0s`},
		{"-1s", 0, `BATCHWORK_SPLIT_AFTER="-1s": want a duration from 100ms to 1h0m0s`},
		{"2h", 0, `BATCHWORK_SPLIT_AFTER="2h": want a duration from 100ms to 1h0m0s`},
		{"soon", 0, `BATCHWORK_SPLIT_AFTER="soon": want a duration from 100ms to 1h0m0s`},
	}
	for _, tc := range cases {
		got, err := SplitAfter(func(k string) string {
			if k == EnvSplitAfter {
				return tc.value
			}
			return ""
		})
		if got != tc.want || (err == nil) != (tc.wantErr == "") || err != nil && !strings.Contains(err.Error(), tc.wantErr) {
			t.Errorf("SplitAfter with %q = %s, %v; want %s, %q", tc.value, got, err, tc.want, tc.wantErr)
		}
	}
}
