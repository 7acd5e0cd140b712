package integration

import (
	"fmt"
	"strings"
	"testing"

	"github.com/batchwork/batchwork/infra/template"
	"github.com/batchwork/batchwork/internal/iamrec"
	"github.com/batchwork/batchwork/shared/blob"
	"github.com/batchwork/batchwork/shared/provision"
)

// iamTemplate is a synthesized template whose roles the IAM check proves
// (iamMain).
type iamTemplate struct {
	name string
	raw  []byte
}

// iamTemplates: the default stack deploys no claim or commit function
// (they serve remote executors only, and are deployed only for named
// remote executors' roles), so their requests are proven against the
// stack synthesized with a remote executor, which deploys every function.
// Both templates are checked both ways, each against the requests of the
// functions it deploys.
var iamTemplates = []iamTemplate{
	{"infra/template/Batchwork.template.json", template.JSON},
	{"infra/template/BatchworkRemoteExecutors.template.json", template.RemoteExecutorsJSON},
}

// remoteExecutorFunctions are the functions deployed only for remote
// executors.
var remoteExecutorFunctions = map[string]bool{iamrec.FnClaim: true, iamrec.FnCommit: true}

// uses are the recorded requests a template's roles are checked against:
// every one, but for a template that does not deploy the remote
// executors' functions, none of theirs. A request of any other function
// the template lacks stays, and fails the check.
func (tm iamTemplate) uses(rs iamRoles, all map[iamrec.Use]int) map[iamrec.Use]int {
	out := make(map[iamrec.Use]int, len(all))
	for u, n := range all {
		if _, deployed := rs.grants[u.Function]; !deployed && remoteExecutorFunctions[u.Function] {
			continue
		}
		out[u] = n
	}
	return out
}

// Every function's requests are proven against a template that deploys
// it: the default template's functions against both templates, the claim
// and commit functions (absent from the default template) against the
// remote executors' one.
func TestIAMTemplatesCoverEveryFunction(t *testing.T) {
	t.Parallel()
	both := []string{iamTemplates[0].name, iamTemplates[1].name}
	want := map[string][]string{
		iamrec.FnAPI: both, iamrec.FnSweep: both, iamrec.FnExecutor: both,
		iamrec.FnClaim: {iamTemplates[1].name}, iamrec.FnCommit: {iamTemplates[1].name},
	}
	checkedBy := map[string][]string{}
	for _, tm := range iamTemplates {
		rs, err := loadIAMRoles(tm.raw)
		if err != nil {
			t.Fatalf("%s: %v", tm.name, err)
		}
		for _, fn := range iamrec.Functions {
			use := iamrec.Use{Function: fn, Action: iamrec.Action{Action: "dynamodb:GetItem", Resource: iamrec.Resource{Kind: iamrec.KindTable}}}
			_, deployed := rs.grants[fn]
			_, checked := tm.uses(rs, map[iamrec.Use]int{use: 1})[use]
			if checked != deployed {
				t.Errorf("%s: %s deployed %v, its requests checked %v", tm.name, fn, deployed, checked)
			}
			if checked {
				checkedBy[fn] = append(checkedBy[fn], tm.name)
			}
		}
	}
	for _, fn := range iamrec.Functions {
		if fmt.Sprint(checkedBy[fn]) != fmt.Sprint(want[fn]) {
			t.Errorf("%s's requests are checked against %v, want %v", fn, checkedBy[fn], want[fn])
		}
	}
}

// The functions that publish but never read inputs (api, commit, sweep)
// read a published folder's claim and success marker only: a read of any
// other key in the outputs area, another owner's outputs included, is one
// their roles do not grant, and the check fails on it. The executor reads
// published folders as inputs, and may.
func TestIAMPublishersReadOnlyTheMarkersOfPublishedFolders(t *testing.T) {
	t.Parallel()
	const bucket = "iam-unit-markers"
	noteIAMResources(provision.Resources{Bucket: bucket})
	read := func(fn, key string) iamrec.Use {
		return iamrec.Use{Function: fn, Action: iamrec.Action{Action: "s3:GetObject", Resource: iamrec.Resource{Kind: iamrec.KindObject, Name: bucket, Key: key}}}
	}
	const folder = "outputs/0123abcd/reports/daily/"
	for _, fn := range []string{iamrec.FnAPI, iamrec.FnCommit, iamrec.FnSweep, iamrec.FnExecutor} {
		cases := []struct {
			key     string
			granted bool
		}{
			{folder + blob.ClaimName, true},
			{folder + blob.SuccessName, true},
			{"outputs/0123abcd/" + blob.ClaimName, true}, // a folder at the top of the owner's area
			{folder + "count/part-00000", fn == iamrec.FnExecutor},
			{"outputs/ffff0000/other/count/part-00000", fn == iamrec.FnExecutor}, // another owner's
		}
		for _, c := range cases {
			t.Run(fn+" "+c.key, func(t *testing.T) {
				rs, err := loadIAMRoles(template.RemoteExecutorsJSON) // every function
				if err != nil {
					t.Fatal(err)
				}
				_, err = checkIAM(rs, map[iamrec.Use]int{read(fn, c.key): 1}, false)
				switch notGranted := fmt.Sprintf("%s performs s3:GetObject on bucket/outputs/… (1 requests), which its role does not grant", fn); {
				case c.granted && err != nil:
					t.Fatalf("check: %v, want none", err)
				case !c.granted && (err == nil || !strings.Contains(err.Error(), notGranted)):
					t.Fatalf("check: %v, want %q", err, notGranted)
				}
			})
		}
	}
}
