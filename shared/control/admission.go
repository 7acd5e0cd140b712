package control

// Admission lives in admission; these names keep their callers'
// spelling.

import (
	"github.com/batchwork/batchwork/shared/control/admission"
	"github.com/batchwork/batchwork/shared/control/kernel"
	"github.com/batchwork/batchwork/shared/spec"
)

type (
	// SubmitRequest is a job submission (admission.SubmitRequest).
	SubmitRequest = admission.SubmitRequest
	// SubmitResult says which job a submission maps to.
	SubmitResult = admission.SubmitResult
	// Identity is who the caller is and where its inputs go.
	Identity = admission.Identity
	// Quotas are an operator's admission limits per owner.
	Quotas = admission.Quotas
	// UnknownTaskError refuses a spec naming a task or program no
	// executor runs.
	UnknownTaskError = admission.UnknownTaskError
	// QuotaError says which quota refused a submission or a schedule.
	QuotaError = kernel.QuotaError
)

const (
	// MaxIdempotencyKey bounds idempotency keys.
	MaxIdempotencyKey = admission.MaxIdempotencyKey
	// MaxOwner bounds owners.
	MaxOwner = admission.MaxOwner
	// TaskNamesTTL is how long a submitter trusts the catalog it read.
	TaskNamesTTL = admission.TaskNamesTTL
	// MaxPublishedNames bounds one executor's publication.
	MaxPublishedNames = admission.MaxPublishedNames
	// EnvTaskNamesHint and EnvExecProgramsHint name the deploy-time
	// lists in messages.
	EnvTaskNamesHint    = admission.EnvTaskNamesHint
	EnvExecProgramsHint = admission.EnvExecProgramsHint
)

var (
	// ErrQuota means an owner is at one of its quotas; nothing was written.
	ErrQuota = kernel.ErrQuota
	// ErrNoTaskCatalog is a publication to a service without a catalog.
	ErrNoTaskCatalog = admission.ErrNoTaskCatalog
	// ErrInvalidTaskNames is a publication refused for its names.
	ErrInvalidTaskNames = admission.ErrInvalidTaskNames
)

// ParseInputBuckets reads the operator's list of input buckets.
func ParseInputBuckets(s string) ([]string, error) { return admission.ParseInputBuckets(s) }

// ParseTaskNames reads a list of task names (BATCHWORK_TASK_NAMES).
func ParseTaskNames(s string) ([]string, error) { return admission.ParseTaskNames(s) }

// ParsePrograms reads a list of exec programs (BATCHWORK_EXEC_PROGRAMS).
func ParsePrograms(s string) ([]string, error) { return admission.ParsePrograms(s) }

// ParseTaskFunctions reads the Lambda functions lambda stages may invoke.
func ParseTaskFunctions(s string) ([]string, error) { return admission.ParseTaskFunctions(s) }

// ParseExecutorSizes reads a list of executor sizes ("1GiB,4GiB").
func ParseExecutorSizes(s string) ([]spec.Size, error) { return admission.ParseExecutorSizes(s) }

// ParseHighPriorityOwners reads the owners allowed priority "high".
func ParseHighPriorityOwners(s string) []string { return admission.ParseHighPriorityOwners(s) }
