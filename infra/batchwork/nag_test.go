package batchwork_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/assertions"
	"github.com/aws/jsii-runtime-go"
	"github.com/cdklabs/cdk-nag-go/cdknag/v2"

	"github.com/batchwork/batchwork/infra/batchwork"
)

// everything is the construct with both executors, the remote
// executors' functions and allowed input buckets, so every resource the
// construct can create is checked.
func everything(t *testing.T) *synthesized {
	return synth(t, "both+nag", batchwork.Props{Executor: batchwork.ExecutorBoth, RemoteExecutorRoleArns: remoteRoles, InputBuckets: inputBuckets}, func(app awscdk.App) {
		awscdk.Aspects_Of(app).Add(cdknag.NewAwsSolutionsChecks(&cdknag.NagPackProps{Verbose: jsii.Bool(true), Reports: jsii.Bool(false)}), nil)
	})
}

// TestAwsSolutionsPack runs cdk-nag's AwsSolutions rules: no finding may
// remain; the construct's suppressions each carry a reason (nag.go).
func TestAwsSolutionsPack(t *testing.T) {
	s := everything(t)
	an := assertions.Annotations_FromStack(s.stack)
	errs := an.FindError(jsii.String("*"), assertions.Match_StringLikeRegexp(jsii.String("AwsSolutions-.*")))
	warns := an.FindWarning(jsii.String("*"), assertions.Match_StringLikeRegexp(jsii.String("AwsSolutions-.*")))
	for _, list := range []struct {
		kind string
		n    int
	}{{"error", len(*errs)}, {"warning", len(*warns)}} {
		if list.n > 0 {
			t.Errorf("%d cdk-nag AwsSolutions %ss", list.n, list.kind)
		}
	}
	for _, m := range append(*errs, *warns...) {
		t.Errorf("%s: %v", *m.Id, strings.SplitN(fmt.Sprint(m.Entry.Data), "\n", 2)[0])
	}
}
