package lambdaenv

import (
	"strings"
	"testing"
	"time"
)

func TestRetentionFromEnv(t *testing.T) {
	cases := []struct {
		v       string
		want    time.Duration
		wantErr bool
	}{
		{v: "", want: 0},
		{v: "0", want: 0},
		{v: "8", want: 8 * 24 * time.Hour},
		{v: "365", want: 365 * 24 * time.Hour},
		{v: "7", wantErr: true},
		{v: "-1", wantErr: true},
		{v: "30d", wantErr: true},
	}
	for _, c := range cases {
		got, err := RetentionFromEnv(func(k string) string {
			if k == EnvRetentionDays {
				return c.v
			}
			return ""
		})
		if c.wantErr {
			if err == nil || !strings.Contains(err.Error(), EnvRetentionDays) {
				t.Errorf("%q: %v, %v; want an error naming %s", c.v, got, err, EnvRetentionDays)
			}
			continue
		}
		if err != nil || got != c.want {
			t.Errorf("%q: %v, %v; want %v", c.v, got, err, c.want)
		}
	}
}
