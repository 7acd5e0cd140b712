package main

import (
	"testing"
	"time"
)

// -c retentionDays=N becomes Props.Retention; the construct checks the
// minimum (infra/batchwork/retention_test.go).
func TestRetentionDaysContext(t *testing.T) {
	cases := []struct {
		v       any
		want    time.Duration
		wantErr string
	}{
		{v: nil, want: 0},
		{v: "0", want: 0},
		{v: "30", want: 30 * 24 * time.Hour},
		{v: float64(90), want: 90 * 24 * time.Hour},
		{v: "a month", wantErr: `context retentionDays: "a month" is not a whole number between 0 and 36500`},
		{v: "-1", wantErr: `context retentionDays: "-1" is not a whole number between 0 and 36500`},
	}
	for _, c := range cases {
		p, err := PropsFromContext(func(k string) any {
			if k == "retentionDays" {
				return c.v
			}
			return nil
		})
		if c.wantErr != "" {
			if err == nil || err.Error() != c.wantErr {
				t.Errorf("retentionDays=%v: error %v, want %q", c.v, err, c.wantErr)
			}
			continue
		}
		if err != nil || p.Retention != c.want {
			t.Errorf("retentionDays=%v: %v, %v; want %v", c.v, p, err, c.want)
		}
	}
}
