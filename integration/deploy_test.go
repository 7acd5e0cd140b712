package integration

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"github.com/batchwork/batchwork/examples"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	"github.com/aws/aws-sdk-go-v2/service/cloudformation"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge"
	"github.com/google/go-cmp/cmp"

	"github.com/batchwork/batchwork/examples/wordcount"
	"github.com/batchwork/batchwork/internal/emulator"
	"github.com/batchwork/batchwork/internal/metrics"
	"github.com/batchwork/batchwork/shared/batchwork"
	"github.com/batchwork/batchwork/shared/control"
	"github.com/batchwork/batchwork/shared/lambdaenv"
	"github.com/batchwork/batchwork/shared/provision"
	"github.com/batchwork/batchwork/shared/runner"
	"github.com/batchwork/batchwork/shared/tuning"
	sm "github.com/batchwork/batchwork/statemachine"
)

// motoMissingTypes are the resource types of the full template that moto's
// CloudFormation (5.2.5) does not implement: it skips them with a warning
// and completes the stack. The API (HTTP API, its stage, integration and
// routes), the alarms and the TLS-only bucket, queue and alarm topic
// policies are therefore proven by the template tests (infra/batchwork),
// not here.
var motoMissingTypes = []string{
	"AWS::ApiGatewayV2::Api",
	"AWS::ApiGatewayV2::Integration",
	"AWS::ApiGatewayV2::Route",
	"AWS::ApiGatewayV2::Stage",
	"AWS::CDK::Metadata",
	"AWS::CloudWatch::Alarm",
	"AWS::S3::BucketPolicy",
	"AWS::SNS::TopicPolicy",
	"AWS::SQS::QueuePolicy",
}

// TestCDKDeployRunsWordCount deploys the whole stack with the pinned CDK
// CLI (cdk bootstrap + cdk deploy, as `make deploy-local` does) into the
// emulator, checks what the emulator created against the synthesized
// template, then runs word count on the deployed table, queues and bucket
// with the handlers hosted in this process (running the deployed Lambda
// functions would need a container engine).
func TestCDKDeployRunsWordCount(t *testing.T) {
	t.Parallel()
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	cdk := filepath.Join(root, "node_modules", ".bin", "cdk")
	for _, need := range []string{cdk, filepath.Join(root, "bin", "executor", "bootstrap")} {
		if _, err := os.Stat(need); err != nil {
			t.Fatalf("%v: run `make cdk-cli build` first (make test does)", err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	// A moto of its own: deploying (55 MB of Lambda assets, CloudFormation,
	// Lambda) would otherwise hold the shared moto process's interpreter
	// while the other tests wait on it. Its DynamoDB is moto's own:
	// CloudFormation creates the stack's table there, not in DynamoDB Local.
	dep := emu
	if emu.Kind == emulator.KindMoto {
		own, err := emulator.StartWith(ctx, emulator.Options{DynamoDB: emulator.DynamoDBMoto})
		if err != nil {
			t.Fatalf("start an emulator for the deployment: %v", err)
		}
		t.Cleanup(func() { _ = own.Stop() })
		dep = own
	}
	cfg := dep.AWSConfig()
	creds, err := cfg.Credentials.Retrieve(ctx)
	if err != nil {
		t.Fatal(err)
	}
	account, err := callerAccount(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	var b [3]byte
	_, _ = rand.Read(b[:])
	stack := "bw-deploy-" + hex.EncodeToString(b[:])
	out := t.TempDir()
	env := append(os.Environ(),
		"AWS_ENDPOINT_URL="+dep.URL,
		// The CLI hands CloudFormation a template URL on this endpoint;
		// moto reads the bucket from the path only for "localhost" URLs.
		"AWS_ENDPOINT_URL_S3_FOR_CLOUDFORMATION="+strings.Replace(dep.URL, "127.0.0.1", "localhost", 1),
		"AWS_ACCESS_KEY_ID="+creds.AccessKeyID, "AWS_SECRET_ACCESS_KEY="+creds.SecretAccessKey,
		"AWS_REGION="+cfg.Region, "AWS_DEFAULT_REGION="+cfg.Region,
		"JSII_SILENCE_WARNING_DEPRECATED_NODE_VERSION=1", "CDK_DISABLE_CLI_TELEMETRY=true", "CDK_DISABLE_VERSION_CHECK=true",
	)
	runCDK := func(args ...string) {
		t.Helper()
		start := time.Now()
		cmd := exec.CommandContext(ctx, cdk, append(args, "--no-notices", "--output", out, "-c", "stackName="+stack)...)
		cmd.Dir, cmd.Env = root, env
		logs, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("cdk %s: %v\n%s", strings.Join(args, " "), err, logs)
		}
		t.Logf("cdk %s: %.1fs", args[0], time.Since(start).Seconds())
	}
	runCDK("bootstrap", fmt.Sprintf("aws://%s/%s", account, cfg.Region))
	runCDK("deploy", "--require-approval", "never", stack)

	// What the emulator created, against the synthesized template.
	raw, err := os.ReadFile(filepath.Join(out, stack+".template.json"))
	if err != nil {
		t.Fatal(err)
	}
	var tmpl struct {
		Resources map[string]struct {
			Type string `json:"Type"`
		} `json:"Resources"`
	}
	if err := json.Unmarshal(raw, &tmpl); err != nil {
		t.Fatal(err)
	}
	cf := cloudformation.NewFromConfig(cfg)
	desc, err := cf.DescribeStackResources(ctx, &cloudformation.DescribeStackResourcesInput{StackName: &stack})
	if err != nil {
		t.Fatal(err)
	}
	physical := map[string]string{}
	for _, r := range desc.StackResources {
		// moto lists a resource it skipped without a logical id, and a
		// Lambda permission it created without a physical id.
		if r.LogicalResourceId != nil {
			physical[*r.LogicalResourceId] = aws.ToString(r.PhysicalResourceId)
		}
	}
	missing := map[string]bool{}
	byType := map[string][]string{}
	for id, r := range tmpl.Resources {
		byType[r.Type] = append(byType[r.Type], id)
		if _, ok := physical[id]; !ok {
			missing[r.Type] = true
		}
	}
	var gaps []string
	for typ := range missing {
		gaps = append(gaps, typ)
	}
	sort.Strings(gaps)
	t.Logf("deployed %d of %d resources; not implemented by the emulator: %v", len(physical), len(tmpl.Resources), gaps)
	if dep.Kind == emulator.KindMoto {
		if diff := cmp.Diff(motoMissingTypes, gaps); diff != "" {
			t.Errorf("resource types the emulator left out (-known gaps +this run):\n%s", diff)
		}
	}
	for _, typ := range []string{"AWS::DynamoDB::Table", "AWS::SQS::Queue", "AWS::S3::Bucket", "AWS::Lambda::Function", "AWS::IAM::Role",
		"AWS::IAM::Policy", "AWS::Lambda::EventSourceMapping", "AWS::Events::Rule", "AWS::Lambda::Permission", "AWS::Logs::LogGroup", "AWS::CloudWatch::Dashboard",
		"AWS::SNS::Topic", "AWS::KMS::Key"} { // the alarm topic and its key
		if len(byType[typ]) == 0 || missing[typ] {
			t.Errorf("%s: in template %v, deployed: %v", typ, byType[typ], !missing[typ])
		}
	}

	res, err := provision.FromStack(ctx, cfg, stack)
	if err != nil {
		t.Fatal(err)
	}
	wantEnv := map[string]string{
		lambdaenv.EnvTable: res.Table, lambdaenv.EnvBucket: res.Bucket, lambdaenv.EnvQueueHigh: res.Queues.High,
		lambdaenv.EnvQueueNormal: res.Queues.Normal, lambdaenv.EnvQueueLow: res.Queues.Low, lambdaenv.EnvDLQ: res.Queues.DLQ,
	}
	// The deployed functions are configured with the resources the local
	// runner is about to use.
	var executorArn, sweepArn string
	for _, id := range byType["AWS::Lambda::Function"] {
		var fn struct {
			FunctionArn, Runtime, Handler string
			Timeout                       int
			Environment                   struct{ Variables map[string]string }
		}
		if err := awsREST(ctx, cfg, "lambda", http.MethodGet, "/2015-03-31/functions/"+url.PathEscape(physical[id])+"/configuration", nil, &fn); err != nil {
			t.Fatal(err)
		}
		want := maps.Clone(wantEnv)
		want[metrics.EnvStack] = stack // Batchwork's metrics name their stack
		if strings.Contains(id, "Sweep") || strings.Contains(id, "Api") {
			// The sweep hands off and consumes schedule timers; the api
			// hands off the starts of jobs submitted to start soon.
			want[lambdaenv.EnvQueueTimer] = res.Queues.Timer
		}
		if strings.Contains(id, "Sweep") || strings.Contains(id, "Api") {
			// The submitting functions know the examples' task names
			// before any executor has published them, and refuse priority
			// "high" to every owner (none named).
			want[lambdaenv.EnvTaskNames] = strings.Join(examples.Names(), ",")
			want[lambdaenv.EnvHighPriorityOwners] = control.NoHighPriorityOwners
		}
		if !strings.Contains(id, "Api") {
			// Every owner's running tasks are capped by default.
			want[lambdaenv.EnvOwnerMaxConcurrency] = fmt.Sprintf("*=%d", tuning.ExecutorMaxConcurrency/2)
		}
		// Every function publishes Batchwork's events to the stack's bus
		// (shared/events), which the stack deployed.
		bus := fn.Environment.Variables[lambdaenv.EnvEventBus]
		if _, err := eventbridge.NewFromConfig(cfg).DescribeEventBus(ctx, &eventbridge.DescribeEventBusInput{Name: &bus}); bus == "" || err != nil {
			t.Errorf("function %s: event bus %q: %v", id, bus, err)
		}
		want[lambdaenv.EnvEventBus] = bus
		if strings.Contains(id, "Api") {
			// The api reads the stack's log groups for GET /jobs/{id}/logs:
			// every function's, each of which the stack deployed.
			groups := fn.Environment.Variables[lambdaenv.EnvLogGroups]
			if n := len(strings.Split(groups, ",")); n != len(byType["AWS::Lambda::Function"]) {
				t.Errorf("function %s: %s = %q: %d groups, want one per function (%d)", id, lambdaenv.EnvLogGroups, groups, n, len(byType["AWS::Lambda::Function"]))
			}
			want[lambdaenv.EnvLogGroups] = groups
		}
		if diff := cmp.Diff(want, fn.Environment.Variables); diff != "" {
			t.Errorf("function %s environment (-want +got):\n%s", id, diff)
		}
		if fn.Runtime != "provided.al2023" || fn.Handler != "bootstrap" {
			t.Errorf("function %s: runtime %s, handler %s", id, fn.Runtime, fn.Handler)
		}
		switch {
		case strings.Contains(id, "Executor"):
			executorArn = fn.FunctionArn
			if time.Duration(fn.Timeout)*time.Second != tuning.ExecutorTimeout {
				t.Errorf("executor timeout %ds", fn.Timeout)
			}
		case strings.Contains(id, "Sweep"):
			sweepArn = fn.FunctionArn
		}
	}
	var maps struct {
		EventSourceMappings []struct {
			EventSourceArn, FunctionArn string
			FunctionResponseTypes       []string
			ScalingConfig               struct{ MaximumConcurrency int }
		}
	}
	// All mappings, filtered here: moto's FunctionName filter matches none.
	if err := awsREST(ctx, cfg, "lambda", http.MethodGet, "/2015-03-31/event-source-mappings/", nil, &maps); err != nil {
		t.Fatal(err)
	}
	var sources []string
	timerMappings := 0
	for _, m := range maps.EventSourceMappings {
		if m.FunctionArn == sweepArn {
			timerMappings++
			if q := res.Queues.Timer; !strings.HasSuffix(m.EventSourceArn, ":"+q[strings.LastIndex(q, "/")+1:]) ||
				!cmp.Equal(m.FunctionResponseTypes, []string{"ReportBatchItemFailures"}) {
				t.Errorf("sweep event source mapping %s (response types %v), want the timer queue %s reporting item failures", m.EventSourceArn, m.FunctionResponseTypes, q)
			}
			continue
		}
		if m.FunctionArn != executorArn {
			continue
		}
		sources = append(sources, m.EventSourceArn[strings.LastIndex(m.EventSourceArn, ":")+1:])
		if !cmp.Equal(m.FunctionResponseTypes, []string{"ReportBatchItemFailures"}) || m.ScalingConfig.MaximumConcurrency != tuning.ExecutorMaxConcurrency {
			t.Errorf("event source mapping %s: response types %v, max concurrency %d", m.EventSourceArn, m.FunctionResponseTypes, m.ScalingConfig.MaximumConcurrency)
		}
	}
	if timerMappings != 1 {
		t.Errorf("%d event source mappings on the sweep, want the timer queue's", timerMappings)
	}
	sort.Strings(sources)
	var wantSources []string
	for _, u := range []string{res.Queues.High, res.Queues.Normal, res.Queues.Low} {
		wantSources = append(wantSources, u[strings.LastIndex(u, "/")+1:])
	}
	sort.Strings(wantSources)
	if diff := cmp.Diff(wantSources, sources); diff != "" {
		t.Errorf("executor event sources (-want +got):\n%s", diff)
	}
	for _, id := range byType["AWS::Events::Rule"] {
		var rule struct{ ScheduleExpression string }
		if err := awsJSON(ctx, cfg, "events", "AWSEvents.DescribeRule", map[string]string{"Name": physical[id]}, &rule); err != nil {
			t.Fatal(err)
		}
		var targets struct{ Targets []struct{ Arn string } }
		if err := awsJSON(ctx, cfg, "events", "AWSEvents.ListTargetsByRule", map[string]string{"Rule": physical[id]}, &targets); err != nil {
			t.Fatal(err)
		}
		if rule.ScheduleExpression != "rate(1 minute)" || len(targets.Targets) != 1 || targets.Targets[0].Arn != sweepArn {
			t.Errorf("sweep schedule %q targets %+v, want rate(1 minute) on %s", rule.ScheduleExpression, targets.Targets, sweepArn)
		}
	}

	// Word count on the deployed resources, handlers hosted here. moto
	// would run the enabled mappings itself (in Docker) on every send.
	if n, err := provision.PauseEventSources(ctx, cfg, stack); err != nil || n != 4 {
		t.Fatalf("paused %d event source mappings, want 4 (3 ready queues, the timer queue): %v", n, err)
	}
	reg := batchwork.NewRegistry()
	wordcount.Register(reg)
	e := deployedEnv(t, cfg, res, reg)
	corpus := wordcount.Corpus(11, 60_000)
	e.putInput("tester", "input/corpus.txt", corpus)
	id := e.submit("deployed-wc", wordcount.Spec("wc", "inputs:input/", 10_000, 3))
	st := e.waitJob(id, 2*time.Minute)
	if st.State != string(sm.JobSucceeded) {
		t.Fatalf("job %s: %+v", st.State, st)
	}
	got := map[string]int{}
	for _, o := range readManifest(t, e, st.Manifest).Outputs {
		raw, err := e.r.Blob.Get(ctx, o.Key)
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(strings.TrimSpace(string(raw)), "\n") {
			w, n, _ := strings.Cut(line, "\t")
			got[w], _ = strconv.Atoi(n)
		}
	}
	if diff := cmp.Diff(referenceCounts(string(corpus)), got); diff != "" {
		t.Errorf("word counts on the deployed stack (-want +got):\n%s", diff)
	}
}

// deployedEnv runs the handlers in this process on a deployed stack's
// resources, with the test timings of newEnv.
func deployedEnv(t *testing.T, cfg aws.Config, res provision.Resources, reg *batchwork.Registry) *env {
	t.Helper()
	log := slog.New(slog.NewJSONHandler(io.Discard, nil))
	if testing.Verbose() {
		log = slog.New(slog.NewJSONHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	}
	ctx, cancel := context.WithCancel(context.Background())
	r, err := runner.New(ctx, runner.Options{
		AWS: cfg, Resources: &res, Slots: 4, Registry: reg, Log: log,
		SweepEvery: testSweepEvery, PollWait: 2 * time.Second,
		Control: control.Config{StartGrace: time.Second, CheckEvery: time.Second, StuckAfter: 5 * time.Second},
	})
	if err != nil {
		cancel()
		t.Fatalf("runner: %v", err)
	}
	done := make(chan struct{})
	go func() { defer close(done); _ = r.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	return &env{t: t, r: r, reg: reg, cfg: cfg}
}

// callerAccount asks STS which account the emulator's credentials are in,
// for `cdk bootstrap aws://<account>/<region>`.
func callerAccount(ctx context.Context, cfg aws.Config) (string, error) {
	body := []byte("Action=GetCallerIdentity&Version=2011-06-15")
	raw, err := signed(ctx, cfg, "sts", http.MethodPost, "/", "application/x-www-form-urlencoded", "", body)
	if err != nil {
		return "", err
	}
	m := regexp.MustCompile(`<Account>(\d+)</Account>`).FindSubmatch(raw)
	if m == nil {
		return "", fmt.Errorf("sts GetCallerIdentity: no account in %s", raw)
	}
	return string(m[1]), nil
}

// awsREST and awsJSON call services this module has no SDK client for
// (Lambda, EventBridge), signed like the SDK would.
func awsREST(ctx context.Context, cfg aws.Config, service, method, path string, body []byte, out any) error {
	raw, err := signed(ctx, cfg, service, method, path, "application/json", "", body)
	if err != nil {
		return err
	}
	return json.Unmarshal(raw, out)
}

func awsJSON(ctx context.Context, cfg aws.Config, service, target string, in, out any) error {
	body, err := json.Marshal(in)
	if err != nil {
		return err
	}
	raw, err := signed(ctx, cfg, service, http.MethodPost, "/", "application/x-amz-json-1.1", target, body)
	if err != nil {
		return err
	}
	return json.Unmarshal(raw, out)
}

func signed(ctx context.Context, cfg aws.Config, service, method, path, contentType, target string, body []byte) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, method, aws.ToString(cfg.BaseEndpoint)+path, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", contentType)
	if target != "" {
		req.Header.Set("X-Amz-Target", target)
	}
	creds, err := cfg.Credentials.Retrieve(ctx)
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256(body)
	if err := v4.NewSigner().SignHTTP(ctx, creds, req, hex.EncodeToString(sum[:]), service, cfg.Region, time.Now()); err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", service, path, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode/100 != 2 {
		return nil, fmt.Errorf("%s %s %s: %s: %s", service, target, path, resp.Status, raw)
	}
	return raw, nil
}
