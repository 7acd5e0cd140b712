package batchwork_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/jsii-runtime-go"
	"github.com/google/go-cmp/cmp"

	"github.com/batchwork/batchwork/infra/batchwork"
	"github.com/batchwork/batchwork/shared/lambdaenv"
)

// grantsOf lists "action on resource" for every action with the given
// prefix in the policies attached to a role.
func (s *synthesized) grantsOf(t *testing.T, roleID, prefix string) []string {
	t.Helper()
	var out []string
	for _, p := range s.ofType("AWS::IAM::Policy") {
		attached := false
		for _, r := range p.Properties["Roles"].([]any) {
			attached = attached || refID(r) == roleID
		}
		if !attached {
			continue
		}
		for _, st := range p.Properties["PolicyDocument"].(map[string]any)["Statement"].([]any) {
			st := st.(map[string]any)
			for _, a := range asAnyList(st["Action"]) {
				if strings.HasPrefix(a.(string), prefix) {
					for _, r := range asAnyList(st["Resource"]) {
						out = append(out, a.(string)+" on "+render(r))
					}
				}
			}
		}
	}
	slices.Sort(out)
	return out
}

// The executors, and only they, may invoke exactly the functions the
// operator lists (with their versions and aliases), and the submitting
// functions get the list to check specs against; without the prop no
// role may invoke any function.
func TestTaskFunctionsAreInvokableByTheExecutorsOnly(t *testing.T) {
	const arn = "arn:aws:lambda:eu-west-1:123456789012:function:scorer"
	const fnRole = "arn:aws:iam::123456789012:role/resize-fn"
	s := synth(t, "taskfns", batchwork.Props{Executor: batchwork.ExecutorBoth, TaskFunctions: []string{"resize", arn, "resize"},
		TaskFunctionRoleArns: []string{fnRole}}, nil)
	own := "arn:<partition>:lambda:<AWS::Region>:<AWS::AccountId>:function:resize"
	want := []string{
		"lambda:InvokeFunction on " + arn, "lambda:InvokeFunction on " + arn + ":*",
		"lambda:InvokeFunction on " + own, "lambda:InvokeFunction on " + own + ":*",
	}
	slices.Sort(want)
	executors := 0
	for role, id := range s.roles(t) {
		got := s.grantsOf(t, id, "lambda:")
		if !strings.Contains(role, "executor") {
			if len(got) > 0 {
				t.Errorf("%s may %v; only the executors invoke task functions", role, got)
			}
			continue
		}
		executors++
		if d := cmp.Diff(want, got); d != "" {
			t.Errorf("%s: invoke grants (-want +got):\n%s", role, d)
		}
	}
	if executors != 2 {
		t.Errorf("%d executor roles, want 2 (Lambda and Fargate)", executors)
	}
	for name, id := range s.functionIDs(t) {
		env := s.json.Resources[id].Properties["Environment"].(map[string]any)["Variables"].(map[string]any)
		var w any
		if name == batchwork.FnAPI || name == batchwork.FnSweep {
			w = "resize," + arn
		}
		if got := env[lambdaenv.EnvTaskFunctions]; got != w {
			t.Errorf("%s function: %s=%v, want %v", name, lambdaenv.EnvTaskFunctions, got, w)
		}
	}

	// The functions' roles may write their outputs in the job area, which
	// the bucket policy closes to every other principal.
	exempt := 0
	for _, p := range s.ofType("AWS::S3::BucketPolicy") {
		for _, st := range p.Properties["PolicyDocument"].(map[string]any)["Statement"].([]any) {
			cond, _ := st.(map[string]any)["Condition"].(map[string]any)
			if ne, ok := cond["ArnNotEquals"].(map[string]any); ok {
				exempt++
				if !slices.Contains(asAnyList(ne["aws:PrincipalArn"]), any(fnRole)) {
					t.Errorf("the job area's writers %v lack the task function's role %s", ne["aws:PrincipalArn"], fnRole)
				}
			}
		}
	}
	if exempt != 1 {
		t.Errorf("%d statements confine the job area, want 1", exempt)
	}

	d := defaultStack(t)
	for role, id := range d.roles(t) {
		if got := d.grantsOf(t, id, "lambda:"); len(got) > 0 {
			t.Errorf("default stack: %s may %v", role, got)
		}
	}
}

func TestBadTaskFunctionsPanic(t *testing.T) {
	for _, c := range []struct {
		name  string
		props batchwork.Props
		want  string
	}{
		{"a path", batchwork.Props{TaskFunctions: []string{"not/a/function"}}, `taskFunctions: task function "not/a/function"`},
		{"an alias", batchwork.Props{TaskFunctions: []string{"resize:live"}}, `taskFunctions: task function "resize:live"`},
		{"a role that is not one", batchwork.Props{TaskFunctionRoleArns: []string{"arn:aws:iam::123456789012:user/bob"}}, `taskFunctionRoleArns: "arn:aws:iam::123456789012:user/bob"`},
	} {
		t.Run(c.name, func(t *testing.T) {
			defer func() {
				if r := recover(); r == nil || !strings.Contains(fmt.Sprint(r), c.want) {
					t.Fatalf("panic %v, want one naming %q", r, c.want)
				}
			}()
			app := awscdk.NewApp(&awscdk.AppProps{Outdir: jsii.String(t.TempDir())})
			batchwork.NewBatchwork(awscdk.NewStack(app, jsii.String("Bad"), nil), "Batchwork", &c.props)
		})
	}
}
