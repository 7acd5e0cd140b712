package batchwork_test

import (
	"fmt"
	"sort"
	"strings"
	"testing"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/google/go-cmp/cmp"
)

// Users upload inputs to the data bucket with their own credentials and
// download outputs through presigned URLs, so neither the API's logs nor
// the functions' record that access: the bucket's S3 server access logs
// do, into a log bucket of the installation's own. The log bucket is
// private, TLS-only, encrypted with S3 keys (the only encryption log
// delivery writes to), written only by the logging service for the data
// bucket, kept when the stack goes, and expires logs after 90 days (as the
// API's access logs).
func TestDataBucketAccessIsLogged(t *testing.T) {
	s := defaultStack(t)
	id := func(c awscdk.Resource) string {
		return *s.stack.GetLogicalId(c.Node().DefaultChild().(awscdk.CfnElement))
	}
	if s.b.AccessLogs == nil {
		t.Fatal("no access log bucket")
	}
	data, logs := id(s.b.Bucket), id(s.b.AccessLogs)
	lc, _ := s.json.Resources[data].Properties["LoggingConfiguration"].(map[string]any)
	if refID(lc["DestinationBucketName"]) != logs || lc["LogFilePrefix"] != "data/" {
		t.Errorf("data bucket logging %v, want to %s under data/", lc, logs)
	}
	p := s.json.Resources[logs].Properties
	checks := []struct {
		what      string
		got, want any
	}{
		{"public access block", p["PublicAccessBlockConfiguration"], map[string]any{
			"BlockPublicAcls": true, "BlockPublicPolicy": true, "IgnorePublicAcls": true, "RestrictPublicBuckets": true}},
		{"encryption", p["BucketEncryption"], map[string]any{"ServerSideEncryptionConfiguration": []any{
			map[string]any{"ServerSideEncryptionByDefault": map[string]any{"SSEAlgorithm": "AES256"}}}}},
		{"lifecycle", p["LifecycleConfiguration"], map[string]any{"Rules": []any{
			map[string]any{"Id": "expire-access-logs", "ExpirationInDays": float64(90), "Status": "Enabled"}}}},
		{"ownership", p["OwnershipControls"], map[string]any{"Rules": []any{map[string]any{"ObjectOwnership": "BucketOwnerEnforced"}}}},
		{"no logging of its own", p["LoggingConfiguration"], nil},
	}
	for _, c := range checks {
		if diff := cmp.Diff(c.want, c.got); diff != "" {
			t.Errorf("log bucket %s (-want +got):\n%s", c.what, diff)
		}
	}
	if dp := rawResource(s, logs)["DeletionPolicy"]; dp != "Retain" {
		t.Errorf("log bucket deletion policy %v, want Retain", dp)
	}
	// Its policy: TLS only, and log delivery from the data bucket only.
	var allows, denies []string
	for _, pol := range s.ofType("AWS::S3::BucketPolicy") {
		if refID(pol.Properties["Bucket"]) != logs {
			continue
		}
		for _, st := range pol.Properties["PolicyDocument"].(map[string]any)["Statement"].([]any) {
			st := st.(map[string]any)
			line := fmt.Sprint(st["Principal"], " ", st["Action"], " ", st["Condition"])
			if st["Effect"] == "Allow" {
				allows = append(allows, line)
			} else {
				denies = append(denies, line)
			}
		}
	}
	if len(allows) != 1 || !strings.Contains(allows[0], "logging.s3.amazonaws.com") || !strings.Contains(allows[0], "s3:PutObject") ||
		!strings.Contains(allows[0], data) {
		t.Errorf("log bucket allows %v, want only log delivery from %s", allows, data)
	}
	if len(denies) != 1 || !strings.Contains(denies[0], "aws:SecureTransport:false") {
		t.Errorf("log bucket denies %v, want plain HTTP denied", denies)
	}
}

// Every cdk-nag suppression the construct makes, by resource type and
// rule: a new one must be added here, after checking its reason is true
// of the construct (nag.go). No bucket has one: the data bucket's access
// is logged (AwsSolutions-S1), and cdk-nag does not ask the log bucket to
// log itself.
func TestNagSuppressionsAreKnown(t *testing.T) {
	s := everything(t)
	got := map[string][]string{}
	for id, r := range s.json.Resources {
		meta, _ := rawResource(s, id)["Metadata"].(map[string]any)
		nag, _ := meta["cdk_nag"].(map[string]any)
		for _, rule := range suppressed(nag["rules_to_suppress"]) {
			rule := rule.(map[string]any)
			if reason, _ := rule["reason"].(string); len(reason) < 40 {
				t.Errorf("%s: %v suppressed with the reason %q", id, rule["id"], reason)
			}
			got[r.Type] = append(got[r.Type], rule["id"].(string))
		}
	}
	for typ := range got {
		sort.Strings(got[typ])
		got[typ] = dedupe(got[typ])
	}
	want := map[string][]string{
		"AWS::IAM::Role":           {"AwsSolutions-IAM5"},
		"AWS::IAM::Policy":         {"AwsSolutions-IAM5"},
		"AWS::ECS::TaskDefinition": {"AwsSolutions-ECS2"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("suppressions by resource type (-want +got):\n%s", diff)
	}
	id := *s.stack.GetLogicalId(s.b.Bucket.Node().DefaultChild().(awscdk.CfnElement))
	if _, ok := s.json.Resources[id]; !ok {
		t.Fatalf("no data bucket %s", id)
	}
	if meta, _ := rawResource(s, id)["Metadata"].(map[string]any); meta["cdk_nag"] != nil {
		t.Errorf("the data bucket has suppressions: %v", meta["cdk_nag"])
	}
}

// suppressed is a resource's cdk_nag rules_to_suppress, or none.
func suppressed(v any) []any {
	l, _ := v.([]any)
	return l
}

// rawResource is a resource of the template whole (with its Metadata and
// DeletionPolicy, which the parsed tmpl leaves out).
func rawResource(s *synthesized, id string) map[string]any {
	res, _ := (*s.template.ToJSON())["Resources"].(map[string]any)
	r, _ := res[id].(map[string]any)
	return r
}
