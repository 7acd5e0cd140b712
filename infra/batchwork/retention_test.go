package batchwork_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/assertions"
	"github.com/aws/jsii-runtime-go"

	"github.com/batchwork/batchwork/infra/batchwork"
	"github.com/batchwork/batchwork/shared/lambdaenv"
)

// bucketRules are the data bucket's lifecycle rules by id.
func (s *synthesized) bucketRules(t *testing.T) map[string]map[string]any {
	t.Helper()
	rules := map[string]map[string]any{}
	for _, b := range s.ofType("AWS::S3::Bucket") {
		lc, ok := b.Properties["LifecycleConfiguration"].(map[string]any)
		if !ok {
			continue
		}
		for _, r := range lc["Rules"].([]any) {
			r := r.(map[string]any)
			if id, _ := r["Id"].(string); id != "" {
				rules[id] = r
			}
		}
	}
	return rules
}

// A retention adds a lifecycle rule expiring the whole job area after it
// (keeping the other rules), and tells every function and the Fargate
// executor, which end jobs, in whole days; without one, neither.
func TestRetention(t *testing.T) {
	s := synth(t, "retention", batchwork.Props{Executor: batchwork.ExecutorBoth, Retention: 30 * 24 * time.Hour, RemoteExecutorRoleArns: remoteRoles}, nil)
	rules := s.bucketRules(t)
	r, ok := rules["expire-ended-jobs"]
	if !ok {
		t.Fatalf("no retention rule among %v", rules)
	}
	want := map[string]any{"Id": "expire-ended-jobs", "Prefix": "jobs/", "ExpirationInDays": float64(30), "Status": "Enabled"}
	if fmt.Sprint(r) != fmt.Sprint(want) {
		t.Errorf("retention rule %v, want %v (by prefix only: no tag filter, nothing else)", r, want)
	}
	for _, id := range []string{"expire-uncommitted-attempt-outputs", "abort-incomplete-uploads"} {
		if _, ok := rules[id]; !ok {
			t.Errorf("rule %s is gone", id)
		}
	}
	ids := s.functionIDs(t)
	if len(ids) != 5 {
		t.Errorf("%d functions, want all five (remote executors on)", len(ids))
	}
	for name, id := range ids {
		env := s.json.Resources[id].Properties["Environment"].(map[string]any)["Variables"].(map[string]any)
		if got := env[lambdaenv.EnvRetentionDays]; got != "30" {
			t.Errorf("%s function: %s=%v, want 30", name, lambdaenv.EnvRetentionDays, got)
		}
		// What the functions read back is the construct's retention.
		if d, err := lambdaenv.RetentionFromEnv(func(k string) string { v, _ := env[k].(string); return v }); err != nil || d != 30*24*time.Hour {
			t.Errorf("%s function reads %v, %v", name, d, err)
		}
	}
	check(t, func() {
		s.template.HasResourceProperties(jsii.String("AWS::ECS::TaskDefinition"), map[string]any{
			"ContainerDefinitions": []any{assertions.Match_ObjectLike(&map[string]any{
				"Environment": assertions.Match_ArrayWith(&[]any{map[string]any{"Name": lambdaenv.EnvRetentionDays, "Value": "30"}}),
			})},
		})
	})

	d := defaultStack(t)
	if _, ok := d.bucketRules(t)["expire-ended-jobs"]; ok {
		t.Errorf("the default stack expires jobs; it keeps them")
	}
	for name, id := range d.functionIDs(t) {
		env := d.json.Resources[id].Properties["Environment"].(map[string]any)["Variables"].(map[string]any)
		if v, ok := env[lambdaenv.EnvRetentionDays]; ok {
			t.Errorf("default stack: %s function has %s=%v", name, lambdaenv.EnvRetentionDays, v)
		}
	}
}

// A retention the job area's lifecycle rule cannot honour safely is
// refused at synth, saying why.
func TestRetentionTooShortPanics(t *testing.T) {
	for _, r := range []time.Duration{7 * 24 * time.Hour, time.Hour, -24 * time.Hour, 8*24*time.Hour + time.Hour} {
		t.Run(r.String(), func(t *testing.T) {
			defer func() {
				got := fmt.Sprint(recover())
				if !strings.Contains(got, "retention "+r.String()) || !strings.Contains(got, "whole number of days from 8") {
					t.Fatalf("panic %q, want one naming the retention and the minimum", got)
				}
			}()
			app := awscdk.NewApp(&awscdk.AppProps{Outdir: jsii.String(t.TempDir())})
			batchwork.NewBatchwork(awscdk.NewStack(app, jsii.String("Bad"), nil), "Batchwork", &batchwork.Props{Retention: r, BinDir: fakeBins(t), TaskNames: []string{"x"}})
		})
	}
}
