package lambdaenv

// The environment variables FromEnv reads. The CDK construct
// (infra/batchwork) sets exactly these on every function; names_test.go
// proves FromEnv needs no other.
const (
	EnvTable       = "BATCHWORK_TABLE"
	EnvBucket      = "BATCHWORK_BUCKET"
	EnvQueueHigh   = "BATCHWORK_QUEUE_HIGH"
	EnvQueueNormal = "BATCHWORK_QUEUE_NORMAL"
	EnvQueueLow    = "BATCHWORK_QUEUE_LOW"
	EnvDLQ         = "BATCHWORK_DLQ"
	// EnvQueueTimer is set on the sweep function, which hands schedule
	// firings to the timer queue and consumes it, and on the api
	// function, which hands it the start of a job submitted to start
	// within the handoff window; it is optional, so FromEnv does not
	// require it.
	EnvQueueTimer = "BATCHWORK_QUEUE_TIMER"
	// EnvOwnerMaxConcurrency is the owners' concurrency limits
	// (control.ParseOwnerLimits, e.g. "*=200,arn:aws:iam::123456789012:role/etl=10"),
	// set on the functions that claim, commit, fail or sweep when the
	// stack has owner limits; optional (unset: no owner limits).
	EnvOwnerMaxConcurrency = "BATCHWORK_OWNER_MAX_CONCURRENCY"
	// EnvOwnerMode is how the api function maps an IAM principal to its
	// owner (principal.ParseMode: "role", the default, or "session");
	// optional.
	EnvOwnerMode = "BATCHWORK_OWNER_MODE"
	// The owners' quotas (control.Quotas), in the owner limits' format;
	// optional. They are read by the functions that submit (api, sweep).
	EnvOwnerMaxActiveJobs = "BATCHWORK_OWNER_MAX_ACTIVE_JOBS"
	EnvOwnerMaxTasks      = "BATCHWORK_OWNER_MAX_TASKS"
	EnvOwnerMaxSchedules  = "BATCHWORK_OWNER_MAX_SCHEDULES"
	// EnvHighPriorityOwners lists the owners allowed priority "high"
	// ("*": all; unset: all); optional.
	EnvHighPriorityOwners = "BATCHWORK_HIGH_PRIORITY_OWNERS"
	// EnvInputBuckets lists the buckets besides the data bucket that a
	// spec may read inputs from (control.ParseInputBuckets: names separated
	// by commas); optional (unset: the data bucket only). Read by the
	// functions that submit (api, sweep).
	EnvInputBuckets = "BATCHWORK_INPUT_BUCKETS"
	// EnvTaskFunctions lists the Lambda functions (names or ARNs) that a
	// spec's lambda stages may invoke (control.ParseTaskFunctions: entries
	// separated by commas); optional (unset: none). Read by the functions
	// that submit (api, sweep); the construct sets it from TaskFunctions,
	// the functions the executor roles may invoke.
	EnvTaskFunctions = "BATCHWORK_TASK_FUNCTIONS"
	// EnvOutputBuckets lists the buckets besides the data bucket that a
	// job may publish its outputs to, each owner under its own key
	// (control.Config.OutputBuckets; same format as EnvInputBuckets);
	// optional (unset: each owner's outputs area only). Read by the
	// functions that submit (api, sweep).
	EnvOutputBuckets = "BATCHWORK_OUTPUT_BUCKETS"
	// EnvTaskNames lists task names known without being published
	// (control.ParseTaskNames: names separated by commas, e.g.
	// "wordcount.map,wordcount.reduce"): the construct sets it at deploy
	// to the names the user's Lambda executor registers, so a submit can
	// name them before that executor has ever run. Executors publish their
	// own names when they start (control.PublishTaskNames), so it is
	// optional; read by the functions that submit (api, sweep), which
	// reject a stage whose task is neither listed nor published.
	EnvTaskNames = "BATCHWORK_TASK_NAMES"
	// EnvExecPrograms lists exec programs known without being published
	// (control.ParsePrograms: names separated by commas, e.g.
	// "wordcount.py"): the construct sets it at deploy to the programs
	// its Fargate image installs (Props.ExecPrograms), so a submit can
	// name them before that service has ever run (it scales from zero).
	// Executors with a programs directory publish theirs when they start
	// (control.PublishPrograms), so it is optional; read by the functions
	// that submit (api, sweep), which reject an exec stage whose program
	// is neither listed nor published.
	EnvExecPrograms = "BATCHWORK_EXEC_PROGRAMS"
	// EnvEventBus is the name of the EventBridge bus Batchwork puts its
	// events on (shared/events), set on the functions that publish them
	// (api, commit, sweep, executor) and the Fargate executor; optional
	// (unset: the process leaves its events in the outbox for one that
	// has it, the sweep).
	EnvEventBus = "BATCHWORK_EVENT_BUS"
)

// EnvNames lists the required variables.
var EnvNames = []string{EnvTable, EnvBucket, EnvQueueHigh, EnvQueueNormal, EnvQueueLow, EnvDLQ}
