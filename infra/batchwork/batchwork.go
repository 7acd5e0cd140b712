// Package batchwork is the reusable CDK construct that deploys all of
// Batchwork: the state table, the ready queues and their dead-letter
// queue, the data bucket, the control-plane functions, the HTTP API, the
// sweep schedule, the executors (Lambda, and optionally Fargate) and the
// alarms and dashboard. Embed it in your own app with NewBatchwork.
//
// Settings that must agree with the runtime (visibility timeout, redrive
// count, function timeouts) come from shared/tuning; the table's key
// schema comes from shared/dynamo; the functions' environment variable
// names come from shared/lambdaenv. Physical names are never set: they
// reach the functions through environment variables.
package batchwork

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsapigateway"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsapigatewayv2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsapigatewayv2authorizers"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsapigatewayv2integrations"
	"github.com/aws/aws-cdk-go/awscdk/v2/awscloudwatch"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsdynamodb"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsecs"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsevents"
	"github.com/aws/aws-cdk-go/awscdk/v2/awseventstargets"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsiam"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambda"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslogs"
	"github.com/aws/aws-cdk-go/awscdk/v2/awss3"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssns"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssqs"
	"github.com/aws/constructs-go/constructs/v10"
	"github.com/aws/jsii-runtime-go"

	"github.com/batchwork/batchwork/infra/template"
	"github.com/batchwork/batchwork/internal/metrics"
	"github.com/batchwork/batchwork/shared/blob"
	"github.com/batchwork/batchwork/shared/control"
	"github.com/batchwork/batchwork/shared/dynamo"
	"github.com/batchwork/batchwork/shared/lambdaenv"
	"github.com/batchwork/batchwork/shared/principal"
	"github.com/batchwork/batchwork/shared/tuning"
)

// ExecutorKind selects the executors the construct deploys.
type ExecutorKind string

const (
	// ExecutorLambda: an SQS event source per ready queue (tasks up to 15 min).
	ExecutorLambda ExecutorKind = "lambda"
	// ExecutorFargate: a queue-processing Fargate service (long tasks).
	ExecutorFargate ExecutorKind = "fargate"
	// ExecutorBoth deploys both; they share the queues, and a task runs on
	// whichever claims it first.
	ExecutorBoth ExecutorKind = "both"
)

// Props configure a Batchwork installation. The zero value is valid.
type Props struct {
	// BinDir holds <function>/bootstrap for each Lambda function (built by
	// `make build`). Default "bin" (relative to the app's working
	// directory, the repository root under cdk.json). A function without a
	// bootstrap there is built from its package at synth time (build.go).
	BinDir string
	// SweepSchedule is an EventBridge schedule expression; default
	// rate(1 minute).
	SweepSchedule string
	// Executor selects the executors; default ExecutorLambda.
	Executor ExecutorKind
	// ExecutorSizes are the executor memory sizes specs may ask for
	// (resources.memory and maxMemory), e.g. ["1GiB", "4GiB"], each one of
	// 1GiB, 2GiB, 4GiB, 8GiB and 10GiB. The default size (1GiB) is the
	// executor Executor selects; each larger one is a Lambda executor of
	// that memory on the same queues (executorsizes.go). Default: the
	// default size only.
	ExecutorSizes []string
	// ExecutorTimeout is the Lambda executor's timeout; the ready queues'
	// visibility timeout is derived from it. Default tuning.ExecutorTimeout.
	ExecutorTimeout time.Duration
	// ExecutorMaxConcurrency caps concurrent Lambda executor invocations
	// per ready queue (2 to 1,000). Default tuning.ExecutorMaxConcurrency.
	ExecutorMaxConcurrency int
	// ExecutorReservedConcurrency reserves this many concurrent
	// executions for each Lambda executor function (the default one and
	// each larger size's), taken from the account's pool. 0 (default):
	// unreserved. Otherwise at least 3 × ExecutorMaxConcurrency, the
	// default executor's three ready queues' event sources together
	// (capacity.go); not with Executor fargate.
	ExecutorReservedConcurrency int
	// FargateMaxTasks caps the Fargate executor's task count. Default 10.
	FargateMaxTasks int
	// APIRateLimit and APIBurstLimit throttle the HTTP API (requests a
	// second, and the burst above that rate); APIBurstLimit is at least
	// APIRateLimit. Default 250 and 500 (APIRateLimit when that is more).
	APIRateLimit, APIBurstLimit int
	// TableWarmReadUnitsPerSecond and TableWarmWriteUnitsPerSecond are the
	// table's warm throughput: what it serves at once, before on-demand
	// scaling has seen that traffic. 0 (default): AWS's default, 12,000
	// reads and 4,000 writes a second for a new table; when set, at least
	// that.
	TableWarmReadUnitsPerSecond, TableWarmWriteUnitsPerSecond int
	// FargateSlots is the number of concurrent tasks per Fargate task.
	// Default 4.
	FargateSlots int
	// DockerContext is the directory holding the Dockerfile the Fargate
	// executor's image is built from at deploy time (a Docker engine is
	// needed then), when FargateImage is not set. Its image runs your
	// executor: a main that calls batchwork.Main (see the Dockerfile
	// `batchwork init` writes). Default ".".
	DockerContext string
	// FargateBuildArgs are the Docker build arguments of that image, e.g.
	// {"RUNTIME": "python"} for the repository's Dockerfile with Python
	// and the exec examples (see the Dockerfile). Default none.
	FargateBuildArgs map[string]string
	// OutputPrefix prefixes the output keys (see infra/template), so two
	// installations can share a stack. Default "".
	OutputPrefix string
	// OwnerMaxConcurrency caps the tasks each owner runs at once across
	// its jobs, in control.ParseOwnerLimits's format ("*=200,<owner ARN>=10").
	// It reaches the functions that claim, commit, fail or sweep (and the
	// Fargate executor) as lambdaenv.EnvOwnerMaxConcurrency. Default "":
	// "*=<n>", n half of what the default executor runs at once
	// (ExecutorMaxConcurrency / 2, or FargateMaxTasks * FargateSlots / 2
	// for Fargate only; ownerdefaults.go). "*=0", or no "*" entry, leaves
	// owners without a cap, and synth warns.
	OwnerMaxConcurrency string
	// OwnerMode maps an IAM principal to its owner on the api function
	// (principal.ParseMode): "role" (default: a role's sessions are one
	// owner) or "session".
	OwnerMode string
	// Admission limits per owner, in control.ParseOwnerQuota's format
	// ("*=100,<owner ARN>=10"), for the functions that submit (api, and
	// sweep for schedule firings). Default "": none.
	MaxActiveJobs, MaxTasks, MaxSchedules string
	// HighPriorityOwners lists the owners that may use priority "high"
	// (owner ARNs separated by commas; "*": all, and synth warns). Default
	// "": none (control.NoHighPriorityOwners): a "high" job or stage is
	// refused at submit, naming the field.
	HighPriorityOwners string
	// InputBuckets are buckets besides the data bucket that every owner's
	// specs may read inputs from (names, not ARNs). The roles that plan
	// and read inputs may list them and read their objects, as they may
	// the data bucket's inputs area; the functions that submit (api,
	// sweep) get them as lambdaenv.EnvInputBuckets and refuse any other
	// bucket. Default none: inputs come from each owner's inputs area
	// (inputs/<owner key>/) and outputs area (outputs/<owner key>/) only.
	InputBuckets []string
	// OutputBuckets are buckets besides the data bucket that jobs may
	// publish their outputs to (a spec's output: s3://<bucket>/<owner
	// key>/<path>/; shared/control/publish.go), each owner only under its
	// own key, which the submitting functions (lambdaenv.EnvOutputBuckets)
	// check. The roles that end jobs may write, read and list them, as
	// they may the data bucket's outputs area. To read a published folder
	// of one as a job's input, list it in InputBuckets too: specs may then
	// read it only under their owner's key, as they write it. Default none:
	// outputs are published to each owner's outputs area
	// (outputs/<owner key>/) only.
	OutputBuckets []string
	// TaskFunctions are the existing Lambda functions (names, or ARNs)
	// that specs' lambda stages may invoke (taskfunctions.go). The
	// executor roles (the Lambda executor's, the Fargate executor's) may
	// invoke exactly these, with their versions and aliases; the
	// submitting functions (api, sweep) get them as
	// lambdaenv.EnvTaskFunctions and refuse a lambda stage naming any
	// other, so no owner can have the executor invoke a function the
	// operator did not list. A spec names a function as listed here (a
	// name, or an ARN), optionally with :version or :alias. Default none.
	TaskFunctions []string
	// TaskFunctionRoleArns are the execution roles of TaskFunctions: a
	// function writes its outputs under the attempt's prefix in the job
	// area, which the data bucket's policy closes to every principal but
	// the installation's and these (see confineJobArea). Give each role
	// s3:PutObject on <data bucket>/jobs/* and s3:GetObject on what its
	// stages read, in its own policy; writes must carry If-None-Match: *.
	// Default none: lambda stages cannot write outputs of their own.
	TaskFunctionRoleArns []string
	// RemoteExecutorRoleArns are the IAM roles of executors that run
	// outside the installation and claim and commit through the claim and
	// commit functions (functions/claim, functions/commit). Those functions
	// are deployed only when roles are named here, and only these roles may
	// invoke them (remote.go). Default none: nothing deployed uses them.
	RemoteExecutorRoleArns []string
	// Retention is how long ended jobs are kept, in whole days, at least
	// lambdaenv.MinRetentionDays (8): the sweep deletes their records that
	// long after the job ended (with a TTL a day later as a backstop), and
	// their objects under jobs/ expire that long after each was written (a
	// lifecycle rule); see retention.go.
	// Published output folders and inputs are never expired. Default 0:
	// jobs are kept until their owner deletes them.
	Retention time.Duration
	// OpenLineage, when set, sends each job's OpenLineage run events
	// (START, COMPLETE, FAIL, ABORT) to an endpoint such as Marquez
	// (lineage.go).
	OpenLineage *OpenLineage
	// Tracing, when set, sends the control plane's and the executors'
	// OpenTelemetry spans to an OTLP endpoint (tracing.go); nil: off.
	Tracing *Tracing

	// ExecutorPackage is your executor: a Go main package (a directory
	// such as "./cmd/executor" or ".", or an import path) in the module at
	// ModuleDir whose main registers tasks and calls batchwork.Main
	// (shared/batchwork). It is built at synth time for linux/arm64
	// provided.al2023 with the local Go toolchain, no Docker, and becomes
	// the Lambda executor's code; it is also built for this machine and
	// run once with BATCHWORK_LIST_TASKS=1 to learn its task names, which
	// the submitting functions then accept (build.go). Default "": the
	// executor of BinDir, or this repository's functions/executor.
	ExecutorPackage string
	// ModuleDir is the directory `go build` runs in: the module that holds
	// ExecutorPackage and requires github.com/batchwork/batchwork. The
	// control plane's functions are built there too, by import path
	// (FunctionsPackage), when BinDir has no bootstrap for them. Default
	// "": the app's working directory.
	ModuleDir string
	// TaskNames are the task names the submitting functions accept when
	// the executor's cannot be learnt at synth time (a Fargate image built
	// elsewhere). Default: those ExecutorPackage registers.
	TaskNames []string
	// ExecPrograms are the exec programs the submitting functions accept
	// before any executor has published its programs: those the Fargate
	// image installs in its programs directory (BATCHWORK_EXEC_DIR), e.g.
	// ["wordcount.py"] for this repository's image built with
	// FargateBuildArgs {"RUNTIME": "python"}. The Fargate service scales
	// from zero and publishes its programs only once it runs, so without
	// them an exec stage is refused until it has. Default none: exec
	// stages are accepted once a Fargate executor has published, and
	// never on a stack of Lambda executors only, which run no programs.
	ExecPrograms []string
	// FargateImage is the Fargate executor's image, e.g.
	// ecs.ContainerImage_FromRegistry("123456789012.dkr.ecr.eu-west-1.amazonaws.com/my-executor:v3", nil)
	// for one built and pushed elsewhere; its entrypoint is an executor
	// whose main calls batchwork.Main, which runs the long-polling host
	// outside Lambda. Default nil: the image built at deploy time from the
	// Dockerfile in DockerContext.
	FargateImage awsecs.ContainerImage
	// AlarmTopic receives the construct's alarms (ops.go). Default nil:
	// the construct creates an encrypted, TLS-only topic; either way its
	// ARN is the AlarmTopicArn output, to subscribe email or Slack (AWS
	// Chatbot) to. A topic encrypted with a KMS key must let CloudWatch
	// (cloudwatch.amazonaws.com) use the key.
	AlarmTopic awssns.ITopic
}

// Batchwork is a deployed installation.
type Batchwork struct {
	constructs.Construct
	Table  awsdynamodb.Table
	Bucket awss3.Bucket
	// AccessLogs receives the data bucket's S3 server access logs
	// (accesslogs.go).
	AccessLogs        awss3.Bucket
	High, Normal, Low awssqs.Queue
	DeadLetters       awssqs.Queue
	// Timer holds schedule firings handed off by the sweep, each delayed
	// until its scheduled time; the sweep function consumes it.
	Timer     awssqs.Queue
	API       awsapigatewayv2.HttpApi
	Functions map[string]awslambda.Function
	Alarms    []awscloudwatch.Alarm
	Dashboard awscloudwatch.Dashboard
	// EventBus receives Batchwork's events (events.go).
	EventBus awsevents.EventBus
	// AlarmTopic is where the alarms notify: Props.AlarmTopic, or the
	// topic the construct created.
	AlarmTopic awssns.ITopic
	// SizedQueues are the ready queues of the executor sizes beyond the
	// default, by size ("4GiB"): one each, polled by that size's executors
	// only (executorsizes.go). Empty without Props.ExecutorSizes.
	SizedQueues map[string]awssqs.Queue

	ownerLimits string // Props.OwnerMaxConcurrency, canonical
	// fargateLogs is the Fargate executor's log group, if it has one.
	fargateLogs awslogs.ILogGroup
	// inputBuckets are Props.InputBuckets, checked: read like the data
	// bucket's inputs area (see grant).
	inputBuckets []string
	// outputBuckets are Props.OutputBuckets, checked: written like the
	// data bucket's outputs area (see grant).
	outputBuckets []string
	// taskFunctions are Props.TaskFunctions, checked: the executors may
	// invoke them (see grant).
	taskFunctions []string
	// admission is the environment of the submitting functions (api,
	// sweep) from Props' owner mode, quotas and priority allowlist.
	admission map[string]string
	// jobAreaWriters are the principals granted to write or tag objects
	// in the job area (see grant and confineJobArea).
	jobAreaWriters []awsiam.IGrantable
	// retentionDays is Props.Retention in days (retention.go).
	retentionDays int
	// lineage is the functions' OPENLINEAGE_* variables from
	// Props.OpenLineage (lineage.go); nil: off.
	lineage map[string]string
	// tracing is the functions' OTEL_* variables from Props.Tracing
	// (tracing.go); nil: off.
	tracing map[string]string
}

// Function names: the directories under functions/ and bin/.
const (
	FnAPI      = "api"
	FnClaim    = "claim"
	FnCommit   = "commit"
	FnSweep    = "sweep"
	FnExecutor = "executor"
)

// Action sets. Each function is granted exactly the sets its code paths
// use (see permissions below); no set holds a wildcard action. The
// integration suite proves this against the code: it records every action
// each function performs and fails on an action not granted and on a
// grant not used (integration/iam_test.go).
var (
	// Every function reads and writes state records. A transaction needs
	// the per-item action of each of its parts and nothing for
	// TransactWriteItems itself (AWS: "Using IAM with DynamoDB
	// transactions"): Put and Update parts need PutItem and UpdateItem,
	// and a ConditionCheck part ConditionCheckItem, which every function
	// needs: a stage's transitions check the job's state, a takeover of a
	// dead executor's task checks its liveness record, and a schedule's
	// firing checks the schedule's cursor as it creates the job.
	tableActions = []string{"dynamodb:GetItem", "dynamodb:Query", "dynamodb:PutItem", "dynamodb:UpdateItem", "dynamodb:ConditionCheckItem"}
	// Materializing a stage writes its tasks and its completion counters,
	// and a claim the first record of an unwritten task, as PartiQL
	// INSERTs (a put that fails when the item exists, at 1 write unit;
	// dynamo.PutTasks, Store.ShardPut, the batched first claims of
	// dynamo/firstclaim.go), which IAM authorizes as PartiQLInsert, not
	// PutItem.
	insertActions = []string{"dynamodb:PartiQLInsert"}
	// A commit is a PartiQL UPDATE, batched with the process's other
	// commits (dynamo/commitbatch.go), which IAM authorizes as
	// PartiQLUpdate, not UpdateItem.
	commitActions = []string{"dynamodb:PartiQLUpdate"}
	// Stage progress and job status sum a stage's counter shards with
	// batch reads; the claim function never does.
	batchReadActions = []string{"dynamodb:BatchGetItem"}
	// Deleting a schedule (api), and moving a schedule's index entry when
	// its cursor advances (sweep), are Delete parts of transactions.
	deleteActions = []string{"dynamodb:DeleteItem"}
	// The sweep reads its due index: whole with one Scan while it is
	// small, else a Query per shard. It does nothing else on it.
	indexActions = []string{"dynamodb:Query", "dynamodb:Scan"}
	// Planning a stage lists inputs and reads a plan written before;
	// plans, outputs and manifests are written with If-None-Match, in the
	// job area only (jobKeys; the bucket policy denies any other write
	// there: see data).
	objectReadActions  = []string{"s3:GetObject"}
	objectWriteActions = []string{"s3:PutObject"}
	listActions        = []string{"s3:ListBucket"}
	// An attempt known to have ended without committing (failed, fenced,
	// or taken over after its lease expired) has its outputs tagged for the
	// lifecycle rule to expire, in the job area only (jobKeys).
	tagActions = []string{"s3:PutObjectTagging"}
	// An attempt that streamed an output (a multipart upload) and then
	// failed, lost its lease or ended with its job aborts its upload, in
	// the job area only (jobKeys); the lifecycle rule aborts any left.
	abortActions = []string{"s3:AbortMultipartUpload"}
	sendActions  = []string{"sqs:SendMessage"}
	// The executor sets a claimed message's visibility to the lease, keeps
	// its running tasks' messages hidden, and hides a message until its
	// task may run.
	visibilityActions = []string{"sqs:ChangeMessageVisibility"}
	// The sweep drains the dead-letter queue.
	drainActions = []string{"sqs:ReceiveMessage", "sqs:DeleteMessage"}
	// The sweep hands schedule firings to the timer queue, and the api
	// the starts of jobs submitted to start within the handoff window.
	timerActions = []string{"sqs:SendMessage"}
	// Lambda's poller (an event source mapping) receives a function's
	// messages, deletes the handled ones and reads the queue's attributes
	// with the function's role: the three actions AWS requires of an SQS
	// event source. CDK's SqsEventSource would grant GetQueueUrl and
	// ChangeMessageVisibility as well, which neither the poller nor the
	// sweep uses (see eventSource).
	eventSourceActions = []string{"sqs:ReceiveMessage", "sqs:DeleteMessage", "sqs:GetQueueAttributes"}
)

// An owner deletes an ended job's data (DELETE /jobs/{id}/data): the api
// deletes the job's objects, in the job area only (jobKeys).
var objectDeleteActions = []string{"s3:DeleteObject"}

// permissions says which action sets each function needs, from its code
// path: api submits (materializing root stages: plan, tasks, messages),
// reads status and deletes schedules; claim only claims (and on taking
// over an expired lease or a dead executor's claim tags the lost
// attempt's outputs, or fails the job in the table if that was the last
// attempt); commit commits and, as the last committer of a stage, writes
// manifests and materializes downstream stages; sweep repairs all of
// that, drains the dead-letter queue and fires schedules; the executor
// claims, reads inputs, writes outputs and commits.
type grantSet struct {
	table, batchRead, delete, read, write, list, tag, send, visibility, drain, timer bool
	// index: queries the sweep's index.
	index bool
	// deleteObjects: deletes an ended job's objects.
	deleteObjects bool
	// read and list are on the job area only; listInputs lists inputs
	// (planning a stage: the inputs area and the allowed input buckets),
	// readInputs reads them (running a task).
	listInputs, readInputs bool
	// publish writes a succeeded job's outputs to its output folder: the
	// outputs area and Props.OutputBuckets, which it also reads (a
	// folder's claim) and lists (what an interrupted publish copied).
	publish bool
	// abort aborts an attempt's multipart uploads.
	abort bool
	// invoke invokes Props.TaskFunctions (lambda stages), if any.
	invoke bool
	// events publishes events on the bus and deletes their outbox
	// records (events.go).
	events bool
	// insert writes items with PartiQL INSERTs: a stage's tasks
	// (starting a stage: the api, a commit that unblocks one, the sweep,
	// an executor committing in process) and the first claims of
	// unwritten tasks (the claim function, an executor).
	insert bool
	// commit commits tasks (the commit function, an executor).
	commit bool
}

// jobKeys is the job area (shared/blob/keys.go), the only place any role
// writes or tags objects: plans, attempt outputs and manifests. The
// inputs area is the owners', who upload there with their own
// credentials. (Within the area, IAM's * spans "/", so a finer pattern
// would only tell key shapes apart; and the control-plane functions,
// which write manifests, the authority on which outputs count, would gain
// nothing from being kept off outputs.)
const jobKeys = "jobs/*"

// inputKeys is the owners' inputs area (inputs/<owner key>/..., see
// shared/blob/keys.go). Only the code that plans a stage lists it and only
// the executors read it; which owner's area a job may name is checked at
// submit (shared/control/inputs.go). The roles read nothing else of the
// bucket: no prefix outside the two areas, and no other bucket but
// Props.InputBuckets.
const inputKeys = "inputs/*"

// outputKeys is the owners' outputs area (outputs/<owner key>/..., see
// shared/blob/publish.go): the folders jobs publish to. The functions that
// end jobs write it (with If-None-Match), and it is read and listed like
// the inputs area, since a job may read a published folder as its input.
const outputKeys = "outputs/*"

// publishMarkers are the keys of a published folder's claim and success
// marker (shared/blob/publish.go), at any depth of the outputs area: all
// that publishing reads (shared/control/publish.go). The roles that
// publish but read no inputs (api, commit, sweep) may read only these
// there, never an owner's outputs; the executors read whole published
// folders as inputs (outputKeys). On an output bucket, which holds owner
// keys at its root, every publisher reads only these: a job reads an
// output bucket's folder as input only when the bucket is an input bucket
// too.
var publishMarkers = []string{blob.OutputsArea + "*/" + blob.ClaimName, blob.OutputsArea + "*/" + blob.SuccessName}

var permissions = map[string]grantSet{
	FnAPI:      {table: true, insert: true, batchRead: true, delete: true, read: true, write: true, list: true, listInputs: true, send: true, deleteObjects: true, publish: true, events: true, timer: true},
	FnClaim:    {table: true, insert: true, list: true, tag: true, events: true},
	FnCommit:   {table: true, insert: true, commit: true, batchRead: true, read: true, write: true, list: true, listInputs: true, tag: true, send: true, publish: true, events: true},
	FnSweep:    {table: true, insert: true, batchRead: true, delete: true, index: true, read: true, write: true, list: true, listInputs: true, tag: true, send: true, drain: true, timer: true, publish: true, events: true},
	FnExecutor: {table: true, insert: true, commit: true, batchRead: true, read: true, write: true, list: true, listInputs: true, readInputs: true, tag: true, send: true, visibility: true, publish: true, abort: true, invoke: true, events: true},
}

// NewBatchwork adds an installation to scope.
func NewBatchwork(scope constructs.Construct, id string, props *Props) *Batchwork {
	p := withDefaults(props)
	c := constructs.NewConstruct(scope, jsii.String(id))
	useBucketPolicyForAccessLogs(c)
	ownerProtectionWarnings(c, p) // ownerdefaults.go
	b := &Batchwork{Construct: c, Functions: map[string]awslambda.Function{}, ownerLimits: p.OwnerMaxConcurrency, admission: admissionEnv(p), inputBuckets: p.InputBuckets, outputBuckets: p.OutputBuckets, taskFunctions: p.TaskFunctions}
	b.data(c, p)
	b.eventBus(c)             // events.go
	b.lineage = lineageEnv(p) // lineage.go
	b.tracing = tracingEnv(p) // tracing.go
	b.functions(c, p)
	grantLineageReads(b)
	b.api(c, p)
	b.schedule(c, p)
	b.lambdaExecutor(p)
	b.publishTaskNames(p) // build.go
	if p.Executor == ExecutorFargate || p.Executor == ExecutorBoth {
		b.fargateExecutor(c, p)
	}
	b.logReader() // logs.go
	b.confineJobArea(p)
	b.operations(c, p)
	b.outputs(c, p)
	b.suppressNagFindings()
	return b
}

func withDefaults(props *Props) Props {
	var p Props
	if props != nil {
		p = *props
	}
	if p.BinDir == "" {
		p.BinDir = "bin"
	}
	if p.SweepSchedule == "" {
		p.SweepSchedule = fmt.Sprintf("rate(%d minute)", int(tuning.SweepRate/time.Minute))
	}
	if p.Executor == "" {
		p.Executor = ExecutorLambda
	}
	if p.ExecutorTimeout == 0 {
		p.ExecutorTimeout = tuning.ExecutorTimeout
	}
	if p.ExecutorMaxConcurrency == 0 {
		p.ExecutorMaxConcurrency = tuning.ExecutorMaxConcurrency
	}
	if p.FargateMaxTasks == 0 {
		p.FargateMaxTasks = 10
	}
	if p.FargateSlots == 0 {
		p.FargateSlots = 4
	}
	if p.DockerContext == "" {
		p.DockerContext = "."
	}
	switch p.Executor {
	case ExecutorLambda, ExecutorFargate, ExecutorBoth:
	default:
		panic(fmt.Sprintf("batchwork: executor %q: want lambda, fargate or both", p.Executor))
	}
	if err := tuning.Check(tuning.QueueVisibilityFor(p.ExecutorTimeout), p.ExecutorTimeout, tuning.MaxReceiveCount); err != nil {
		panic("batchwork: " + err.Error())
	}
	if p.ExecutorMaxConcurrency < 2 || p.ExecutorMaxConcurrency > 1000 {
		panic(fmt.Sprintf("batchwork: executorMaxConcurrency %d: must be between 2 and 1000", p.ExecutorMaxConcurrency))
	}
	p = withCapacity(p)        // capacity.go
	p = withOwnerProtection(p) // ownerdefaults.go
	limits, err := control.ParseOwnerLimits(p.OwnerMaxConcurrency)
	if err != nil {
		panic("batchwork: ownerMaxConcurrency: " + err.Error())
	}
	// The canonical form: equal limits synthesize equal templates.
	p.OwnerMaxConcurrency = limits.String()
	if _, err := principal.ParseMode(p.OwnerMode); err != nil {
		panic("batchwork: ownerMode: " + err.Error())
	}
	checkRemoteExecutors(p.RemoteExecutorRoleArns)
	buckets, err := control.ParseInputBuckets(strings.Join(p.InputBuckets, ","))
	if err != nil {
		panic("batchwork: inputBuckets: " + err.Error())
	}
	p.InputBuckets = buckets
	if p.OutputBuckets, err = control.ParseInputBuckets(strings.Join(p.OutputBuckets, ",")); err != nil {
		panic("batchwork: outputBuckets: " + err.Error())
	}
	if p.TaskFunctions, err = control.ParseTaskFunctions(strings.Join(p.TaskFunctions, ",")); err != nil {
		panic("batchwork: taskFunctions: " + err.Error())
	}
	if p.ExecPrograms, err = control.ParsePrograms(strings.Join(p.ExecPrograms, ",")); err != nil {
		panic("batchwork: execPrograms: " + err.Error())
	}
	for _, arn := range p.TaskFunctionRoleArns {
		if err := CheckRoleArn(arn); err != nil {
			panic("batchwork: taskFunctionRoleArns: " + err.Error())
		}
	}
	if _, err := lambdaenv.QuotasFromEnv(func(k string) string { return admissionEnv(p)[k] }); err != nil {
		panic("batchwork: " + err.Error())
	}
	return p
}

// admissionEnv is the environment that carries Props' owner mode, quotas
// and priority allowlist; empty settings are left out, so a stack without
// them synthesizes as before.
func admissionEnv(p Props) map[string]string {
	env := map[string]string{}
	for k, v := range map[string]string{
		lambdaenv.EnvOwnerMode: p.OwnerMode, lambdaenv.EnvOwnerMaxActiveJobs: p.MaxActiveJobs,
		lambdaenv.EnvOwnerMaxTasks: p.MaxTasks, lambdaenv.EnvOwnerMaxSchedules: p.MaxSchedules,
		lambdaenv.EnvHighPriorityOwners: p.HighPriorityOwners,
		lambdaenv.EnvInputBuckets:       strings.Join(p.InputBuckets, ","),
		lambdaenv.EnvOutputBuckets:      strings.Join(p.OutputBuckets, ","),
		lambdaenv.EnvTaskFunctions:      strings.Join(p.TaskFunctions, ","),
		lambdaenv.EnvExecPrograms:       strings.Join(p.ExecPrograms, ","),
		lambdaenv.EnvExecutorSizes:      executorSizesEnv(p), // executorsizes.go
	} {
		if v != "" {
			env[k] = v
		}
	}
	return env
}

func seconds(d time.Duration) awscdk.Duration {
	return awscdk.Duration_Seconds(jsii.Number(d.Seconds()))
}

// data creates the table, bucket and queues: everything the local runner
// also deploys from the synthesized template (shared/provision).
func (b *Batchwork) data(c constructs.Construct, p Props) {
	s := dynamo.Schema
	b.Table = awsdynamodb.NewTable(c, jsii.String("State"), &awsdynamodb.TableProps{
		PartitionKey: &awsdynamodb.Attribute{Name: jsii.String(s.PartitionKey), Type: awsdynamodb.AttributeType_STRING},
		SortKey:      &awsdynamodb.Attribute{Name: jsii.String(s.SortKey), Type: awsdynamodb.AttributeType_STRING},
		BillingMode:  awsdynamodb.BillingMode_PAY_PER_REQUEST,
		// Pre-warmed for the operator's peak: on-demand otherwise throttles
		// traffic above twice the table's previous peak.
		WarmThroughput: tableWarmThroughput(p), // capacity.go
		PointInTimeRecoverySpecification: &awsdynamodb.PointInTimeRecoverySpecification{
			PointInTimeRecoveryEnabled: jsii.Bool(true),
		},
		TimeToLiveAttribute: jsii.String(s.TTL),
		// Job history outlives a stack: destroy keeps the table.
		RemovalPolicy: awscdk.RemovalPolicy_RETAIN,
	})
	b.Table.AddGlobalSecondaryIndex(&awsdynamodb.GlobalSecondaryIndexProps{
		IndexName:      jsii.String(s.DueIndex),
		PartitionKey:   &awsdynamodb.Attribute{Name: jsii.String(s.DueShard), Type: awsdynamodb.AttributeType_STRING},
		SortKey:        &awsdynamodb.Attribute{Name: jsii.String(s.Due), Type: awsdynamodb.AttributeType_NUMBER},
		ProjectionType: awsdynamodb.ProjectionType_KEYS_ONLY,
	})

	b.AccessLogs = accessLogBucket(c)
	b.Bucket = awss3.NewBucket(c, jsii.String("Data"), &awss3.BucketProps{
		BlockPublicAccess: awss3.BlockPublicAccess_BLOCK_ALL(),
		Encryption:        awss3.BucketEncryption_S3_MANAGED,
		EnforceSSL:        jsii.Bool(true),
		ObjectOwnership:   awss3.ObjectOwnership_BUCKET_OWNER_ENFORCED,
		LifecycleRules: &[]*awss3.LifecycleRule{
			{
				// Outputs of attempts that ended without committing (failed,
				// fenced, or taken over after a lost lease) are tagged by the
				// control plane (blob.MarkUncommitted) and expire here.
				Id:         jsii.String("expire-uncommitted-attempt-outputs"),
				Prefix:     jsii.String("jobs/"),
				TagFilters: &map[string]interface{}{tuning.UncommittedTagKey: tuning.UncommittedTagValue},
				Expiration: seconds(tuning.UncommittedOutputExpiry),
			},
			{
				Id:                                  jsii.String("abort-incomplete-uploads"),
				AbortIncompleteMultipartUploadAfter: awscdk.Duration_Days(jsii.Number(1)),
			},
		},
		RemovalPolicy:          awscdk.RemovalPolicy_RETAIN,
		ServerAccessLogsBucket: b.AccessLogs,
		ServerAccessLogsPrefix: jsii.String(accessLogPrefix),
	})
	b.retain(p) // retention.go
	// Published objects never change, whoever writes them: under jobs/,
	// a write that creates an object (PutObject, CompleteMultipartUpload,
	// CopyObject) must carry If-None-Match, so it can only create. The
	// steps of a multipart upload that cannot carry the header
	// (s3:ObjectCreationOperation false) stay allowed, and its completion
	// must carry it. (AWS: "Enforce conditional writes on Amazon S3
	// buckets".) Every write of the code is checked against this statement
	// (integration/writeonce_test.go).
	b.Bucket.AddToResourcePolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
		Effect:     awsiam.Effect_DENY,
		Principals: &[]awsiam.IPrincipal{awsiam.NewAnyPrincipal()},
		Actions:    jsii.Strings(objectWriteActions...),
		Resources:  &[]*string{b.Bucket.ArnForObjects(jsii.String(jobKeys))},
		Conditions: &map[string]any{
			"Null": map[string]any{"s3:if-none-match": "true"},
			"Bool": map[string]any{"s3:ObjectCreationOperation": "true"},
		},
	}))

	b.DeadLetters = awssqs.NewQueue(c, jsii.String("DeadLetters"), &awssqs.QueueProps{
		Encryption:      awssqs.QueueEncryption_SQS_MANAGED,
		EnforceSSL:      jsii.Bool(true),
		RetentionPeriod: seconds(tuning.DLQRetention),
	})
	ready := func(id string) awssqs.Queue {
		return awssqs.NewQueue(c, jsii.String(id), &awssqs.QueueProps{
			Encryption:        awssqs.QueueEncryption_SQS_MANAGED,
			EnforceSSL:        jsii.Bool(true),
			VisibilityTimeout: seconds(tuning.QueueVisibilityFor(p.ExecutorTimeout)),
			DeadLetterQueue: &awssqs.DeadLetterQueue{
				Queue:           b.DeadLetters,
				MaxReceiveCount: jsii.Number(tuning.MaxReceiveCount),
			},
		})
	}
	b.High, b.Normal, b.Low = ready("ReadyHigh"), ready("ReadyNormal"), ready("ReadyLow")
	b.sizedReadyQueues(p, ready) // executorsizes.go
	// The timer queue's visibility is the sweep's timeout (Lambda's event
	// source mapping requires at least that): a firing the consumer failed
	// comes back a minute later, and the sweep's own firing covers it
	// meanwhile.
	b.Timer = awssqs.NewQueue(c, jsii.String("Timer"), &awssqs.QueueProps{
		Encryption:        awssqs.QueueEncryption_SQS_MANAGED,
		EnforceSSL:        jsii.Bool(true),
		VisibilityTimeout: seconds(tuning.SweepTimeout),
		DeadLetterQueue: &awssqs.DeadLetterQueue{
			Queue:           b.DeadLetters,
			MaxReceiveCount: jsii.Number(tuning.MaxReceiveCount),
		},
	})
}

func (b *Batchwork) readyQueues() []awssqs.Queue { return []awssqs.Queue{b.High, b.Normal, b.Low} }

// ownerLimited are the functions that take or free owner concurrency
// slots: claiming (claim, executor), ending attempts (commit, executor)
// and expiring leases (sweep). The api function does none of these.
var ownerLimited = map[string]bool{FnClaim: true, FnCommit: true, FnSweep: true, FnExecutor: true}

// environment is a function's configuration (shared/lambdaenv); only the
// sweep and the api know the timer queue (the sweep hands off and
// consumes firings, the api hands off the start of a job submitted to
// start within the handoff window), and only the functions that take or
// free slots know the owner limits.
func (b *Batchwork) environment(name string) *map[string]*string {
	env := map[string]*string{
		lambdaenv.EnvTable:       b.Table.TableName(),
		lambdaenv.EnvBucket:      b.Bucket.BucketName(),
		lambdaenv.EnvQueueHigh:   b.High.QueueUrl(),
		lambdaenv.EnvQueueNormal: b.Normal.QueueUrl(),
		lambdaenv.EnvQueueLow:    b.Low.QueueUrl(),
		lambdaenv.EnvDLQ:         b.DeadLetters.QueueUrl(),
		// Batchwork's own metrics, by stack (internal/metrics).
		metrics.EnvStack: awscdk.Stack_Of(b.Construct).StackName(),
	}
	if permissions[name].timer {
		env[lambdaenv.EnvQueueTimer] = b.Timer.QueueUrl()
	}
	if sized := b.sizedQueuesEnv(); sized != nil && permissions[name].send { // executorsizes.go
		env[lambdaenv.EnvQueueSized] = sized
	}
	b.retentionEnv(env)           // retention.go: whatever ends a job
	for k, v := range b.tracing { // tracing.go
		env[k] = jsii.String(v)
	}
	if permissions[name].events {
		env[lambdaenv.EnvEventBus] = b.eventBusName() // events.go
		for k, v := range b.lineage {                 // lineage.go
			env[k] = jsii.String(v)
		}
	}
	if b.ownerLimits != "" && ownerLimited[name] {
		env[lambdaenv.EnvOwnerMaxConcurrency] = jsii.String(b.ownerLimits)
	}
	if name == FnAPI || name == FnSweep {
		for k, v := range b.admission {
			if k != lambdaenv.EnvOwnerMode || name == FnAPI { // only the api maps principals
				env[k] = jsii.String(v)
			}
		}
	}
	return &env
}

func (b *Batchwork) functions(c constructs.Construct, p Props) {
	timeouts := map[string]time.Duration{
		FnAPI: tuning.APITimeout, FnClaim: tuning.ControlTimeout, FnCommit: tuning.ControlTimeout,
		FnSweep: tuning.SweepTimeout, FnExecutor: p.ExecutorTimeout,
	}
	memory := map[string]float64{FnAPI: 256, FnClaim: 256, FnCommit: 256, FnSweep: 256, FnExecutor: tuning.ExecutorMemoryMB}
	for _, name := range functionNames(p) {
		fn := b.lambdaFunction(c, p, name, titles[name], memory[name], timeouts[name])
		b.Functions[name] = fn
		if name == FnClaim || name == FnCommit {
			allowRemoteExecutors(fn, p.RemoteExecutorRoleArns)
		}
	}
	b.sizedExecutors(c, p) // executorsizes.go
}

// lambdaFunction creates the function of kind name (its code, environment
// and grants) under construct id. Each function has its own role and log
// group, so its policy is exactly its grants plus writing its own logs
// (no managed policy).
func (b *Batchwork) lambdaFunction(c constructs.Construct, p Props, name, id string, memoryMB float64, timeout time.Duration) awslambda.Function {
	role := awsiam.NewRole(c, jsii.String(id+"Role"), &awsiam.RoleProps{
		AssumedBy:   awsiam.NewServicePrincipal(jsii.String("lambda.amazonaws.com"), nil),
		Description: jsii.String("Batchwork " + name + " function"),
	})
	logs := awslogs.NewLogGroup(c, jsii.String(id+"Logs"), &awslogs.LogGroupProps{
		Retention:     logRetention,
		RemovalPolicy: awscdk.RemovalPolicy_DESTROY,
	})
	logs.GrantWrite(role)
	fn := awslambda.NewFunction(c, jsii.String(id), &awslambda.FunctionProps{
		Runtime:       awslambda.Runtime_PROVIDED_AL2023(),
		Architecture:  awslambda.Architecture_ARM_64(),
		Handler:       jsii.String("bootstrap"),
		Code:          b.functionCode(p, name), // build.go
		Role:          role,
		LogGroup:      logs,
		LoggingFormat: awslambda.LoggingFormat_JSON,
		Timeout:       seconds(timeout),
		MemorySize:    jsii.Number(memoryMB),
		Environment:   b.environment(name),
		Description:   jsii.String("Batchwork " + name),
		// capacity.go
		ReservedConcurrentExecutions: reservedConcurrency(p, name),
	})
	b.grant(fn, permissions[name])
	return fn
}

// logRetention is how long the functions', the Fargate executors' and
// the VPC flow logs' groups keep their lines; every log group is deleted
// with the stack. (The API's access logs are kept three months.)
const logRetention = awslogs.RetentionDays_ONE_MONTH

var titles = map[string]string{FnAPI: "Api", FnClaim: "Claim", FnCommit: "Commit", FnSweep: "Sweep", FnExecutor: "Executor"}

// grant gives a principal the action sets g names, on this installation's
// resources only.
func (b *Batchwork) grant(to awsiam.IGrantable, g grantSet) {
	if g.table {
		// On the table only: Table.Grant would add index/* as well.
		actions := append([]string(nil), tableActions...)
		if g.batchRead {
			actions = append(actions, batchReadActions...)
		}
		if g.insert {
			actions = append(actions, insertActions...)
		}
		if g.commit {
			actions = append(actions, commitActions...)
		}
		if g.delete || g.events { // a publisher deletes what it published (events.go)
			actions = append(actions, deleteActions...)
		}
		awsiam.Grant_AddToPrincipal(&awsiam.GrantOnPrincipalOptions{Grantee: to, Actions: jsii.Strings(actions...), ResourceArns: &[]*string{b.Table.TableArn()}})
	}
	if g.index {
		index := jsii.String(*b.Table.TableArn() + "/index/" + dynamo.Schema.DueIndex)
		awsiam.Grant_AddToPrincipal(&awsiam.GrantOnPrincipalOptions{Grantee: to, Actions: jsii.Strings(indexActions...), ResourceArns: &[]*string{index}})
	}
	jobObjects := []*string{b.Bucket.ArnForObjects(jsii.String(jobKeys))}
	if g.write || g.tag || g.deleteObjects {
		b.jobAreaWriters = append(b.jobAreaWriters, to)
	}
	reads := []*string{}
	if g.read {
		reads = append(reads, jobObjects...)
	}
	if g.readInputs {
		// A published folder is read as an input.
		reads = append(reads, b.Bucket.ArnForObjects(jsii.String(outputKeys)))
		reads = append(reads, b.Bucket.ArnForObjects(jsii.String(inputKeys)))
		for _, in := range b.inputBuckets {
			reads = append(reads, jsii.String(inputBucketArn(in)+"/*"))
		}
	}
	if g.publish {
		// A publisher reads folders' claims and success markers only.
		if !g.readInputs {
			for _, m := range publishMarkers {
				reads = append(reads, b.Bucket.ArnForObjects(jsii.String(m)))
			}
		}
		for _, out := range b.outputBuckets {
			for _, m := range publishMarkers {
				reads = append(reads, jsii.String(inputBucketArn(out)+"/"+strings.TrimPrefix(m, blob.OutputsArea)))
			}
		}
	}
	if len(reads) > 0 {
		awsiam.Grant_AddToPrincipal(&awsiam.GrantOnPrincipalOptions{Grantee: to, Actions: jsii.Strings(objectReadActions...), ResourceArns: &reads})
	}
	if g.readInputs {
		b.grantVersionReads(to) // versionpin.go
	}
	if g.write {
		awsiam.Grant_AddToPrincipal(&awsiam.GrantOnPrincipalOptions{Grantee: to, Actions: jsii.Strings(objectWriteActions...), ResourceArns: &jobObjects})
	}
	if g.tag {
		awsiam.Grant_AddToPrincipal(&awsiam.GrantOnPrincipalOptions{Grantee: to, Actions: jsii.Strings(tagActions...), ResourceArns: &jobObjects})
	}
	if g.deleteObjects {
		awsiam.Grant_AddToPrincipal(&awsiam.GrantOnPrincipalOptions{Grantee: to, Actions: jsii.Strings(objectDeleteActions...), ResourceArns: &jobObjects})
	}
	if g.abort {
		awsiam.Grant_AddToPrincipal(&awsiam.GrantOnPrincipalOptions{Grantee: to, Actions: jsii.Strings(abortActions...), ResourceArns: &jobObjects})
	}
	if g.invoke && len(b.taskFunctions) > 0 {
		arns := taskFunctionArns(b.taskFunctions) // taskfunctions.go
		awsiam.Grant_AddToPrincipal(&awsiam.GrantOnPrincipalOptions{Grantee: to, Actions: jsii.Strings(invokeActions...), ResourceArns: &arns})
	}
	if g.publish {
		outs := []*string{b.Bucket.ArnForObjects(jsii.String(outputKeys))}
		for _, out := range b.outputBuckets {
			outs = append(outs, jsii.String(inputBucketArn(out)+"/*"))
		}
		awsiam.Grant_AddToPrincipal(&awsiam.GrantOnPrincipalOptions{Grantee: to, Actions: jsii.Strings(objectWriteActions...), ResourceArns: &outs})
	}
	// Listing the data bucket is limited by prefix to the areas the
	// function reads (s3:prefix; every listing of the code names a prefix
	// within one); an allowed input bucket is the operator's to share
	// whole.
	var prefixes []string
	if g.list {
		prefixes = append(prefixes, jobKeys)
	}
	if g.listInputs {
		prefixes = append(prefixes, inputKeys)
	}
	if g.listInputs || g.publish {
		prefixes = append(prefixes, outputKeys)
	}
	if len(prefixes) > 0 {
		to.GrantPrincipal().AddToPrincipalPolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
			Actions: jsii.Strings(listActions...), Resources: &[]*string{b.Bucket.BucketArn()},
			Conditions: &map[string]any{"StringLike": map[string]any{"s3:prefix": prefixes}},
		}))
	}
	var listed []*string
	if g.listInputs {
		for _, in := range b.inputBuckets {
			listed = append(listed, jsii.String(inputBucketArn(in)))
		}
	}
	if g.publish {
		for _, out := range b.outputBuckets {
			if !slices.Contains(b.inputBuckets, out) || !g.listInputs {
				listed = append(listed, jsii.String(inputBucketArn(out)))
			}
		}
	}
	if len(listed) > 0 {
		awsiam.Grant_AddToPrincipal(&awsiam.GrantOnPrincipalOptions{Grantee: to, Actions: jsii.Strings(listActions...), ResourceArns: &listed})
	}
	if g.listInputs {
		b.grantVersionListing(to) // versionpin.go
	}
	if g.send {
		b.grantSizedSend(to) // executorsizes.go: a task goes to its size's queue
	}
	for _, q := range b.readyQueues() {
		if g.send {
			q.Grant(to, *jsii.Strings(sendActions...)...)
		}
		if g.visibility {
			q.Grant(to, *jsii.Strings(visibilityActions...)...)
		}
	}
	if g.drain {
		b.DeadLetters.Grant(to, *jsii.Strings(drainActions...)...)
		// Moving a dead letter back sends it to its ready queue.
	}
	if g.timer {
		b.Timer.Grant(to, *jsii.Strings(timerActions...)...)
	}
	if g.events {
		b.grantEvents(to) // events.go
	}
}

// inputBucketArn is the ARN of an allowed input bucket, in the stack's
// partition.
func inputBucketArn(name string) string {
	return "arn:" + *awscdk.Aws_PARTITION() + ":s3:::" + name
}

// confineJobArea lets only the installation change the job area: every
// other principal is denied writing, tagging or deleting objects under
// jobs/, whatever its own IAM policy allows. If-None-Match (see data)
// stops overwrites, not first writes: without this, a user granted
// s3:PutObject on the bucket could create a plan of a stage of its own job
// that names another owner's inputs, or an output of an attempt yet to
// run, which the code would take for its own. The principals exempted are
// the roles granted to write or tag there (the functions', the Fargate
// executor's; see grant) and the remote executors' roles, which write
// their attempts' outputs. Users upload to the inputs area only
// (docs/security.md).
func (b *Batchwork) confineJobArea(p Props) {
	var arns []*string
	for _, w := range b.jobAreaWriters {
		role, ok := w.GrantPrincipal().(awsiam.IRole)
		if !ok {
			panic(fmt.Sprintf("batchwork: a job-area writer's principal %v is not a role", w.GrantPrincipal()))
		}
		arns = append(arns, role.RoleArn())
	}
	for _, arn := range p.RemoteExecutorRoleArns {
		arns = append(arns, jsii.String(arn))
	}
	for _, arn := range p.TaskFunctionRoleArns { // taskfunctions.go
		arns = append(arns, jsii.String(arn))
	}
	b.Bucket.AddToResourcePolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
		Effect:     awsiam.Effect_DENY,
		Principals: &[]awsiam.IPrincipal{awsiam.NewAnyPrincipal()},
		Actions:    jsii.Strings("s3:DeleteObject", "s3:PutObject", "s3:PutObjectTagging"),
		Resources:  &[]*string{b.Bucket.ArnForObjects(jsii.String(jobKeys))},
		Conditions: &map[string]any{"ArnNotEquals": map[string]any{"aws:PrincipalArn": arns}},
	}))
}

// api is the HTTP API: IAM authorization on every route; the caller's
// principal is the job owner.
func (b *Batchwork) api(c constructs.Construct, p Props) {
	integration := awsapigatewayv2integrations.NewHttpLambdaIntegration(jsii.String("ApiIntegration"), b.Functions[FnAPI], nil)
	b.API = awsapigatewayv2.NewHttpApi(c, jsii.String("Http"), &awsapigatewayv2.HttpApiProps{
		Description:        jsii.String("Batchwork API (IAM-authorized)"),
		DefaultAuthorizer:  awsapigatewayv2authorizers.NewHttpIamAuthorizer(),
		CreateDefaultStage: jsii.Bool(false),
	})
	accessLogs := awslogs.NewLogGroup(c, jsii.String("ApiAccessLogs"), &awslogs.LogGroupProps{
		Retention:     awslogs.RetentionDays_THREE_MONTHS,
		RemovalPolicy: awscdk.RemovalPolicy_DESTROY,
	})
	b.API.AddStage(jsii.String("DefaultStage"), &awsapigatewayv2.HttpStageOptions{
		StageName:  jsii.String("$default"),
		AutoDeploy: jsii.Bool(true),
		AccessLogSettings: &accessLogSettings{
			dest: awsapigatewayv2.NewLogGroupLogDestination(accessLogs),
			format: awsapigateway.AccessLogFormat_Custom(jsii.String(
				`{"requestId":"$context.requestId","ip":"$context.identity.sourceIp","caller":"$context.identity.userArn",` +
					`"requestTime":"$context.requestTime","routeKey":"$context.routeKey","status":"$context.status",` +
					`"responseLength":"$context.responseLength","integrationError":"$context.integrationErrorMessage"}`)),
		},
		Throttle: apiThrottle(p), // capacity.go
	})
	for _, r := range APIRoutes {
		b.API.AddRoutes(&awsapigatewayv2.AddRoutesOptions{
			Path:        jsii.String(r.Path),
			Methods:     &[]awsapigatewayv2.HttpMethod{r.Method},
			Integration: integration,
		})
	}
}

// Route is one API route.
type Route struct {
	Method awsapigatewayv2.HttpMethod
	Path   string
}

// APIRoutes send every path to the api function, which answers 404 for
// what it does not serve: the API's surface is defined once, in
// shared/api. Each route is IAM-authorized through the default authorizer.
var APIRoutes = []Route{
	{awsapigatewayv2.HttpMethod_ANY, "/jobs"},
	{awsapigatewayv2.HttpMethod_ANY, "/{proxy+}"},
}

// accessLogSettings implements awsapigatewayv2.IAccessLogSettings.
type accessLogSettings struct {
	dest   awsapigatewayv2.IAccessLogDestination
	format awsapigateway.AccessLogFormat
}

func (a *accessLogSettings) Destination() awsapigatewayv2.IAccessLogDestination { return a.dest }
func (a *accessLogSettings) Format() awsapigateway.AccessLogFormat              { return a.format }

func (b *Batchwork) schedule(c constructs.Construct, p Props) {
	awsevents.NewRule(c, jsii.String("SweepSchedule"), &awsevents.RuleProps{
		Description: jsii.String("Runs the Batchwork sweep"),
		Schedule:    awsevents.Schedule_Expression(jsii.String(p.SweepSchedule)),
		Targets:     &[]awsevents.IRuleTarget{awseventstargets.NewLambdaFunction(b.Functions[FnSweep], nil)},
	})
	// Handed-off firings arrive tuning.TimerLead before their time and
	// wait in the invocation for it, so a short batching window costs no
	// lateness and gathers a burst into few invocations.
	b.eventSource(FnSweep, b.Timer, &awslambda.EventSourceMappingOptions{
		BatchSize:         jsii.Number(tuning.TimerBatchSize),
		MaxBatchingWindow: seconds(tuning.TimerBatchWindow),
	})
}

// eventSource subscribes a function to a queue with partial batch
// responses, as CDK's SqsEventSource does, but grants the function's role
// only the actions Lambda's poller needs (eventSourceActions) instead of
// SqsEventSource's grantConsumeMessages. The mapping keeps
// SqsEventSource's construct id, and so its logical id.
func (b *Batchwork) eventSource(fn string, q awssqs.Queue, o *awslambda.EventSourceMappingOptions) {
	o.EventSourceArn = q.QueueArn()
	o.ReportBatchItemFailures = jsii.Bool(true)
	f := b.Functions[fn]
	f.AddEventSourceMapping(jsii.String("SqsEventSource:"+*awscdk.Names_NodeUniqueId(q.Node())), o)
	q.Grant(f, *jsii.Strings(eventSourceActions...)...)
}

// lambdaExecutor subscribes the executor to every ready queue. The
// mapping deletes the messages the handler does not report as failures
// and needs to receive them (eventSource grants that with the mapping).
func (b *Batchwork) lambdaExecutor(p Props) {
	if p.Executor == ExecutorFargate {
		return
	}
	for _, q := range b.readyQueues() {
		b.eventSource(FnExecutor, q, &awslambda.EventSourceMappingOptions{
			BatchSize:      jsii.Number(tuning.ExecutorBatchSize),
			MaxConcurrency: jsii.Number(float64(p.ExecutorMaxConcurrency)),
		})
	}
}

func (b *Batchwork) outputs(c constructs.Construct, p Props) {
	out := func(key string, value *string, desc string) {
		o := awscdk.NewCfnOutput(c, jsii.String(key), &awscdk.CfnOutputProps{Value: value, Description: jsii.String(desc)})
		o.OverrideLogicalId(jsii.String(p.OutputPrefix + key))
	}
	out(template.OutAPI, b.API.ApiEndpoint(), "Batchwork API URL (IAM-authorized)")
	out(template.OutTable, b.Table.TableName(), "State table")
	out(template.OutBucket, b.Bucket.BucketName(), "Data bucket (inputs, outputs, manifests)")
	out(template.OutQueueHigh, b.High.QueueUrl(), "Ready queue, high priority")
	out(template.OutQueueNormal, b.Normal.QueueUrl(), "Ready queue, normal priority")
	out(template.OutQueueLow, b.Low.QueueUrl(), "Ready queue, low priority")
	out(template.OutDLQ, b.DeadLetters.QueueUrl(), "Dead-letter queue")
	out(template.OutTimerQueue, b.Timer.QueueUrl(), "Schedule timer queue (firings handed off by the sweep)")
	b.sizedQueueOutputs(out) // executorsizes.go
	out(template.OutEventBus, b.eventBusName(), "EventBridge bus of Batchwork's events (source batchwork)")
}
