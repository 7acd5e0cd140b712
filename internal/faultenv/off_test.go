//go:build !faults

package faultenv

import (
	"strings"
	"testing"
)

// Without the faults tag a binary injects nothing, and refuses a setting
// that asks for faults rather than running fault-free.
func TestFromEnvWithoutTheTag(t *testing.T) {
	for _, tc := range []struct {
		name, rules string
		err         []string // substrings of the error; nil: no error
	}{
		{name: "unset"},
		{name: "off", rules: "Off"},
		{name: "blank", rules: "  "},
		{name: "chaos", rules: "chaos", err: []string{`BATCHWORK_FAULTS="chaos"`, "-tags faults"}},
		{name: "a rule", rules: "throttle:0.5", err: []string{"BATCHWORK_FAULTS", "without fault injection"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv(EnvRules, tc.rules)
			inj, err := FromEnv()
			if tc.err == nil {
				if err != nil || inj == nil {
					t.Fatalf("FromEnv() = %v, %v; want an injector that injects nothing", inj, err)
				}
				inj.SetEnabled(true)
				inj.ReportEvery(t.Context(), 1, func(map[string]int) { t.Error("reported without faults") })
				return
			}
			if err == nil {
				t.Fatalf("FromEnv() with %s=%q: no error", EnvRules, tc.rules)
			}
			for _, want := range tc.err {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not contain %q", err, want)
				}
			}
		})
	}
}
