package batchwork_test

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/google/go-cmp/cmp"

	"github.com/batchwork/batchwork/infra/batchwork"
	"github.com/batchwork/batchwork/shared/lambdaenv"
)

// inputBuckets are the operator-allowed input buckets of inputsStack.
var inputBuckets = []string{"corp-data", "raw.example.com"}

// inputsStack deploys every function, both executors and two allowed
// input buckets.
func inputsStack(t *testing.T) *synthesized {
	return synth(t, "inputs", batchwork.Props{Executor: batchwork.ExecutorBoth, InputBuckets: inputBuckets, RemoteExecutorRoleArns: remoteRoles}, nil)
}

// s3Grant is one S3 action a role is granted, on a resource rendered as
// text ("<Data>/jobs/*", "arn:<partition>:s3:::corp-data"), with the
// s3:prefix values its condition limits a listing to (nil: none).
type s3Grant struct {
	action, resource string
	prefixes         []string
}

func (g s3Grant) String() string {
	if g.prefixes == nil {
		return g.action + " on " + g.resource
	}
	return fmt.Sprintf("%s on %s with s3:prefix %v", g.action, g.resource, g.prefixes)
}

// render writes a policy resource as text: an attribute of a logical id
// as <id>, a pseudo parameter as <partition>, joins concatenated.
func render(v any) string {
	switch x := v.(type) {
	case string:
		return x
	case map[string]any:
		if r, ok := x["Ref"].(string); ok {
			if r == "AWS::Partition" {
				return "<partition>"
			}
			return "<" + r + ">"
		}
		if a, ok := x["Fn::GetAtt"].([]any); ok {
			return "<" + a[0].(string) + ">"
		}
		if j, ok := x["Fn::Join"].([]any); ok {
			var b strings.Builder
			for _, p := range j[1].([]any) {
				b.WriteString(render(p))
			}
			return b.String()
		}
	}
	return fmt.Sprint(v)
}

// s3Grants lists the S3 actions in the policies attached to a role.
func (s *synthesized) s3Grants(t *testing.T, roleID string) []s3Grant {
	t.Helper()
	var out []s3Grant
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
			var prefixes []string
			if c, ok := st["Condition"].(map[string]any); ok {
				like, _ := c["StringLike"].(map[string]any)
				if len(c) != 1 || len(like) != 1 {
					t.Errorf("role %s: condition %v, want only StringLike s3:prefix", roleID, c)
				}
				for _, p := range asAnyList(like["s3:prefix"]) {
					prefixes = append(prefixes, p.(string))
				}
				sort.Strings(prefixes)
			}
			for _, a := range asAnyList(st["Action"]) {
				if !strings.HasPrefix(a.(string), "s3:") {
					continue
				}
				for _, r := range asAnyList(st["Resource"]) {
					out = append(out, s3Grant{a.(string), render(r), prefixes})
				}
			}
		}
	}
	return out
}

func asAnyList(v any) []any {
	if l, ok := v.([]any); ok {
		return l
	}
	return []any{v}
}

// roles maps each function, and the Fargate executor's task role, to its
// role's logical id.
func (s *synthesized) roles(t *testing.T) map[string]string {
	t.Helper()
	out := map[string]string{}
	for name, id := range s.functionIDs(t) {
		out[name] = refID(s.json.Resources[id].Properties["Role"])
	}
	for _, td := range s.ofType("AWS::ECS::TaskDefinition") {
		out["fargate executor"] = refID(td.Properties["TaskRoleArn"])
	}
	return out
}

// No role reads anything of the data bucket but its three areas (jobs/,
// inputs/ and outputs/, where jobs publish and which a job may read as an
// input), or any other bucket but the ones the operator allows: object
// reads are granted on those key patterns and those buckets only, and a
// listing of the data bucket is limited to those prefixes. Only the
// executors, which read inputs, read the inputs area's objects and the
// outputs in the outputs area; the other roles read there only folders'
// claims and success markers.
func TestRolesReadOnlyTheJobAndInputsAreas(t *testing.T) {
	for name, stack := range map[string]func(*testing.T) *synthesized{"default": defaultStack, "with input buckets": inputsStack} {
		t.Run(name, func(t *testing.T) {
			s := stack(t)
			data := "<" + *s.stack.GetLogicalId(s.b.Bucket.Node().DefaultChild().(awscdk.CfnElement)) + ">"
			var allowedObjects, allowedBuckets []string
			if name != "default" {
				for _, b := range inputBuckets {
					allowedBuckets = append(allowedBuckets, "arn:<partition>:s3:::"+b)
					allowedObjects = append(allowedObjects, "arn:<partition>:s3:::"+b+"/*")
				}
			}
			readers, executors := 0, 0
			for role, id := range s.roles(t) {
				executor := strings.Contains(role, "executor")
				if executor {
					executors++
				}
				for _, g := range s.s3Grants(t, id) {
					switch g.action {
					case "s3:GetObject":
						switch {
						case g.resource == data+"/jobs/*", g.resource == data+"/outputs/*/_batchwork.json", g.resource == data+"/outputs/*/_SUCCESS":
						case g.resource == data+"/outputs/*" && executor: // published folders read as inputs
						case (g.resource == data+"/inputs/*" || slices.Contains(allowedObjects, g.resource)) && executor:
							readers++
						default:
							t.Errorf("%s: %s: reads outside the job area, the inputs area (executors only) and the allowed buckets", role, g)
						}
					case "s3:ListBucket":
						switch {
						case g.resource == data && g.prefixes != nil && !slices.ContainsFunc(g.prefixes, func(p string) bool { return p != "jobs/*" && p != "inputs/*" && p != "outputs/*" }):
						case slices.Contains(allowedBuckets, g.resource) && g.prefixes == nil:
						default:
							t.Errorf("%s: %s: lists outside the job and inputs areas and the allowed buckets", role, g)
						}
					}
				}
			}
			if want := executors * (1 + len(allowedObjects)); readers != want {
				t.Errorf("%d grants read the inputs area or an allowed bucket, want %d (each of %d executors, each area)", readers, want, executors)
			}
		})
	}
}

// Every allowed input bucket is granted to exactly the roles, and for
// exactly the actions, the data bucket's inputs area is: listing to the
// roles that plan (api, commit, sweep, executors), object reads to the
// executors. (The IAM check of the integration suite relies on this: it
// counts a request on an allowed bucket as one on the inputs area.)
func TestInputBucketsAreGrantedLikeTheInputsArea(t *testing.T) {
	s := inputsStack(t)
	data := "<" + *s.stack.GetLogicalId(s.b.Bucket.Node().DefaultChild().(awscdk.CfnElement)) + ">"
	for role, id := range s.roles(t) {
		inputs := map[string]bool{} // actions on the inputs area
		perBucket := map[string]map[string]bool{}
		for _, g := range s.s3Grants(t, id) {
			switch {
			case g.resource == data+"/inputs/*", g.resource == data && slices.Contains(g.prefixes, "inputs/*"),
				// A bucket setting, read to plan inputs, takes no s3:prefix.
				g.resource == data && g.action == "s3:GetBucketVersioning":
				inputs[g.action] = true
			case strings.HasPrefix(g.resource, "arn:<partition>:s3:::"):
				b := strings.TrimSuffix(strings.TrimPrefix(g.resource, "arn:<partition>:s3:::"), "/*")
				if perBucket[b] == nil {
					perBucket[b] = map[string]bool{}
				}
				perBucket[b][g.action] = true
			}
		}
		for _, b := range inputBuckets {
			if diff := cmp.Diff(inputs, perBucket[b]); diff != "" && (len(inputs) > 0 || len(perBucket[b]) > 0) {
				t.Errorf("%s: actions on %s differ from those on the inputs area (-inputs area +%s):\n%s", role, b, b, diff)
			}
		}
		planner := role == batchwork.FnAPI || role == batchwork.FnCommit || role == batchwork.FnSweep || strings.Contains(role, "executor")
		if planner != inputs["s3:ListBucket"] || strings.Contains(role, "executor") != inputs["s3:GetObject"] {
			t.Errorf("%s: inputs area actions %v; want listing iff it plans, reading iff it is an executor", role, inputs)
		}
	}
}

// The allowed input buckets reach the functions that submit (api, and
// sweep for firings) and no other; a stack without them sets nothing; a
// bad name panics naming the prop.
func TestInputBucketsReachTheSubmitters(t *testing.T) {
	for name, c := range map[string]struct {
		stack func(*testing.T) *synthesized
		want  string
	}{"default": {defaultStack, ""}, "with input buckets": {inputsStack, strings.Join(inputBuckets, ",")}} {
		t.Run(name, func(t *testing.T) {
			s := c.stack(t)
			for fn, id := range s.functionIDs(t) {
				env := s.json.Resources[id].Properties["Environment"].(map[string]any)["Variables"].(map[string]any)
				want := c.want
				if fn != batchwork.FnAPI && fn != batchwork.FnSweep {
					want = ""
				}
				if got, _ := env[lambdaenv.EnvInputBuckets].(string); got != want {
					t.Errorf("%s: %s=%q, want %q", fn, lambdaenv.EnvInputBuckets, got, want)
				}
			}
		})
	}
	t.Run("bad name", func(t *testing.T) {
		defer func() {
			if r := recover(); r == nil || !strings.Contains(fmt.Sprint(r), `inputBuckets: bucket "Bad_Name"`) {
				t.Fatalf("panic %v, want one naming inputBuckets and the name", r)
			}
		}()
		synth(t, "bad input bucket", batchwork.Props{InputBuckets: []string{"corp-data", "Bad_Name"}}, nil)
	})
}
