package batchwork_test

import (
	"testing"

	"github.com/aws/aws-cdk-go/awscdk/v2/assertions"
	"github.com/aws/jsii-runtime-go"

	"github.com/batchwork/batchwork/infra/batchwork"
	"github.com/batchwork/batchwork/shared/control"
	"github.com/batchwork/batchwork/shared/lambdaenv"
)

// Owners are protected from each other by default: each runs at most half
// of the executors at once (a per-owner running-task cap), and no owner
// may use priority "high" unless the operator names it. An operator who
// turns a protection off gets a synth warning naming the setting.
func TestOwnersAreProtectedFromEachOtherByDefault(t *testing.T) {
	cases := []struct {
		name  string
		props batchwork.Props
		// wantCap is the owner limits the functions that claim get;
		// wantHigh the allow-list the submitting functions get.
		wantCap, wantHigh string
		// warns are the settings synth warns about.
		warns []string
	}{
		{name: "default", props: batchwork.Props{}, wantCap: "*=50", wantHigh: control.NoHighPriorityOwners},
		{name: "fargate", props: batchwork.Props{Executor: batchwork.ExecutorFargate}, wantCap: "*=20", wantHigh: control.NoHighPriorityOwners},
		{name: "larger lambda fleet", props: batchwork.Props{ExecutorMaxConcurrency: 400}, wantCap: "*=200", wantHigh: control.NoHighPriorityOwners},
		{name: "named", props: batchwork.Props{OwnerMaxConcurrency: "*=10,arn:aws:iam::123456789012:role/etl=100", HighPriorityOwners: "arn:aws:iam::123456789012:role/ops"},
			wantCap: "*=10,arn:aws:iam::123456789012:role/etl=100", wantHigh: "arn:aws:iam::123456789012:role/ops"},
		{name: "cap off", props: batchwork.Props{OwnerMaxConcurrency: "*=0"}, wantCap: "", wantHigh: control.NoHighPriorityOwners, warns: []string{"ownerMaxConcurrency"}},
		{name: "cap for named owners only", props: batchwork.Props{OwnerMaxConcurrency: "arn:aws:iam::123456789012:role/etl=5"},
			wantCap: "arn:aws:iam::123456789012:role/etl=5", wantHigh: control.NoHighPriorityOwners, warns: []string{"ownerMaxConcurrency"}},
		{name: "high for all", props: batchwork.Props{HighPriorityOwners: "*"}, wantCap: "*=50", wantHigh: "*", warns: []string{"highPriorityOwners"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := synth(t, "owner defaults "+c.name, c.props, nil)
			for name, id := range s.functionIDs(t) {
				env := s.json.Resources[id].Properties["Environment"].(map[string]any)["Variables"].(map[string]any)
				wantCap, wantHigh := c.wantCap, c.wantHigh
				if name == batchwork.FnAPI {
					wantCap = "" // it never claims
				}
				if name != batchwork.FnAPI && name != batchwork.FnSweep {
					wantHigh = "" // it never submits
				}
				if got, _ := env[lambdaenv.EnvOwnerMaxConcurrency].(string); got != wantCap {
					t.Errorf("%s function: %s=%q, want %q", name, lambdaenv.EnvOwnerMaxConcurrency, got, wantCap)
				}
				if got, _ := env[lambdaenv.EnvHighPriorityOwners].(string); got != wantHigh {
					t.Errorf("%s function: %s=%q, want %q", name, lambdaenv.EnvHighPriorityOwners, got, wantHigh)
				}
			}
			a := assertions.Annotations_FromStack(s.stack)
			for _, setting := range []string{"ownerMaxConcurrency", "highPriorityOwners"} {
				warned := false
				for _, w := range c.warns {
					warned = warned || w == setting
				}
				match := assertions.Match_StringLikeRegexp(jsii.String("^batchwork: " + setting + " "))
				check(t, func() {
					if warned {
						a.HasWarning(jsii.String("*"), match)
					} else {
						a.HasNoWarning(jsii.String("*"), match)
					}
				})
			}
		})
	}
}
