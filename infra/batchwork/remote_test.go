package batchwork_test

import (
	"sort"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/batchwork/batchwork/infra/batchwork"
)

// remoteRoles are the remote executors' roles of remoteStack: one in the
// stack's account and one elsewhere, with a path.
var remoteRoles = []string{"arn:aws:iam::123456789012:role/remote-executor", "arn:aws:iam::210987654321:role/batch/other-executor"}

// remoteStack is the default stack with the claim and commit functions
// deployed for remoteRoles.
func remoteStack(t *testing.T) *synthesized {
	return synth(t, "remote", batchwork.Props{RemoteExecutorRoleArns: remoteRoles}, nil)
}

// The claim and commit functions serve remote executors only, and any
// principal that may invoke them can claim (and so fence) any owner's
// task: they are deployed only when remote executors' roles are named,
// and then only those roles may invoke them (each function's resource
// policy names exactly them). No role of the default stack holds their
// grants.
func TestRemoteExecutorFunctionsAreOptIn(t *testing.T) {
	cases := []struct {
		name      string
		stack     func(*testing.T) *synthesized
		functions []string
		invokers  []string // principals allowed to invoke claim and commit
	}{
		{"default", defaultStack, []string{batchwork.FnAPI, batchwork.FnExecutor, batchwork.FnSweep}, nil},
		{"remote executors named", remoteStack,
			[]string{batchwork.FnAPI, batchwork.FnClaim, batchwork.FnCommit, batchwork.FnExecutor, batchwork.FnSweep}, remoteRoles},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := c.stack(t)
			ids := s.functionIDs(t)
			var fns []string
			for name := range ids {
				fns = append(fns, name)
			}
			sort.Strings(fns)
			if diff := cmp.Diff(c.functions, fns); diff != "" {
				t.Errorf("functions (-want +got):\n%s", diff)
			}
			// Every function in the template is one of the construct's, and
			// every role is one of theirs: no role is left with the claim or
			// commit grants.
			fnRoles := map[string]bool{}
			for id, fn := range s.ofType("AWS::Lambda::Function") {
				desc, _ := fn.Properties["Description"].(string)
				name, _ := strings.CutPrefix(desc, "Batchwork ")
				if ids[name] != id {
					t.Errorf("function %s (%q) is not one of the construct's %v", id, desc, ids)
				}
				fnRoles[refID(fn.Properties["Role"])] = true
			}
			for id, r := range s.ofType("AWS::IAM::Role") {
				if !fnRoles[id] {
					t.Errorf("role %s (%v) belongs to no deployed function", id, r.Properties["Description"])
				}
			}
			// Who may invoke claim and commit, and nothing else may be
			// invoked by a principal the construct names.
			invokers := map[string][]string{}
			for id, p := range s.ofType("AWS::Lambda::Permission") {
				fn := refID(p.Properties["FunctionName"])
				principal, _ := p.Properties["Principal"].(string)
				if strings.HasSuffix(principal, ".amazonaws.com") {
					continue // a service's (API Gateway, EventBridge) permission
				}
				if p.Properties["Action"] != "lambda:InvokeFunction" {
					t.Errorf("permission %s: action %v", id, p.Properties["Action"])
				}
				invokers[fn] = append(invokers[fn], principal)
			}
			want := map[string][]string{}
			for _, fn := range []string{batchwork.FnClaim, batchwork.FnCommit} {
				if len(c.invokers) > 0 {
					want[ids[fn]] = sorted(c.invokers)
				}
			}
			for fn := range invokers {
				sort.Strings(invokers[fn])
			}
			if diff := cmp.Diff(want, invokers); diff != "" {
				t.Errorf("principals allowed to invoke, by function (-want +got):\n%s", diff)
			}
		})
	}
}
