package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/jsii-runtime-go"
	"github.com/google/go-cmp/cmp"

	"github.com/batchwork/batchwork/infra/batchwork"
	"github.com/batchwork/batchwork/infra/template"
)

var update = flag.Bool("update", false, "rewrite infra/template/Batchwork.template.json")

// fakeBins makes a bin directory with a stand-in bootstrap per function:
// template tests need assets to exist, not to be the real binaries (whose
// hashes are normalized away anyway).
func fakeBins(t testing.TB) string {
	t.Helper()
	dir := t.TempDir()
	for _, fn := range []string{batchwork.FnAPI, batchwork.FnClaim, batchwork.FnCommit, batchwork.FnSweep, batchwork.FnExecutor} {
		if err := os.MkdirAll(filepath.Join(dir, fn), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, fn, "bootstrap"), []byte("#!/bin/sh\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

var assetHash = regexp.MustCompile(`[0-9a-f]{64}`)

// normalize replaces asset hashes, which change with every code change.
func normalize(b []byte) []byte {
	return assetHash.ReplaceAll(b, []byte(template.AssetHashPlaceholder))
}

// checkedIn are the synthesized templates kept in infra/template: the
// default stack (as cdk.json's app synthesizes it, which the local runner
// deploys), and the same stack with the claim and commit functions for one
// remote executor, whose roles the IAM check proves too
// (integration/iam_test.go).
var checkedIn = []struct {
	file     string
	embedded []byte
	props    batchwork.Props
}{
	{"Batchwork.template.json", template.JSON, batchwork.Props{}},
	{"BatchworkRemoteExecutors.template.json", template.RemoteExecutorsJSON,
		batchwork.Props{RemoteExecutorRoleArns: []string{template.RemoteExecutorRole}}},
}

// synthTemplate synthesizes the default stack with props.
func synthTemplate(t *testing.T, props batchwork.Props) (out []byte, err error) {
	t.Helper()
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("%v", r)
		}
	}()
	props.BinDir = fakeBins(t)
	app := awscdk.NewApp(&awscdk.AppProps{Outdir: jsii.String(t.TempDir())})
	stack := NewStack(app, template.StackName, &props)
	asm := app.Synth(nil)
	return os.ReadFile(*asm.GetStackArtifact(stack.ArtifactId()).TemplateFullPath())
}

// TestTemplateUpToDate fails when a checked-in template differs from a
// fresh synthesis. `make synth` rewrites them.
func TestTemplateUpToDate(t *testing.T) {
	for _, c := range checkedIn {
		t.Run(c.file, func(t *testing.T) {
			raw, err := synthTemplate(t, c.props)
			if err != nil {
				t.Fatalf("synthesize: %v", err)
			}
			got := normalize(raw)
			path := filepath.Join("template", c.file)
			if *update {
				if err := os.WriteFile(path, got, 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if string(want) != string(got) {
				t.Fatalf("%s is stale: run `make synth` and commit it", path)
			}
			if string(c.embedded) != string(want) {
				t.Fatalf("the embedded template differs from %s: rebuild", path)
			}
		})
	}
}

func TestPropsFromContext(t *testing.T) {
	cases := []struct {
		name    string
		ctx     map[string]any
		want    batchwork.Props
		wantErr string
	}{
		{name: "empty", ctx: map[string]any{}, want: batchwork.Props{}},
		{name: "all", ctx: map[string]any{"executor": "both", "sweepSchedule": "rate(5 minutes)", "executorMaxConcurrency": "50", "fargateMaxTasks": float64(3)},
			want: batchwork.Props{Executor: batchwork.ExecutorBoth, SweepSchedule: "rate(5 minutes)", ExecutorMaxConcurrency: 50, FargateMaxTasks: 3}},
		{name: "bad executor", ctx: map[string]any{"executor": "ec2"}, wantErr: `context executor: "ec2": want lambda, fargate or both`},
		{name: "concurrency too low", ctx: map[string]any{"executorMaxConcurrency": "1"}, wantErr: `context executorMaxConcurrency: "1" is not a whole number between 2 and 1000`},
		{name: "not a number", ctx: map[string]any{"fargateMaxTasks": "many"}, wantErr: `context fargateMaxTasks: "many" is not a whole number between 1 and 1000`},
		{name: "capacity", ctx: map[string]any{"apiRateLimit": "1000", "apiBurstLimit": float64(2000), "tableWarmReadUnitsPerSecond": "15000",
			"tableWarmWriteUnitsPerSecond": "24000", "executorReservedConcurrency": "300"},
			want: batchwork.Props{APIRateLimit: 1000, APIBurstLimit: 2000, TableWarmReadUnitsPerSecond: 15000, TableWarmWriteUnitsPerSecond: 24000, ExecutorReservedConcurrency: 300}},
		{name: "negative capacity", ctx: map[string]any{"tableWarmWriteUnitsPerSecond": "-1"},
			wantErr: `context tableWarmWriteUnitsPerSecond: "-1" is not a whole number between 0 and 2147483647`},
		{name: "owner limits", ctx: map[string]any{"ownerMaxConcurrency": "*=200,arn:aws:iam::123456789012:role/etl=10"},
			want: batchwork.Props{OwnerMaxConcurrency: "*=200,arn:aws:iam::123456789012:role/etl=10"}},
		{name: "bad owner limit", ctx: map[string]any{"ownerMaxConcurrency": "*=200,etl=5000"},
			wantErr: `context ownerMaxConcurrency: entry "etl=5000": limit "5000" is not a whole number from 0 (no limit) to 1000`},
		{name: "remote executors", ctx: map[string]any{"remoteExecutorRoles": "arn:aws:iam::123456789012:role/a, arn:aws:iam::123456789012:role/x/b"},
			want: batchwork.Props{RemoteExecutorRoleArns: []string{"arn:aws:iam::123456789012:role/a", "arn:aws:iam::123456789012:role/x/b"}}},
		{name: "executor sizes", ctx: map[string]any{"executorSizes": "1GiB, 4GiB,10GiB"},
			want: batchwork.Props{ExecutorSizes: []string{"1GiB", "4GiB", "10GiB"}}},
		{name: "bad executor size", ctx: map[string]any{"executorSizes": "1GiB,3GiB"},
			wantErr: `context executorSizes: executor size "3GiB": must be one of 1GiB, 2GiB, 4GiB, 8GiB, 10GiB`},
		{name: "input buckets", ctx: map[string]any{"inputBuckets": "corp-data, raw.example.com"},
			want: batchwork.Props{InputBuckets: []string{"corp-data", "raw.example.com"}}},
		{name: "bad input bucket", ctx: map[string]any{"inputBuckets": "corp-data,Corp_Data"},
			wantErr: `context inputBuckets: bucket "Corp_Data" must be 3 to 63 characters of a-z, 0-9, '.' and '-'`},
		{name: "output buckets and task functions",
			ctx: map[string]any{"outputBuckets": "lake.example.com", "taskFunctions": "resize, arn:aws:lambda:us-east-1:123456789012:function:ocr",
				"taskFunctionRoles": "arn:aws:iam::123456789012:role/resize-role"},
			want: batchwork.Props{OutputBuckets: []string{"lake.example.com"},
				TaskFunctions:        []string{"resize", "arn:aws:lambda:us-east-1:123456789012:function:ocr"},
				TaskFunctionRoleArns: []string{"arn:aws:iam::123456789012:role/resize-role"}}},
		{name: "bad task function", ctx: map[string]any{"taskFunctions": "resize:live"},
			wantErr: `context taskFunctions: task function "resize:live": list the function without a version or alias`},
		{name: "bad task function role", ctx: map[string]any{"taskFunctionRoles": "resize-role"},
			wantErr: `context taskFunctionRoles: "resize-role" is not an IAM role ARN (arn:aws:iam::<account>:role/<name>)`},
		{name: "bad remote executor", ctx: map[string]any{"remoteExecutorRoles": "arn:aws:iam::123456789012:role/a,bob"},
			wantErr: `context remoteExecutorRoles: "bob" is not an IAM role ARN (arn:aws:iam::<account>:role/<name>)`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p, err := PropsFromContext(func(k string) any { return c.ctx[k] })
			if c.wantErr != "" {
				if err == nil || err.Error() != c.wantErr {
					t.Fatalf("error: got %v, want %q", err, c.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(c.want, *p); diff != "" {
				t.Fatalf("props (-want +got):\n%s", diff)
			}
		})
	}
}
