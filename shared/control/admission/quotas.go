package admission

import (
	"context"
	"fmt"
	"strings"

	"github.com/batchwork/batchwork/shared/control/kernel"
	"github.com/batchwork/batchwork/shared/dynamo"
	"github.com/batchwork/batchwork/shared/spec"
)

// Quotas are an operator's admission limits per owner, so no one owner can
// fill the installation: jobs running at once, tasks those jobs declare,
// and schedules. Each is owner=limit entries (kernel.ParseOwnerLimits's format,
// 0 = no limit). An owner cannot raise its own.
type Quotas struct {
	ActiveJobs kernel.OwnerLimits
	// Tasks counts the tasks a job plans, while it runs: at submit a
	// stage's count, its upstream shuffle's partitions, and one task for a
	// stage over an input prefix; when that stage is planned, its number
	// of splits in place of the one (chargePlan); and the tasks each
	// dynamic split adds. A plan or a split that would pass the quota
	// fails the job or is refused.
	Tasks     kernel.OwnerLimits
	Schedules kernel.OwnerLimits
	// HighPriority lists the owners that may use priority "high" ("*":
	// every owner). Empty: every owner, as before quotas existed.
	HighPriority []string
}

// mayUseHigh says whether owner may give a job priority "high".
func (q Quotas) mayUseHigh(owner string) bool {
	if len(q.HighPriority) == 0 {
		return true
	}
	for _, o := range q.HighPriority {
		if o == "*" || o == owner {
			return true
		}
	}
	return false
}

// ParseHighPriorityOwners reads the owners allowed priority "high":
// entries separated by commas or whitespace, "*" for every owner.
func ParseHighPriorityOwners(s string) []string {
	return strings.FieldsFunc(s, func(r rune) bool { return r == ',' || r == ' ' || r == '\t' || r == '\n' })
}

// checkPriority refuses a spec that asks for priority "high" on behalf of
// an owner the operator has not allowed it.
func (s *Admitter) checkPriority(owner string, sp *spec.Job) error {
	if s.cfg.Quotas.mayUseHigh(owner) {
		return nil
	}
	if sp.Priority == spec.PriorityHigh {
		return &spec.FieldError{Field: "priority", Message: `"high" is reserved by the operator; use "normal" or "low"`}
	}
	for i, st := range sp.Stages {
		if st.Priority == spec.PriorityHigh {
			return &spec.FieldError{Field: fmt.Sprintf("stages[%d].priority", i), Message: `"high" is reserved by the operator; use "normal" or "low"`}
		}
	}
	return nil
}

// JobQuota is the job quotas owner's job of spec sp is written under
// (dynamo.CreateJobParams.Quota), or nil when the owner has none: a
// submission's, and a redriven job's, which counts again.
func (s *Admitter) JobQuota(owner string, sp *spec.Job) *dynamo.JobQuota {
	q := s.cfg.Quotas
	maxJobs, maxTasks := q.ActiveJobs.For(owner), q.Tasks.For(owner)
	if maxJobs == 0 && maxTasks == 0 {
		return nil
	}
	return &dynamo.JobQuota{Tasks: declaredTasks(sp), MaxJobs: maxJobs, MaxTasks: maxTasks}
}

// QuotaError says which of an owner's job quotas refused a job
// (dynamo.ErrQuotaReached), from its counters: the transaction only says
// one did.
func (s *Admitter) QuotaError(ctx context.Context, owner string, q *dynamo.JobQuota) error {
	e := &kernel.QuotaError{Quota: "active jobs", Max: q.MaxJobs}
	if use, err := s.store.OwnerQuotaUse(ctx, owner); err == nil && (q.MaxJobs == 0 || use.ActiveJobs < q.MaxJobs) {
		e = &kernel.QuotaError{Quota: "tasks", Max: q.MaxTasks}
	}
	return e
}

// declaredTasks is how many tasks a spec declares before any planning.
func declaredTasks(sp *spec.Job) int {
	n := 0
	for i, st := range sp.Stages {
		switch src, ok := sp.ShuffleSource(i); {
		case ok:
			n += sp.Stages[src].Shuffle.Partitions
		case st.Partitions.HasInput():
			n += len(st.Partitions.InputList()) // a split each, at least
		case st.Partitions != nil:
			n += st.Partitions.Count
		}
	}
	return n
}
