package batchwork_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/assertions"
	"github.com/aws/constructs-go/constructs/v10"
	"github.com/aws/jsii-runtime-go"
	"github.com/google/go-cmp/cmp"

	"github.com/batchwork/batchwork/infra/batchwork"
	"github.com/batchwork/batchwork/infra/template"
	"github.com/batchwork/batchwork/internal/metrics"
	"github.com/batchwork/batchwork/internal/testtier"
	"github.com/batchwork/batchwork/shared/dynamo"
	"github.com/batchwork/batchwork/shared/lambdaenv"
	"github.com/batchwork/batchwork/shared/tuning"
)

// tmpl is a synthesized template as plain JSON, for checks that read
// more naturally in Go than as assertion matchers.
type tmpl struct {
	Resources map[string]resource `json:"Resources"`
	Outputs   map[string]any      `json:"Outputs"`
}

type resource struct {
	Type       string         `json:"Type"`
	Properties map[string]any `json:"Properties"`
}

type synthesized struct {
	stack    awscdk.Stack
	template assertions.Template
	json     tmpl
	b        *batchwork.Batchwork
}

var (
	cache   = map[string]*synthesized{}
	cacheMu sync.Mutex
)

// synth synthesizes a stack holding one construct with props, once per
// name per test binary (a synthesis costs seconds).
func synth(t *testing.T, name string, props batchwork.Props, before func(app awscdk.App)) *synthesized {
	t.Helper()
	cacheMu.Lock()
	defer cacheMu.Unlock()
	if s, ok := cache[name]; ok {
		return s
	}
	props.BinDir = fakeBins(t)
	if props.TaskNames == nil {
		props.TaskNames = []string{"wordcount.map", "wordcount.reduce"}
	}
	if props.DockerContext == "" {
		props.DockerContext = fakeDockerContext(t)
	}
	// Not t.TempDir: the synthesis is shared by later tests, and
	// assertions synthesize again into the same directory.
	out, err := tempDir("batchwork-synth-")
	if err != nil {
		t.Fatal(err)
	}
	app := awscdk.NewApp(&awscdk.AppProps{Outdir: jsii.String(out)})
	stack := awscdk.NewStack(app, jsii.String("Test"), nil)
	b := batchwork.NewBatchwork(stack, "Batchwork", &props)
	if before != nil {
		before(app)
	}
	tp := assertions.Template_FromStack(stack, nil)
	raw, err := json.Marshal(tp.ToJSON())
	if err != nil {
		t.Fatal(err)
	}
	s := &synthesized{stack: stack, template: tp, b: b}
	if err := json.Unmarshal(raw, &s.json); err != nil {
		t.Fatal(err)
	}
	cache[name] = s
	return s
}

// tempDirs outlive single tests (synthesized stacks are shared), so
// TestMain removes them.
var tempDirs []string

func tempDir(pattern string) (string, error) {
	d, err := os.MkdirTemp("", pattern)
	if err == nil {
		tempDirs = append(tempDirs, d)
	}
	return d, err
}

func TestMain(m *testing.M) {
	if testtier.Short() {
		os.Exit(testtier.RunNone(m, "a CDK synth (a Node.js process)"))
	}
	code := m.Run()
	for _, d := range tempDirs {
		_ = os.RemoveAll(d)
	}
	os.Exit(code)
}

func fakeBins(t *testing.T) string {
	dir, err := tempDir("batchwork-bins-")
	if err != nil {
		t.Fatal(err)
	}
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

// fakeDockerContext stands in for the repository: synthesis only stages
// the directory; the image is built at deploy time.
func fakeDockerContext(t *testing.T) string {
	dir, err := tempDir("batchwork-docker-")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "Dockerfile"), []byte("FROM scratch\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

func defaultStack(t *testing.T) *synthesized {
	return synth(t, "default", batchwork.Props{}, nil)
}

func (s *synthesized) ofType(typ string) map[string]resource {
	out := map[string]resource{}
	for id, r := range s.json.Resources {
		if r.Type == typ {
			out[id] = r
		}
	}
	return out
}

// refID returns X for {"Ref": X} or {"Fn::GetAtt": [X, ...]}.
func refID(v any) string {
	m, ok := v.(map[string]any)
	if !ok {
		return ""
	}
	if r, ok := m["Ref"].(string); ok {
		return r
	}
	if a, ok := m["Fn::GetAtt"].([]any); ok && len(a) > 0 {
		s, _ := a[0].(string)
		return s
	}
	return ""
}

// functionIDs maps function names to their logical ids.
func (s *synthesized) functionIDs(t *testing.T) map[string]string {
	t.Helper()
	ids := map[string]string{}
	for name, fn := range s.b.Functions {
		ids[name] = *s.stack.GetLogicalId(fn.Node().DefaultChild().(awscdk.CfnElement))
	}
	return ids
}

// actionsOf collects every action the IAM policies attached to a role
// allow, and fails on a wildcard action or resource.
func (s *synthesized) actionsOf(t *testing.T, roleID string) []string {
	t.Helper()
	set := map[string]bool{}
	for pid, p := range s.ofType("AWS::IAM::Policy") {
		attached := false
		for _, r := range p.Properties["Roles"].([]any) {
			if refID(r) == roleID {
				attached = true
			}
		}
		if !attached {
			continue
		}
		doc := p.Properties["PolicyDocument"].(map[string]any)
		for _, st := range doc["Statement"].([]any) {
			st := st.(map[string]any)
			if st["Effect"] != "Allow" {
				continue
			}
			var acts []any
			switch a := st["Action"].(type) {
			case string:
				acts = []any{a}
			case []any:
				acts = a
			}
			for _, a := range acts {
				if strings.Contains(a.(string), "*") {
					t.Errorf("policy %s allows the wildcard action %s", pid, a)
				}
				set[a.(string)] = true
			}
			if st["Resource"] == "*" {
				t.Errorf("policy %s allows %v on every resource", pid, acts)
			}
		}
	}
	out := make([]string, 0, len(set))
	for a := range set {
		out = append(out, a)
	}
	sort.Strings(out)
	return out
}

func sorted(s ...[]string) []string {
	var out []string
	for _, x := range s {
		out = append(out, x...)
	}
	sort.Strings(out)
	return out
}

// The expected grants are written out here, independently of the
// construct's own tables, from what each handler's code path calls (the
// integration suite records those calls and checks the template against
// them: integration/iam_test.go).
var (
	logsWrite = []string{"logs:CreateLogStream", "logs:PutLogEvents"}
	// A transaction needs the per-item action of each of its parts, so a
	// ConditionCheck part (stage transitions, takeovers, schedule firings)
	// needs ConditionCheckItem.
	tableRW = []string{"dynamodb:ConditionCheckItem", "dynamodb:GetItem", "dynamodb:PutItem", "dynamodb:Query", "dynamodb:UpdateItem"}
	// The sweep alone reads its index whole, while it is small.
	scanIndex  = []string{"dynamodb:Scan"}
	batchRead  = []string{"dynamodb:BatchGetItem"}
	deleteItem = []string{"dynamodb:DeleteItem"} // schedules deleted, schedule index entries moved
	// Starting a stage writes its tasks as PartiQL INSERTs.
	insertTasks = []string{"dynamodb:PartiQLInsert"}
	commitTasks = []string{"dynamodb:PartiQLUpdate"}
	objectsRW   = []string{"s3:GetObject", "s3:ListBucket", "s3:PutObject"}
	sendReady   = []string{"sqs:SendMessage"}
	drainDLQ    = []string{"sqs:DeleteMessage", "sqs:ReceiveMessage"}
	listBucket  = []string{"s3:ListBucket"}
	tagObjects  = []string{"s3:PutObjectTagging"}
	setVisible  = []string{"sqs:ChangeMessageVisibility"}
	// An owner deletes an ended job's data through the api
	// (DELETE /jobs/{id}/data).
	deleteObjects = []string{"s3:DeleteObject"}
	// Lambda's poller polls on the function's behalf: the three actions AWS
	// requires of an SQS event source.
	eventSource = []string{"sqs:DeleteMessage", "sqs:GetQueueAttributes", "sqs:ReceiveMessage"}
	// The executor aborts the multipart uploads of an attempt that failed
	// after streaming an output.
	abortUploads = []string{"s3:AbortMultipartUpload"}
	// Every function publishes the events of its transitions on the bus
	// and deletes their outbox records (shared/events).
	putEvents = []string{"events:PutEvents"}
	// A planner pins the versions of inputs on a versioned bucket, which
	// the executor then reads by version (shared/blob/versions.go).
	pinVersions  = []string{"s3:GetBucketVersioning", "s3:ListBucketVersions"}
	readVersions = []string{"s3:GetObjectVersion"}
)

func TestEachFunctionGetsExactlyItsActions(t *testing.T) {
	s := remoteStack(t) // every function
	want := map[string][]string{
		batchwork.FnAPI:      sorted(logsWrite, batchwork.LogReadActions, tableRW, insertTasks, batchRead, deleteItem, objectsRW, deleteObjects, sendReady, putEvents, pinVersions),
		batchwork.FnClaim:    sorted(logsWrite, tableRW, insertTasks, deleteItem, listBucket, tagObjects, putEvents),
		batchwork.FnCommit:   sorted(logsWrite, tableRW, insertTasks, commitTasks, batchRead, deleteItem, objectsRW, tagObjects, sendReady, putEvents, pinVersions),
		batchwork.FnSweep:    dedupe(sorted(logsWrite, tableRW, insertTasks, batchRead, deleteItem, objectsRW, tagObjects, sendReady, drainDLQ, eventSource, putEvents, pinVersions, scanIndex)),
		batchwork.FnExecutor: dedupe(sorted(logsWrite, tableRW, insertTasks, commitTasks, batchRead, deleteItem, objectsRW, tagObjects, sendReady, setVisible, eventSource, abortUploads, putEvents, pinVersions, readVersions)),
	}
	ids := s.functionIDs(t)
	roles := map[string]bool{}
	for name, id := range ids {
		t.Run(name, func(t *testing.T) {
			fn := s.json.Resources[id]
			role := refID(fn.Properties["Role"])
			if roles[role] {
				t.Fatalf("%s shares role %s with another function", name, role)
			}
			roles[role] = true
			if diff := cmp.Diff(want[name], s.actionsOf(t, role)); diff != "" {
				t.Errorf("%s actions (-want +got):\n%s", name, diff)
			}
			r := s.json.Resources[role]
			if _, ok := r.Properties["ManagedPolicyArns"]; ok {
				t.Errorf("%s's role has managed policies: %v", name, r.Properties["ManagedPolicyArns"])
			}
		})
	}
	if len(ids) != len(want) {
		t.Fatalf("functions %v, want %d", ids, len(want))
	}
}

// TestEachFunctionGetsItsActionsOnEachResource pins where each action is
// granted: the sweep's index only for queries, the dead-letter queue only
// to the sweep, sends to the timer queue to the sweep and the api (near
// starts of submit --at), and a queue's event source actions only to the
// function that consumes it.
func TestEachFunctionGetsItsActionsOnEachResource(t *testing.T) {
	s := remoteStack(t) // every function
	id := func(c constructs.IConstruct) string {
		return *s.stack.GetLogicalId(c.Node().DefaultChild().(awscdk.CfnElement))
	}
	names := map[string]string{
		id(s.b.Table): "table", id(s.b.Bucket): "bucket", id(s.b.DeadLetters): "dlq", id(s.b.Timer): "timer",
		id(s.b.High): "ready", id(s.b.Normal): "ready", id(s.b.Low): "ready",
		id(s.b.EventBus): "bus",
	}
	tableRWOnTable := sorted(tableRW)
	ready := func(acts ...[]string) map[string][]string {
		return map[string][]string{"ready": dedupe(sorted(acts...))}
	}
	// Writes and tags only in the job area (writeonce_test.go), and by the
	// functions that end jobs in the outputs area (publishing); reads in
	// the job area, the outputs area and the inputs area by the executor
	// only, which reads published folders as inputs; the other publishers
	// read a folder's claim and success marker, never its outputs;
	// listing is on the bucket, limited by prefix (inputs_test.go).
	const jobs, inputs, outputs = "bucket/jobs/*", "bucket/inputs/*", "bucket/outputs/*"
	const claims, successes = "bucket/outputs/*/_batchwork.json", "bucket/outputs/*/_SUCCESS"
	getObject := []string{"s3:GetObject"}
	publish := sorted(getObject, []string{"s3:PutObject"})
	putObject := []string{"s3:PutObject"}
	planBucket := sorted(listBucket, pinVersions) // a planner lists inputs and their versions
	cases := []struct {
		fn   string
		want map[string][]string // resource -> actions
	}{
		{batchwork.FnAPI, merge(map[string][]string{"table": sorted(tableRWOnTable, insertTasks, batchRead, deleteItem), "bucket": planBucket, jobs: sorted(getObject, []string{"s3:PutObject"}, deleteObjects),
			outputs: putObject, claims: getObject, successes: getObject, "bus": putEvents, "timer": sendReady}, ready(sendReady))},
		{batchwork.FnClaim, map[string][]string{"table": sorted(tableRWOnTable, insertTasks, deleteItem), "bucket": listBucket, jobs: tagObjects, "bus": putEvents}},
		{batchwork.FnCommit, merge(map[string][]string{"table": sorted(tableRWOnTable, insertTasks, commitTasks, batchRead, deleteItem), "bucket": planBucket,
			jobs: sorted(getObject, []string{"s3:PutObject"}, tagObjects), outputs: putObject, claims: getObject, successes: getObject, "bus": putEvents}, ready(sendReady))},
		{batchwork.FnSweep, merge(map[string][]string{"table": sorted(tableRWOnTable, insertTasks, batchRead, deleteItem), "table/index/due": {"dynamodb:Query", "dynamodb:Scan"},
			"bucket": planBucket, jobs: sorted(getObject, []string{"s3:PutObject"}, tagObjects), outputs: putObject, claims: getObject, successes: getObject,
			"dlq": drainDLQ, "timer": dedupe(sorted(sendReady, eventSource)), "bus": putEvents}, ready(sendReady))},
		{batchwork.FnExecutor, merge(map[string][]string{"table": sorted(tableRWOnTable, insertTasks, commitTasks, batchRead, deleteItem), "bucket": planBucket,
			jobs: sorted(getObject, []string{"s3:PutObject"}, tagObjects, abortUploads), inputs: sorted(getObject, readVersions), outputs: publish, "bus": putEvents}, ready(sendReady, setVisible, eventSource))},
	}
	ids := s.functionIDs(t)
	for _, c := range cases {
		t.Run(c.fn, func(t *testing.T) {
			role := refID(s.json.Resources[ids[c.fn]].Properties["Role"])
			got := s.actionsByResource(t, role, names)
			delete(got, "logs")
			if diff := cmp.Diff(c.want, got); diff != "" {
				t.Errorf("%s actions by resource (-want +got):\n%s", c.fn, diff)
			}
		})
	}
}

func merge(ms ...map[string][]string) map[string][]string {
	out := map[string][]string{}
	for _, m := range ms {
		for k, v := range m {
			out[k] = v
		}
	}
	return out
}

// actionsByResource maps each resource a role's policies name (by names,
// with an ARN suffix such as "/*" or "/index/due" kept; "logs" for log
// groups) to the actions allowed on it. The three ready queues must have
// the same actions, and count as one.
func (s *synthesized) actionsByResource(t *testing.T, roleID string, names map[string]string) map[string][]string {
	t.Helper()
	perID := map[string]map[string]bool{} // logical id + suffix -> actions
	for pid, p := range s.ofType("AWS::IAM::Policy") {
		attached := false
		for _, r := range p.Properties["Roles"].([]any) {
			if refID(r) == roleID {
				attached = true
			}
		}
		if !attached {
			continue
		}
		for _, st := range p.Properties["PolicyDocument"].(map[string]any)["Statement"].([]any) {
			st := st.(map[string]any)
			var res []any
			if l, ok := st["Resource"].([]any); ok {
				res = l
			} else {
				res = []any{st["Resource"]}
			}
			var acts []any
			if l, ok := st["Action"].([]any); ok {
				acts = l
			} else {
				acts = []any{st["Action"]}
			}
			for _, r := range res {
				key, suffix := refID(r), ""
				if key == "" {
					// {"Fn::Join": ["", [{"Fn::GetAtt": [id, "Arn"]}, suffix]]}
					parts := r.(map[string]any)["Fn::Join"].([]any)[1].([]any)
					key, suffix = refID(parts[0]), parts[1].(string)
				}
				if strings.Contains(key, "Logs") {
					key, suffix = "logs", ""
				} else if names[key] == "" {
					t.Errorf("policy %s names resource %v, which is none of the installation's", pid, r)
					continue
				}
				k := key + suffix
				if perID[k] == nil {
					perID[k] = map[string]bool{}
				}
				for _, a := range acts {
					perID[k][a.(string)] = true
				}
			}
		}
	}
	out := map[string][]string{}
	for k, set := range perID {
		name := "logs"
		if k != "logs" {
			for id, n := range names {
				if strings.HasPrefix(k, id) {
					name = n + strings.TrimPrefix(k, id)
				}
			}
		}
		var acts []string
		for a := range set {
			acts = append(acts, a)
		}
		sort.Strings(acts)
		if prev, ok := out[name]; ok && !cmp.Equal(prev, acts) {
			t.Errorf("%s: the ready queues differ: %v and %v", roleID, prev, acts)
		}
		out[name] = acts
	}
	return out
}

func dedupe(s []string) []string {
	var out []string
	for i, x := range s {
		if i == 0 || x != s[i-1] {
			out = append(out, x)
		}
	}
	return out
}

// TestGrantsAreScopedToTheirResources: table actions name the table (and
// its indexes), object actions the bucket, queue actions the queues.
func TestGrantsAreScopedToTheirResources(t *testing.T) {
	s := defaultStack(t)
	tableID := *s.stack.GetLogicalId(s.b.Table.Node().DefaultChild().(awscdk.CfnElement))
	bucketID := *s.stack.GetLogicalId(s.b.Bucket.Node().DefaultChild().(awscdk.CfnElement))
	for pid, p := range s.ofType("AWS::IAM::Policy") {
		doc := p.Properties["PolicyDocument"].(map[string]any)
		for _, st := range doc["Statement"].([]any) {
			st := st.(map[string]any)
			raw, _ := json.Marshal(st["Resource"])
			var first string
			switch a := st["Action"].(type) {
			case string:
				first = a
			case []any:
				first = a[0].(string)
			}
			switch {
			case strings.HasPrefix(first, "dynamodb:") && !strings.Contains(string(raw), tableID):
				t.Errorf("policy %s: %s on %s, want the table %s", pid, first, raw, tableID)
			case strings.HasPrefix(first, "s3:") && !strings.Contains(string(raw), bucketID):
				t.Errorf("policy %s: %s on %s, want the bucket %s", pid, first, raw, bucketID)
			case strings.HasPrefix(first, "sqs:") && !strings.Contains(string(raw), "Arn"):
				t.Errorf("policy %s: %s on %s, want queue ARNs", pid, first, raw)
			}
		}
	}
}

func TestBucketDeniesPlainHTTPAndBlocksPublicAccess(t *testing.T) {
	s := defaultStack(t)
	check(t, func() {
		s.template.HasResourceProperties(jsii.String("AWS::S3::Bucket"), map[string]any{
			"PublicAccessBlockConfiguration": map[string]any{
				"BlockPublicAcls": true, "BlockPublicPolicy": true, "IgnorePublicAcls": true, "RestrictPublicBuckets": true,
			},
			"BucketEncryption": map[string]any{
				"ServerSideEncryptionConfiguration": []any{map[string]any{
					"ServerSideEncryptionByDefault": map[string]any{"SSEAlgorithm": "AES256"},
				}},
			},
		})
	})
	check(t, func() {
		s.template.HasResourceProperties(jsii.String("AWS::S3::BucketPolicy"), map[string]any{
			"PolicyDocument": map[string]any{"Statement": assertions.Match_ArrayWith(&[]any{assertions.Match_ObjectLike(&map[string]any{
				"Effect":    "Deny",
				"Action":    "s3:*",
				"Principal": map[string]any{"AWS": "*"},
				"Condition": map[string]any{"Bool": map[string]any{"aws:SecureTransport": "false"}},
			})})},
		})
	})
	// Uncommitted attempt outputs expire; committed ones are not tagged.
	check(t, func() {
		s.template.HasResourceProperties(jsii.String("AWS::S3::Bucket"), map[string]any{
			"LifecycleConfiguration": map[string]any{"Rules": assertions.Match_ArrayWith(&[]any{assertions.Match_ObjectLike(&map[string]any{
				"ExpirationInDays": tuning.UncommittedOutputExpiry.Hours() / 24,
				"Prefix":           "jobs/",
				"TagFilters":       []any{map[string]any{"Key": tuning.UncommittedTagKey, "Value": tuning.UncommittedTagValue}},
				"Status":           "Enabled",
			})})},
		})
	})
}

func TestQueuesAreEncryptedAndDeadLettered(t *testing.T) {
	s := defaultStack(t)
	queues := s.ofType("AWS::SQS::Queue")
	dlqID := *s.stack.GetLogicalId(s.b.DeadLetters.Node().DefaultChild().(awscdk.CfnElement))
	if len(queues) != 5 {
		t.Fatalf("%d queues, want 3 ready queues, a timer queue and a dead-letter queue", len(queues))
	}
	for id, q := range queues {
		if q.Properties["SqsManagedSseEnabled"] != true {
			t.Errorf("queue %s is not encrypted: %v", id, q.Properties)
		}
		if id == dlqID {
			continue
		}
		rp, _ := q.Properties["RedrivePolicy"].(map[string]any)
		if refID(rp["deadLetterTargetArn"]) != dlqID || rp["maxReceiveCount"] != float64(tuning.MaxReceiveCount) {
			t.Errorf("queue %s redrive %v, want %s after %d receives", id, rp, dlqID, tuning.MaxReceiveCount)
		}
	}
	// Each queue's policy denies plain HTTP.
	policies := s.ofType("AWS::SQS::QueuePolicy")
	covered := map[string]bool{}
	for pid, p := range policies {
		raw, _ := json.Marshal(p.Properties["PolicyDocument"])
		if !strings.Contains(string(raw), `"aws:SecureTransport":"false"`) || !strings.Contains(string(raw), `"Effect":"Deny"`) {
			t.Errorf("queue policy %s does not deny insecure transport: %s", pid, raw)
		}
		for _, q := range p.Properties["Queues"].([]any) {
			covered[refID(q)] = true
		}
	}
	for id := range queues {
		if !covered[id] {
			t.Errorf("queue %s has no TLS-only policy", id)
		}
	}
}

func TestEveryRouteRequiresIAM(t *testing.T) {
	s := defaultStack(t)
	routes := s.ofType("AWS::ApiGatewayV2::Route")
	if len(routes) == 0 {
		t.Fatal("no API routes")
	}
	for id, r := range routes {
		if r.Properties["AuthorizationType"] != "AWS_IAM" {
			t.Errorf("route %s (%v) authorization %v, want AWS_IAM", id, r.Properties["RouteKey"], r.Properties["AuthorizationType"])
		}
	}
	// No stage or integration bypasses the routes: the only stage is
	// $default with access logs.
	check(t, func() {
		s.template.ResourceCountIs(jsii.String("AWS::ApiGatewayV2::Stage"), jsii.Number(1))
	})
	check(t, func() {
		s.template.HasResourceProperties(jsii.String("AWS::ApiGatewayV2::Stage"), map[string]any{
			"StageName": "$default", "AccessLogSettings": assertions.Match_ObjectLike(&map[string]any{"DestinationArn": assertions.Match_AnyValue()}),
		})
	})
}

// TestSettingsAgree reads the settings that must agree from the template
// and checks them against each other, against AWS's rules and against
// the runtime's (shared/tuning).
func TestSettingsAgree(t *testing.T) {
	s := defaultStack(t)
	ids := s.functionIDs(t)
	exec := s.json.Resources[ids[batchwork.FnExecutor]]
	execTimeout := time.Duration(exec.Properties["Timeout"].(float64)) * time.Second
	var receives float64
	timerID := *s.stack.GetLogicalId(s.b.Timer.Node().DefaultChild().(awscdk.CfnElement))
	sweepTimeout := time.Duration(s.json.Resources[ids[batchwork.FnSweep]].Properties["Timeout"].(float64)) * time.Second
	for id, q := range s.ofType("AWS::SQS::Queue") {
		rp, ok := q.Properties["RedrivePolicy"].(map[string]any)
		if !ok {
			continue // the dead-letter queue
		}
		vis := time.Duration(q.Properties["VisibilityTimeout"].(float64)) * time.Second
		if id == timerID {
			// Consumed by the sweep: Lambda requires a visibility of at
			// least the consumer's timeout.
			if vis < sweepTimeout {
				t.Errorf("timer queue: visibility %v < sweep timeout %v", vis, sweepTimeout)
			}
			continue
		}
		receives = rp["maxReceiveCount"].(float64)
		if err := tuning.Check(vis, execTimeout, int(receives)); err != nil {
			t.Errorf("queue %s: %v", id, err)
		}
		if vis < 6*execTimeout {
			t.Errorf("queue %s: visibility %v < 6 x executor timeout %v", id, vis, execTimeout)
		}
		if vis != tuning.QueueVisibility {
			t.Errorf("queue %s: visibility %v, runtime expects %v", id, vis, tuning.QueueVisibility)
		}
	}
	if execTimeout != tuning.ExecutorTimeout {
		t.Errorf("executor timeout %v, want %v", execTimeout, tuning.ExecutorTimeout)
	}
	// The split and output caps, and the runtime's soft memory limit, are
	// sized for this memory.
	if mem := exec.Properties["MemorySize"]; mem != float64(tuning.ExecutorMemoryMB) {
		t.Errorf("executor memory %v MB, the caps are sized for %d", mem, tuning.ExecutorMemoryMB)
	}
	// A received message stays hidden until the executor's first renewal
	// (at receipt), which hides it for the held visibility after every beat
	// while the task runs; its liveness promise outlasts a late beat.
	if tuning.ReceiveVisibility < time.Second || tuning.ReceiveVisibility > tuning.HeldVisibility ||
		tuning.HeldVisibility <= tuning.ExecutorBeat || tuning.ExecutorLease <= tuning.ExecutorBeat {
		t.Errorf("receive visibility %v, held visibility %v, beat %v, executor lease %v", tuning.ReceiveVisibility, tuning.HeldVisibility, tuning.ExecutorBeat, tuning.ExecutorLease)
	}
	if int(receives) < tuning.MaxAttempts {
		t.Errorf("maxReceiveCount %v below the default attempts %d", receives, tuning.MaxAttempts)
	}
	// The API function answers within API Gateway's 30 s.
	if api := s.json.Resources[ids[batchwork.FnAPI]].Properties["Timeout"].(float64); api >= 30 {
		t.Errorf("api timeout %vs, API Gateway gives up at 30 s", api)
	}
	// The sweep finishes within its schedule's period.
	if sw := s.json.Resources[ids[batchwork.FnSweep]].Properties["Timeout"].(float64); time.Duration(sw)*time.Second > tuning.SweepRate {
		t.Errorf("sweep timeout %vs exceeds its period %v", sw, tuning.SweepRate)
	}
}

func TestLambdaExecutorEventSources(t *testing.T) {
	s := defaultStack(t)
	ids := s.functionIDs(t)
	maps := s.ofType("AWS::Lambda::EventSourceMapping")
	if len(maps) != 4 {
		t.Fatalf("%d event source mappings, want one per ready queue and the timer queue's", len(maps))
	}
	timerID := *s.stack.GetLogicalId(s.b.Timer.Node().DefaultChild().(awscdk.CfnElement))
	timers := 0
	for id, m := range maps {
		if diff := cmp.Diff([]any{"ReportBatchItemFailures"}, m.Properties["FunctionResponseTypes"]); diff != "" {
			t.Errorf("mapping %s response types (-want +got):\n%s", id, diff)
		}
		if refID(m.Properties["EventSourceArn"]) == timerID {
			timers++
			if refID(m.Properties["FunctionName"]) != ids[batchwork.FnSweep] {
				t.Errorf("timer mapping %s targets %v, want the sweep", id, m.Properties["FunctionName"])
			}
			// The batching window must end before the firings' times:
			// messages arrive TimerLead early, up to a second earlier
			// still for delays rounded down to whole seconds.
			w, _ := m.Properties["MaximumBatchingWindowInSeconds"].(float64)
			if window := time.Duration(w) * time.Second; window+time.Second >= tuning.TimerLead {
				t.Errorf("timer mapping %s batches for %v, which with a second of rounding reaches the lead %v", id, window, tuning.TimerLead)
			}
			if got := m.Properties["BatchSize"]; got != float64(tuning.TimerBatchSize) {
				t.Errorf("timer mapping %s batch size %v, want %d", id, got, tuning.TimerBatchSize)
			}
			continue
		}
		if refID(m.Properties["FunctionName"]) != ids[batchwork.FnExecutor] {
			t.Errorf("mapping %s targets %v", id, m.Properties["FunctionName"])
		}
		if got := m.Properties["ScalingConfig"]; !cmp.Equal(got, map[string]any{"MaximumConcurrency": float64(tuning.ExecutorMaxConcurrency)}) {
			t.Errorf("mapping %s scaling %v", id, got)
		}
		if got := m.Properties["BatchSize"]; got != float64(tuning.ExecutorBatchSize) {
			t.Errorf("executor mapping %s batch size %v, want %d", id, got, tuning.ExecutorBatchSize)
		}
	}
	if timers != 1 {
		t.Errorf("%d mappings on the timer queue, want 1", timers)
	}
}

func TestFunctionsRuntimeAndEnvironment(t *testing.T) {
	s := defaultStack(t)
	for name, id := range s.functionIDs(t) {
		p := s.json.Resources[id].Properties
		if p["Runtime"] != "provided.al2023" || !cmp.Equal(p["Architectures"], []any{"arm64"}) || p["Handler"] != "bootstrap" {
			t.Errorf("%s: runtime %v %v handler %v", name, p["Runtime"], p["Architectures"], p["Handler"])
		}
		env := p["Environment"].(map[string]any)["Variables"].(map[string]any)
		var got []string
		for k := range env {
			got = append(got, k)
		}
		sort.Strings(got)
		want := append([]string(nil), lambdaenv.EnvNames...)
		want = append(want, metrics.EnvStack)      // every function's metrics name its stack
		want = append(want, lambdaenv.EnvEventBus) // every function publishes events (events.go)
		if name == batchwork.FnSweep || name == batchwork.FnAPI {
			// The sweep hands off and consumes firings; the api hands
			// off near starts (submit --at).
			want = append(want, lambdaenv.EnvQueueTimer)
		}
		if name == batchwork.FnSweep || name == batchwork.FnAPI {
			want = append(want, lambdaenv.EnvTaskNames) // they check specs' task names
			// They refuse priority "high" to the owners not named
			// (ownerdefaults_test.go).
			want = append(want, lambdaenv.EnvHighPriorityOwners)
		}
		if name != batchwork.FnAPI {
			// Every owner's running tasks are capped by default.
			want = append(want, lambdaenv.EnvOwnerMaxConcurrency)
		}
		if name == batchwork.FnAPI {
			want = append(want, lambdaenv.EnvLogGroups) // it serves GET /jobs/{id}/logs
		}
		sort.Strings(want)
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("%s environment (-want +got):\n%s", name, diff)
		}
	}
}

// Owner limits reach exactly the functions that take or free owner slots
// (claim, commit, sweep, both executors), in canonical form; the api
// function never claims and does not get them.
func TestOwnerLimitsReachTheFunctionsThatClaim(t *testing.T) {
	s := synth(t, "owners", batchwork.Props{Executor: batchwork.ExecutorBoth, OwnerMaxConcurrency: "alice=5 *=20", RemoteExecutorRoleArns: remoteRoles}, nil)
	const want = "*=20,alice=5"
	for name, id := range s.functionIDs(t) {
		env := s.json.Resources[id].Properties["Environment"].(map[string]any)["Variables"].(map[string]any)
		got, ok := env[lambdaenv.EnvOwnerMaxConcurrency]
		if name == batchwork.FnAPI {
			if ok {
				t.Errorf("api function has %s=%v; it never claims", lambdaenv.EnvOwnerMaxConcurrency, got)
			}
			continue
		}
		if got != want {
			t.Errorf("%s function: %s=%v, want %q", name, lambdaenv.EnvOwnerMaxConcurrency, got, want)
		}
	}
	check(t, func() {
		s.template.HasResourceProperties(jsii.String("AWS::ECS::TaskDefinition"), map[string]any{
			"ContainerDefinitions": []any{assertions.Match_ObjectLike(&map[string]any{
				"Environment": assertions.Match_ArrayWith(&[]any{map[string]any{"Name": lambdaenv.EnvOwnerMaxConcurrency, "Value": want}}),
			})},
		})
	})
}

func TestTableSchema(t *testing.T) {
	s := defaultStack(t)
	sc := dynamo.Schema
	check(t, func() {
		s.template.ResourceCountIs(jsii.String("AWS::DynamoDB::Table"), jsii.Number(1))
	})
	check(t, func() {
		s.template.HasResourceProperties(jsii.String("AWS::DynamoDB::Table"), map[string]any{
			"BillingMode":                      "PAY_PER_REQUEST",
			"PointInTimeRecoverySpecification": map[string]any{"PointInTimeRecoveryEnabled": true},
			"TimeToLiveSpecification":          map[string]any{"AttributeName": sc.TTL, "Enabled": true},
			"KeySchema": []any{
				map[string]any{"AttributeName": sc.PartitionKey, "KeyType": "HASH"},
				map[string]any{"AttributeName": sc.SortKey, "KeyType": "RANGE"},
			},
			// Only the sweep's index.
			"GlobalSecondaryIndexes": []any{map[string]any{
				"IndexName": sc.DueIndex,
				"KeySchema": []any{
					map[string]any{"AttributeName": sc.DueShard, "KeyType": "HASH"},
					map[string]any{"AttributeName": sc.Due, "KeyType": "RANGE"},
				},
				"Projection": map[string]any{"ProjectionType": "KEYS_ONLY"},
			}},
		})
	})
	check(t, func() {
		s.template.HasResource(jsii.String("AWS::DynamoDB::Table"), map[string]any{"DeletionPolicy": "Retain"})
	})
}

func TestScheduleAlarmsDashboardOutputs(t *testing.T) {
	s := defaultStack(t)
	ids := s.functionIDs(t)
	check(t, func() {
		s.template.HasResourceProperties(jsii.String("AWS::Events::Rule"), map[string]any{
			"ScheduleExpression": "rate(1 minute)",
			"Targets":            []any{assertions.Match_ObjectLike(&map[string]any{"Arn": map[string]any{"Fn::GetAtt": []any{ids[batchwork.FnSweep], "Arn"}}})},
		})
	})
	alarms := s.ofType("AWS::CloudWatch::Alarm")
	metrics := map[string]int{}
	for _, a := range alarms {
		metrics[a.Properties["MetricName"].(string)]++
	}
	if diff := cmp.Diff(map[string]int{"ApproximateNumberOfMessagesVisible": 1, "Errors": 1, "ApproximateAgeOfOldestMessage": 3, "JobsFailed": 1}, metrics); diff != "" {
		t.Errorf("alarms by metric (-want +got):\n%s", diff)
	}
	check(t, func() {
		s.template.ResourceCountIs(jsii.String("AWS::CloudWatch::Dashboard"), jsii.Number(1))
	})
	var keys []string
	for k := range s.json.Outputs {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	want := []string{template.OutAPI, template.OutDLQ, template.OutBucket, template.OutQueueHigh, template.OutQueueLow, template.OutQueueNormal, template.OutTable, template.OutTimerQueue, template.OutAlarmTopic, template.OutEventBus}
	sort.Strings(want)
	if diff := cmp.Diff(want, keys); diff != "" {
		t.Errorf("outputs (-want +got):\n%s", diff)
	}
}

func TestScheduleIsConfigurable(t *testing.T) {
	s := synth(t, "schedule", batchwork.Props{SweepSchedule: "rate(5 minutes)", ExecutorMaxConcurrency: 7, Executor: batchwork.ExecutorLambda}, nil)
	check(t, func() {
		s.template.HasResourceProperties(jsii.String("AWS::Events::Rule"), map[string]any{"ScheduleExpression": "rate(5 minutes)"})
	})
	// Every executor mapping takes the cap; the timer queue's (the
	// sweep's) is not an executor and keeps Lambda's default scaling.
	ids := s.functionIDs(t)
	n := 0
	for id, m := range s.ofType("AWS::Lambda::EventSourceMapping") {
		if refID(m.Properties["FunctionName"]) != ids[batchwork.FnExecutor] {
			continue
		}
		n++
		if got := m.Properties["ScalingConfig"]; !cmp.Equal(got, map[string]any{"MaximumConcurrency": float64(7)}) {
			t.Errorf("executor mapping %s scaling %v, want a maximum of 7", id, got)
		}
	}
	if n != 3 {
		t.Errorf("%d executor mappings, want 3", n)
	}
}

func TestBadPropsPanicWithTheField(t *testing.T) {
	cases := []struct {
		name  string
		props batchwork.Props
		want  string
	}{
		{"executor", batchwork.Props{Executor: "ec2"}, `executor "ec2"`},
		{"concurrency", batchwork.Props{ExecutorMaxConcurrency: 1}, "executorMaxConcurrency 1"},
		{"timeout", batchwork.Props{ExecutorTimeout: 20 * time.Minute}, "exceeds Lambda's 15 minutes"},
		{"owner limits", batchwork.Props{OwnerMaxConcurrency: "*=10,alice=many"}, `ownerMaxConcurrency: entry "alice=many"`},
		{"remote executor not a role", batchwork.Props{RemoteExecutorRoleArns: []string{"arn:aws:iam::123456789012:user/bob"}},
			`remoteExecutorRoleArns: "arn:aws:iam::123456789012:user/bob" is not an IAM role ARN`},
		{"remote executor wildcard", batchwork.Props{RemoteExecutorRoleArns: []string{"arn:aws:iam::123456789012:role/*"}},
			`remoteExecutorRoleArns: "arn:aws:iam::123456789012:role/*" is not an IAM role ARN`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			defer func() {
				r := recover()
				if r == nil || !strings.Contains(fmt.Sprint(r), c.want) {
					t.Fatalf("panic %v, want one naming %q", r, c.want)
				}
			}()
			app := awscdk.NewApp(&awscdk.AppProps{Outdir: jsii.String(t.TempDir())})
			batchwork.NewBatchwork(awscdk.NewStack(app, jsii.String("Bad"), nil), "Batchwork", &c.props)
		})
	}
}

// check turns an assertion's panic into a test error, so one failed
// assertion does not end the whole test binary.
func check(t *testing.T, f func()) {
	t.Helper()
	defer func() {
		if r := recover(); r != nil {
			t.Errorf("%v", r)
		}
	}()
	f()
}

// The owner mode reaches the api function only (it maps principals), and
// the quotas and the priority allowlist the functions that submit (api,
// and sweep for firings); no other function gets them.
func TestAdmissionSettingsReachTheSubmitters(t *testing.T) {
	s := synth(t, "admission", batchwork.Props{Executor: batchwork.ExecutorLambda, OwnerMode: "session",
		MaxActiveJobs: "*=10", MaxTasks: "*=100000", MaxSchedules: "*=5", HighPriorityOwners: "ops"}, nil)
	want := map[string]map[string]any{
		batchwork.FnAPI: {lambdaenv.EnvOwnerMode: "session", lambdaenv.EnvOwnerMaxActiveJobs: "*=10",
			lambdaenv.EnvOwnerMaxTasks: "*=100000", lambdaenv.EnvOwnerMaxSchedules: "*=5", lambdaenv.EnvHighPriorityOwners: "ops"},
		batchwork.FnSweep: {lambdaenv.EnvOwnerMaxActiveJobs: "*=10",
			lambdaenv.EnvOwnerMaxTasks: "*=100000", lambdaenv.EnvOwnerMaxSchedules: "*=5", lambdaenv.EnvHighPriorityOwners: "ops"},
	}
	keys := []string{lambdaenv.EnvOwnerMode, lambdaenv.EnvOwnerMaxActiveJobs, lambdaenv.EnvOwnerMaxTasks, lambdaenv.EnvOwnerMaxSchedules, lambdaenv.EnvHighPriorityOwners}
	for name, id := range s.functionIDs(t) {
		env := s.json.Resources[id].Properties["Environment"].(map[string]any)["Variables"].(map[string]any)
		for _, k := range keys {
			if got, w := env[k], want[name][k]; got != w {
				t.Errorf("%s function: %s=%v, want %v", name, k, got, w)
			}
		}
	}
}
