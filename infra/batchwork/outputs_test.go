package batchwork_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/google/go-cmp/cmp"

	"github.com/batchwork/batchwork/infra/batchwork"
	"github.com/batchwork/batchwork/shared/lambdaenv"
)

// outputBuckets are the operator-allowed output buckets of outputsStack.
var outputBuckets = []string{"corp-results"}

func outputsStack(t *testing.T) *synthesized {
	return synth(t, "outputs", batchwork.Props{Executor: batchwork.ExecutorBoth, OutputBuckets: outputBuckets, RemoteExecutorRoleArns: remoteRoles}, nil)
}

// The roles that end jobs (api, commit, sweep, both executors) publish
// outputs: on each allowed output bucket they may do exactly what they may
// in the data bucket's outputs area (write, read a folder's claim and
// success marker, list what a publish copied), and the claim function,
// which never ends a job, nothing. Only the executors, which read
// published folders as inputs, may read the outputs themselves, and only
// in the outputs area: an output bucket is read as an input when it is
// an input bucket too.
func TestOutputBucketsAreGrantedLikeTheOutputsArea(t *testing.T) {
	s := outputsStack(t)
	data := "<" + *s.stack.GetLogicalId(s.b.Bucket.Node().DefaultChild().(awscdk.CfnElement)) + ">"
	for role, id := range s.roles(t) {
		area := map[string]bool{}
		perBucket := map[string]map[string]bool{}
		for _, g := range s.s3Grants(t, id) {
			switch {
			case strings.HasPrefix(g.resource, data+"/outputs/*"):
				area[g.action+strings.TrimPrefix(g.resource, data+"/outputs/*")] = true
			case g.resource == data && slices.Contains(g.prefixes, "outputs/*"):
				area[g.action] = true
			case strings.HasPrefix(g.resource, "arn:<partition>:s3:::"):
				b, objects, _ := strings.Cut(strings.TrimPrefix(g.resource, "arn:<partition>:s3:::"), "/*")
				if perBucket[b] == nil {
					perBucket[b] = map[string]bool{}
				}
				perBucket[b][g.action+objects] = true
			}
		}
		publisher := role != batchwork.FnClaim
		want := map[string]bool{}
		if publisher {
			want = map[string]bool{"s3:GetObject/_batchwork.json": true, "s3:GetObject/_SUCCESS": true, "s3:ListBucket": true, "s3:PutObject": true}
		}
		if (role == batchwork.FnExecutor || role == "fargate executor") && area["s3:GetObject"] {
			// Reads published folders as inputs (in the outputs area
			// only), their markers included.
			delete(area, "s3:GetObject")
			area["s3:GetObject/_batchwork.json"], area["s3:GetObject/_SUCCESS"] = true, true
		}
		if diff := cmp.Diff(want, area); diff != "" {
			t.Errorf("%s: actions on the outputs area (-want +got):\n%s", role, diff)
		}
		for _, b := range outputBuckets {
			if diff := cmp.Diff(area, perBucket[b]); diff != "" && (len(area) > 0 || len(perBucket[b]) > 0) {
				t.Errorf("%s: actions on %s differ from those on the outputs area (-outputs area +%s):\n%s", role, b, b, diff)
			}
		}
	}
}

// The allowed output buckets reach the functions that submit (api, and
// sweep for firings) and no other; a bad name panics naming the prop.
func TestOutputBucketsReachTheSubmitters(t *testing.T) {
	s := outputsStack(t)
	for fn, id := range s.functionIDs(t) {
		env := s.json.Resources[id].Properties["Environment"].(map[string]any)["Variables"].(map[string]any)
		want := strings.Join(outputBuckets, ",")
		if fn != batchwork.FnAPI && fn != batchwork.FnSweep {
			want = ""
		}
		if got, _ := env[lambdaenv.EnvOutputBuckets].(string); got != want {
			t.Errorf("%s: %s=%q, want %q", fn, lambdaenv.EnvOutputBuckets, got, want)
		}
	}
	t.Run("bad name", func(t *testing.T) {
		defer func() {
			if r := recover(); r == nil || !strings.Contains(fmt.Sprint(r), `outputBuckets: bucket "Bad_Name"`) {
				t.Fatalf("panic %v, want one naming outputBuckets and the name", r)
			}
		}()
		synth(t, "bad output bucket", batchwork.Props{OutputBuckets: []string{"Bad_Name"}}, nil)
	})
}
