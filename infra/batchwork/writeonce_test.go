package batchwork_test

import (
	"encoding/json"
	"sort"
	"testing"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/jsii-runtime-go"
	"github.com/google/go-cmp/cmp"

	"github.com/batchwork/batchwork/infra/batchwork"
)

// "Published outputs never change" holds for every principal, not only
// for the code that sends If-None-Match: the data bucket's policy denies
// any object-creating write under jobs/ (PutObject, and the
// CompleteMultipartUpload that ends a multipart upload) that does not
// carry If-None-Match. The steps of a multipart upload that cannot carry
// the header (s3:ObjectCreationOperation false) are left alone, so that an
// upload whose completion carries it still works (AWS: "Enforce
// conditional writes on Amazon S3 buckets"). integration/writeonce_test.go
// evaluates every write the code makes against this statement.
func TestJobAreaIsWriteOnce(t *testing.T) {
	for name, s := range map[string]*synthesized{"default": defaultStack(t), "everything": everything(t)} {
		t.Run(name, func(t *testing.T) {
			bucket := *s.stack.GetLogicalId(s.b.Bucket.Node().DefaultChild().(awscdk.CfnElement))
			arn := map[string]any{"Fn::GetAtt": []any{bucket, "Arn"}}
			want := map[string]any{
				"Effect":    "Deny",
				"Principal": map[string]any{"AWS": "*"},
				"Action":    "s3:PutObject",
				"Resource":  map[string]any{"Fn::Join": []any{"", []any{arn, "/jobs/*"}}},
				"Condition": map[string]any{
					"Null": map[string]any{"s3:if-none-match": "true"},
					"Bool": map[string]any{"s3:ObjectCreationOperation": "true"},
				},
			}
			policies := s.ofType("AWS::S3::BucketPolicy")
			found := 0
			for id, p := range policies {
				if refID(p.Properties["Bucket"]) != bucket {
					continue
				}
				for _, st := range p.Properties["PolicyDocument"].(map[string]any)["Statement"].([]any) {
					st := st.(map[string]any)
					if st["Effect"] != "Deny" || st["Action"] != "s3:PutObject" {
						continue
					}
					found++
					if diff := cmp.Diff(want, st); diff != "" {
						t.Errorf("policy %s: the write-once statement (-want +got):\n%s", id, diff)
					}
				}
			}
			if found != 1 {
				raw, _ := json.MarshalIndent(policies, "", "  ")
				t.Fatalf("%d statements deny s3:PutObject on the data bucket, want the one write-once statement; bucket policies:\n%s", found, raw)
			}
		})
	}
}

// Roles write and tag objects only in the job area (jobs/*: plans,
// attempt outputs, manifests), where the bucket policy above lets them
// only create, and the functions that end jobs write the outputs area
// (outputs/*: published folders, written with If-None-Match by
// shared/control/publish.go): nothing of the installation writes the
// inputs area (owners upload there with their own credentials) or
// anywhere else in the bucket. Only attempt outputs are ever tagged (as
// uncommitted, for the lifecycle rule), always under jobs/.
func TestObjectWritesStayInTheJobArea(t *testing.T) {
	s := everything(t)
	jobs := []string{"jobs/*"}
	publish := []string{"jobs/*", "outputs/*"}
	want := map[string]map[string][]string{ // role -> action -> key patterns
		batchwork.FnAPI:      {"s3:PutObject": publish},
		batchwork.FnClaim:    {"s3:PutObjectTagging": jobs},
		batchwork.FnCommit:   {"s3:PutObject": publish, "s3:PutObjectTagging": jobs},
		batchwork.FnSweep:    {"s3:PutObject": publish, "s3:PutObjectTagging": jobs},
		batchwork.FnExecutor: {"s3:PutObject": publish, "s3:PutObjectTagging": jobs},
		"fargate":            {"s3:PutObject": publish, "s3:PutObjectTagging": jobs},
	}
	bucket := *s.stack.GetLogicalId(s.b.Bucket.Node().DefaultChild().(awscdk.CfnElement))
	roles := map[string]string{} // role logical id -> name
	for name, id := range s.functionIDs(t) {
		roles[refID(s.json.Resources[id].Properties["Role"])] = name
	}
	td := s.b.Construct.Node().FindChild(jsii.String("FargateExecutor")).Node().FindChild(jsii.String("QueueProcessingTaskDef"))
	roles[*s.stack.GetLogicalId(td.Node().FindChild(jsii.String("TaskRole")).Node().DefaultChild().(awscdk.CfnElement))] = "fargate"

	got := map[string]map[string][]string{}
	for pid, p := range s.ofType("AWS::IAM::Policy") {
		for _, r := range p.Properties["Roles"].([]any) {
			name, ok := roles[refID(r)]
			if !ok {
				continue
			}
			for _, st := range p.Properties["PolicyDocument"].(map[string]any)["Statement"].([]any) {
				st := st.(map[string]any)
				for _, a := range list(st["Action"]) {
					if a != "s3:PutObject" && a != "s3:PutObjectTagging" {
						continue
					}
					for _, res := range list(st["Resource"]) {
						key, ok := objectKeyPattern(res, bucket)
						if !ok {
							t.Errorf("policy %s grants %s %s on %v, which is no object pattern of the data bucket", pid, name, a, res)
							continue
						}
						if got[name] == nil {
							got[name] = map[string][]string{}
						}
						got[name][a.(string)] = append(got[name][a.(string)], key)
					}
				}
			}
		}
	}
	for _, m := range got {
		for a := range m {
			sort.Strings(m[a])
		}
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("object writes by role (-want +got):\n%s", diff)
	}
}

func list(v any) []any {
	if l, ok := v.([]any); ok {
		return l
	}
	return []any{v}
}

// objectKeyPattern returns P of {"Fn::Join": ["", [{"Fn::GetAtt": [bucket,
// "Arn"]}, "/P"]]}.
func objectKeyPattern(v any, bucket string) (string, bool) {
	m, _ := v.(map[string]any)
	j, _ := m["Fn::Join"].([]any)
	if len(j) != 2 || j[0] != "" {
		return "", false
	}
	parts, _ := j[1].([]any)
	if len(parts) != 2 || refID(parts[0]) != bucket {
		return "", false
	}
	s, _ := parts[1].(string)
	if len(s) < 2 || s[0] != '/' {
		return "", false
	}
	return s[1:], true
}

// Only the installation changes the job area: the bucket policy denies
// every other principal writing, tagging or deleting objects under jobs/,
// whatever its own IAM policy allows. Without this, a user granted
// s3:PutObject on the bucket could create an object the code has yet to
// write (If-None-Match does not stop a first write): a plan for a stage of
// the user's own job that names another owner's inputs, or a future
// attempt's output, which the code would take for its own. The roles
// exempted are exactly the roles granted to write or tag there (the
// functions', the Fargate executor's) and the remote executors'.
func TestOnlyTheInstallationChangesTheJobArea(t *testing.T) {
	for name, s := range map[string]*synthesized{"default": defaultStack(t), "everything": everything(t)} {
		t.Run(name, func(t *testing.T) {
			bucket := *s.stack.GetLogicalId(s.b.Bucket.Node().DefaultChild().(awscdk.CfnElement))
			var principals []any
			for _, id := range s.functionIDs(t) {
				principals = append(principals, map[string]any{"Fn::GetAtt": []any{refID(s.json.Resources[id].Properties["Role"]), "Arn"}})
			}
			if name == "everything" {
				td := s.b.Construct.Node().FindChild(jsii.String("FargateExecutor")).Node().FindChild(jsii.String("QueueProcessingTaskDef"))
				role := *s.stack.GetLogicalId(td.Node().FindChild(jsii.String("TaskRole")).Node().DefaultChild().(awscdk.CfnElement))
				principals = append(principals, map[string]any{"Fn::GetAtt": []any{role, "Arn"}})
				for _, r := range remoteRoles {
					principals = append(principals, r)
				}
			}
			sortAny(principals)
			want := map[string]any{
				"Effect":    "Deny",
				"Principal": map[string]any{"AWS": "*"},
				"Action":    []any{"s3:DeleteObject", "s3:PutObject", "s3:PutObjectTagging"},
				"Resource":  map[string]any{"Fn::Join": []any{"", []any{map[string]any{"Fn::GetAtt": []any{bucket, "Arn"}}, "/jobs/*"}}},
				"Condition": map[string]any{"ArnNotEquals": map[string]any{"aws:PrincipalArn": principals}},
			}
			found := 0
			for id, p := range s.ofType("AWS::S3::BucketPolicy") {
				if refID(p.Properties["Bucket"]) != bucket {
					continue
				}
				for _, st := range p.Properties["PolicyDocument"].(map[string]any)["Statement"].([]any) {
					st := st.(map[string]any)
					cond, _ := st["Condition"].(map[string]any)
					if _, ok := cond["ArnNotEquals"]; !ok {
						continue
					}
					found++
					if ps, ok := cond["ArnNotEquals"].(map[string]any)["aws:PrincipalArn"].([]any); ok {
						sortAny(ps)
					}
					if diff := cmp.Diff(want, st); diff != "" {
						t.Errorf("policy %s: the job area's principals (-want +got):\n%s", id, diff)
					}
				}
			}
			if found != 1 {
				t.Fatalf("%d statements confine the job area to the installation's principals, want 1", found)
			}
		})
	}
}

func sortAny(l []any) {
	sort.Slice(l, func(i, j int) bool {
		a, _ := json.Marshal(l[i])
		b, _ := json.Marshal(l[j])
		return string(a) < string(b)
	})
}
