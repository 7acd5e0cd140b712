package cli

import (
	"bytes"
	"regexp"
	"testing"
	"time"

	"github.com/batchwork/batchwork/client"
)

// A running job's status shows each concurrency limit's use, and says
// when a limit is full (the job's tasks then wait for a slot).
func TestPrintStatusLimits(t *testing.T) {
	now := time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)
	a := &app{env: Env{Now: func() time.Time { return now }, Loc: time.UTC}}
	for _, tc := range []struct {
		name   string
		state  string
		limits []client.LimitUse
		want   []string // regexps, each matching one line
		absent string
	}{
		{"no limits", "RUNNING", nil, nil, `Limit`},
		{"job limit full, owner limit with room", "RUNNING",
			[]client.LimitUse{{Kind: "job", Max: 4, Running: 4}, {Kind: "owner", Max: 200, Running: 17}},
			[]string{`(?m)^Limit \(job\):\s+4 of 4 running \(full: tasks wait for a slot\)$`, `(?m)^Limit \(owner\):\s+17 of 200 running$`}, ""},
		{"an ended job shows none", "SUCCEEDED", []client.LimitUse{{Kind: "job", Max: 4, Running: 0}}, nil, `Limit`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out bytes.Buffer
			a.printStatus(&out, client.JobStatus{ID: "j1", Name: "wc", State: tc.state, Created: now, Limits: tc.limits})
			for _, w := range tc.want {
				if !regexp.MustCompile(w).Match(out.Bytes()) {
					t.Errorf("output lacks %s:\n%s", w, out.String())
				}
			}
			if tc.absent != "" && regexp.MustCompile(tc.absent).Match(out.Bytes()) {
				t.Errorf("output has %s:\n%s", tc.absent, out.String())
			}
		})
	}
}
