package dynamo

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/batchwork/batchwork/shared/domain"
	sm "github.com/batchwork/batchwork/statemachine"
)

// Redrive (issue 13.9): the writes that reopen a FAILED job, its stages
// and its unfinished tasks (sm.JobRedrive, sm.StageRedrive,
// sm.StageRedriveBlocked, sm.TaskRedrive).
const (
	// aRedrives is, on a job item, the list of its redrives ({at, err}):
	// its length is the redrive count a request must name.
	aRedrives = "rdl"
	// aRerunOf is, on a job item, the job it reruns.
	aRerunOf = "rro"
	// aRedriveGen is, on a task item, the redrive (its count) whose steps
	// the task has had: a redrive's steps are repeated (its request's
	// retry, the sweep's look StartGrace after it) when its tasks may
	// already run again, and what a redriven task did since is the new
	// generation's, not for the same redrive to put back or raise again.
	aRedriveGen = "rdg"
	// aRedrivePending is, on a FAILED task item, the redrive that is to
	// put it back: written while the job is still FAILED, before its
	// count goes up, so that whoever reads the new count and then this
	// task still FAILED knows the failure is the ended generation's
	// (kernel.FailureGen).
	aRedrivePending = "rdp"
)

// redriveGenCond is the condition (" AND ...") that a task has not had
// the steps of redrive gen.
func redriveGenCond(c *cond, gen int) string {
	c.values[":gen"] = nv(int64(gen))
	return " AND (attribute_not_exists(" + aRedriveGen + ") OR " + aRedriveGen + " < :gen)"
}

func decodeRedrives(item map[string]types.AttributeValue) []domain.Redrive {
	l, ok := item[aRedrives].(*types.AttributeValueMemberL)
	if !ok {
		return nil
	}
	out := make([]domain.Redrive, 0, len(l.Value))
	for _, v := range l.Value {
		m, ok := v.(*types.AttributeValueMemberM)
		if !ok {
			continue
		}
		out = append(out, domain.Redrive{At: getT(m.Value, "at"), Error: getS(m.Value, "err")})
	}
	return out
}

// JobRedriveCount reads how many times the job was redriven, consistently:
// the generation a caller's decision about the job is about.
func (s *Store) JobRedriveCount(ctx context.Context, id string) (int, error) {
	head, err := s.jobHead(ctx, id)
	if err != nil {
		return 0, err
	}
	return head.Redrives, nil
}

// redriveCountCond is the condition (" AND ...") that a job item has
// been redriven n times.
func redriveCountCond(c *cond, n int) string {
	if n == 0 {
		return " AND attribute_not_exists(" + aRedrives + ")"
	}
	c.values[":cnt"] = nv(int64(n))
	return " AND size(" + aRedrives + ") = :cnt"
}

// RedriveJobParams reopens a FAILED job.
type RedriveJobParams struct {
	ID string
	// Count is the number of redrives the caller saw (len(Job.Redrives)):
	// the write applies only while it is still the job's, so a repeated
	// request never redrives twice (sm.GuardRedriveCount).
	Count int
	Now   time.Time
	// PrevError is the error the job failed with, kept in its redrive log.
	PrevError string
	// FollowUp puts the job in the sweep index then, for the sweep to
	// finish the redrive's steps should its caller not (and then to watch
	// its deadline, as for any running job).
	FollowUp time.Time
	// Quota, when set, is the owner's quota limits now (MaxJobs,
	// MaxTasks; Tasks: what the job declares, for a job that did not
	// count when it was submitted).
	Quota *JobQuota
}

// RedriveJob moves a FAILED job back to RUNNING (sm.JobRedrive) with
// everything its end changed, in one transaction: its owner's job index
// entry, its state copies (jobstate.go), its quota counts and its
// retention (its end's expiry is removed). The job counts in its owner's
// quotas again under the limits of p.Quota, as a submission would: its
// end gave its place back, and an owner at its limit must not get past
// it by redriving (ErrQuotaReached, nothing written). A job that did not
// count when submitted (no quotas then) counts from now on, with the
// tasks p.Quota says, so that its end counts it off.
// sm.ErrInvalidTransition: the job is not FAILED or its redrive count is
// not p.Count.
func (s *Store) JobRedrive(ctx context.Context, p RedriveJobParams) error {
	head, err := s.jobHead(ctx, p.ID)
	if err != nil {
		return fmt.Errorf("redrive job %s: %w", p.ID, err)
	}
	tr := sm.Jobs.Transition(sm.JobRedrive)
	c := newCond()
	expr := transition(c, tr)
	to(c, tr)
	// A job whose data or record its owner is deleting stays ended.
	expr += " AND attribute_not_exists(" + aDataDeleted + ") AND attribute_not_exists(" + aDeleting + ")"
	expr += redriveCountCond(c, p.Count) // sm.GuardRedriveCount
	c.values[":now"] = ms(p.Now)
	c.values[":empty"] = &types.AttributeValueMemberL{Value: []types.AttributeValue{}}
	c.values[":entry"] = &types.AttributeValueMemberL{Value: []types.AttributeValue{&types.AttributeValueMemberM{Value: map[string]types.AttributeValue{
		"at": ms(p.Now), "err": sv(p.PrevError),
	}}}}
	update := "SET #st = :to, upd = :now, " + aRedrives + " = list_append(if_not_exists(" + aRedrives + ", :empty), :entry)"
	remove := " REMOVE #end, err, man, #ttl"
	c.values[":gpk"] = sv(duePK(jobPK(p.ID) + jobSK))
	c.values[":due"] = ms(p.FollowUp)
	update += ", gpk = :gpk, due = :due"
	items := []types.TransactWriteItem{{Update: &types.Update{
		TableName: &s.table, Key: key(jobPK(p.ID), jobSK),
		UpdateExpression:          aws.String(update + remove),
		ConditionExpression:       aws.String(expr),
		ExpressionAttributeNames:  map[string]string{"#st": aState, "#end": aEnded, "#ttl": aTTL},
		ExpressionAttributeValues: c.values,
	}}, {Put: &types.Put{
		TableName: &s.table, Item: ownerIndexItem(head.Owner, p.ID, head.Name, tr.To, head.Created, time.Time{}),
	}}}
	quotaAt := -1
	switch q := p.Quota; {
	case head.Quota:
		var maxJobs, maxTasks int
		if q != nil {
			maxJobs, maxTasks = q.MaxJobs, q.MaxTasks
		}
		quotaAt = len(items)
		items = append(items, quotaUpdate(s.table, head.Owner, quotaJobs, 1, maxJobs, quotaTasks, head.QuotaTasks, maxTasks))
	case q != nil:
		c.values[":qn"] = nv(int64(q.Tasks))
		items[0].Update.UpdateExpression = aws.String(update + ", " + aQuotaTasks + " = :qn" + remove)
		quotaAt = len(items)
		items = append(items, quotaUpdate(s.table, head.Owner, quotaJobs, 1, q.MaxJobs, quotaTasks, q.Tasks, q.MaxTasks))
	}
	items = append(items, s.jobStatePuts(p.ID, tr.To, p.Now)...)
	err = s.transact(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: items})
	if r := cancelReasons(err); quotaAt >= 0 && len(r) == len(items) && r[0] != reasonCondFailed && r[quotaAt] == reasonCondFailed {
		return fmt.Errorf("redrive job %s: %w", p.ID, ErrQuotaReached)
	}
	if r := cancelReasons(err); len(r) > 0 && r[0] == reasonCondFailed {
		return fmt.Errorf("redrive job %s: %w", p.ID, sm.ErrInvalidTransition)
	}
	if err != nil {
		return fmt.Errorf("redrive job %s: %w", p.ID, err)
	}
	return nil
}

// RedriveStage reopens a stage of a redriven (RUNNING) job: ev is
// sm.StageRedrive (a stage that had started, back to RUNNING, in the
// sweep index at due for its completion checks) or sm.StageRedriveBlocked
// (one cancelled before it started, back to BLOCKED). Its counters and
// plan are kept: its committed tasks stay counted.
// sm.ErrInvalidTransition: the stage is not in a state ev leaves, or
// the job is not RUNNING.
func (s *Store) StageRedrive(ctx context.Context, job string, idx int, ev sm.Event, now, due time.Time) error {
	tr := sm.Stages.Transition(ev)
	c := newCond()
	expr := transition(c, tr)
	to(c, tr)
	c.values[":now"] = ms(now)
	update := "SET #st = :to, upd = :now"
	remove := " REMOVE #end, err"
	if due.IsZero() {
		remove += ", gpk, due"
	} else {
		c.values[":gpk"] = sv(duePK(jobPK(job) + stageSK(idx)))
		c.values[":due"] = ms(due)
		update += ", gpk = :gpk, due = :due"
	}
	err := s.transact(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{{Update: &types.Update{
		TableName: &s.table, Key: key(jobPK(job), stageSK(idx)),
		UpdateExpression:          aws.String(update + remove),
		ConditionExpression:       aws.String(expr),
		ExpressionAttributeNames:  map[string]string{"#st": aState, "#end": aEnded},
		ExpressionAttributeValues: c.values,
	}}, jobRunningCheck(s.table, job)}})
	if r := cancelReasons(err); len(r) > 0 {
		return fmt.Errorf("%s stage %s/%d: %w", ev, job, idx, sm.ErrInvalidTransition)
	}
	if err != nil {
		return fmt.Errorf("%s stage %s/%d: %w", ev, job, idx, err)
	}
	return nil
}

// RedriveTask puts a task of a redriven stage that failed (not within
// its stage's allowance), was cancelled or never ran back to READY
// (sm.TaskRedrive) with budget attempts more than it has used, not to
// be claimed before notBefore. A committed task is never touched.
// gen is the redrive's count: a task it already put back or raised is
// the new generation's and stays as it is.
// sm.ErrInvalidTransition: the task is in no state the redrive leaves,
// or it has had redrive gen.
func (s *Store) TaskRedrive(ctx context.Context, ref domain.TaskRef, budget, gen int, now, notBefore, due time.Time) error {
	tr := sm.Tasks.Transition(sm.TaskRedrive)
	c := newCond()
	expr := transition(c, tr) + redriveGenCond(c, gen)
	to(c, tr)
	c.values[":now"] = ms(now)
	c.values[":nb"] = ms(notBefore)
	c.values[":budget"] = nv(int64(budget))
	pk := taskPK(ref)
	upd := "SET #st = :to, mx = att + :budget, nb = :nb, upd = :now, " + aRedriveGen + " = :gen" + s.dueClause(c, pk+taskSK(ref.Partition), due)
	// Its continuations start again too (checkpoint.go): the redriven
	// attempts are new work after a fix, and each would otherwise be cut
	// off at its first invocation's limit. The checkpoint stays: a
	// redriven attempt resumes from it as any retry does.
	if strings.Contains(upd, " REMOVE ") {
		upd += ", " + aCont + ", " + aRedrivePending
	} else {
		upd += " REMOVE " + aCont + ", " + aRedrivePending
	}
	_, err := s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: &s.table, Key: key(pk, taskSK(ref.Partition)),
		UpdateExpression: aws.String(upd), ConditionExpression: aws.String(expr),
		ExpressionAttributeNames: stNames, ExpressionAttributeValues: c.values,
	})
	if isCondFailed(err) {
		return fmt.Errorf("redrive task %s: %w", ref, sm.ErrInvalidTransition)
	}
	if err != nil {
		return fmt.Errorf("redrive task %s: %w", ref, err)
	}
	return nil
}

// TaskRaiseAttempts gives a CLAIMED or READY task of a redriven job
// budget attempts more than it has used: an attempt stopped by the job's
// end is taken back by the sweep when its lease runs out, and without
// more attempts a last one would fail the job again. Its claim is left
// alone. gen is the redrive's count: a task that already had redrive
// gen's steps is left alone, as its attempt may be one the redrive
// started. Its mark (TaskMarkRedrive) goes: from now on a failure of
// the task is the new generation's.
func (s *Store) TaskRaiseAttempts(ctx context.Context, ref domain.TaskRef, budget, gen int) error {
	c := newCond()
	c.values[":budget"], c.values[":claimed"], c.values[":ready"] = nv(int64(budget)), sv(string(sm.TaskClaimed)), sv(string(sm.TaskReady))
	expr := "#st IN (:claimed, :ready)" + redriveGenCond(c, gen)
	_, err := s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: &s.table, Key: key(taskPK(ref), taskSK(ref.Partition)),
		UpdateExpression:          aws.String("SET mx = att + :budget, " + aRedriveGen + " = :gen REMOVE " + aRedrivePending),
		ConditionExpression:       aws.String(expr),
		ExpressionAttributeNames:  stNames,
		ExpressionAttributeValues: c.values,
	})
	if err != nil && !isCondFailed(err) {
		return fmt.Errorf("raise attempts of task %s: %w", ref, err)
	}
	return nil
}

// TaskMarkRedrive readies a task of a FAILED job for the job's redrive
// gen, while the job is still FAILED with gen-1 redrives: with budget >
// 0, a CLAIMED or READY task gets budget attempts more than it has used
// (its attempt, stopped by the job's end, must retry once the job runs
// again, not fail it again on an old budget); and a task FAILED, then
// or once so raised (its stopped attempt may still fail), records that
// redrive gen is to put it back (aRedrivePending). Each write holds only
// while the job is FAILED at gen-1: once the job has been redriven, a
// failure of the task is the new generation's, and marking it would hide
// it from kernel.FailureGen, so that nothing would end the job.
// sm.ErrInvalidTransition: the job is no longer FAILED with gen-1
// redrives (another request redrove it).
func (s *Store) TaskMarkRedrive(ctx context.Context, ref domain.TaskRef, budget, gen int) error {
	marked, err := s.markRedrive(ctx, ref, gen)
	if err != nil || marked || budget <= 0 {
		return err
	}
	c := newCond()
	c.values[":budget"], c.values[":claimed"], c.values[":ready"] = nv(int64(budget)), sv(string(sm.TaskClaimed)), sv(string(sm.TaskReady))
	if err := s.beforeRedrive(ctx, ref, gen, &types.Update{
		TableName: &s.table, Key: key(taskPK(ref), taskSK(ref.Partition)),
		UpdateExpression:          aws.String("SET mx = att + :budget"),
		ConditionExpression:       aws.String("#st IN (:claimed, :ready)"),
		ExpressionAttributeNames:  stNames,
		ExpressionAttributeValues: c.values,
	}); err != nil && !errors.Is(err, errTaskMoved) {
		return fmt.Errorf("raise attempts of task %s: %w", ref, err)
	}
	_, err = s.markRedrive(ctx, ref, gen)
	return err
}

// markRedrive marks a FAILED task for redrive gen (TaskMarkRedrive), and
// says whether it did.
func (s *Store) markRedrive(ctx context.Context, ref domain.TaskRef, gen int) (bool, error) {
	err := s.beforeRedrive(ctx, ref, gen, &types.Update{
		TableName: &s.table, Key: key(taskPK(ref), taskSK(ref.Partition)),
		UpdateExpression:          aws.String("SET " + aRedrivePending + " = :gen"),
		ConditionExpression:       aws.String("#st = :failed"),
		ExpressionAttributeNames:  stNames,
		ExpressionAttributeValues: map[string]types.AttributeValue{":gen": nv(int64(gen)), ":failed": sv(string(sm.TaskFailed))},
	})
	if errors.Is(err, errTaskMoved) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("mark task %s for redrive %d: %w", ref, gen, err)
	}
	return true, nil
}

// errTaskMoved is a write of beforeRedrive refused by its own condition
// on the task, the job being as it expects.
var errTaskMoved = errors.New("task not in the state the write expects")

// beforeRedrive applies u, a write on a task of a job about to have
// redrive gen, only while the job is FAILED with gen-1 redrives.
// errTaskMoved: u's condition failed; sm.ErrInvalidTransition: the
// job's did.
func (s *Store) beforeRedrive(ctx context.Context, ref domain.TaskRef, gen int, u *types.Update) error {
	c := newCond()
	c.values[":failed"] = sv(string(sm.JobFailed))
	expr := "#st = :failed" + redriveCountCond(c, gen-1) // sm.GuardRedriveCount
	err := s.transact(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{{Update: u}, {ConditionCheck: &types.ConditionCheck{
		TableName: &s.table, Key: key(jobPK(ref.Job), jobSK),
		ConditionExpression:       aws.String(expr),
		ExpressionAttributeNames:  stNames,
		ExpressionAttributeValues: c.values,
	}}}})
	switch r := cancelReasons(err); {
	case len(r) == 2 && r[1] == reasonCondFailed:
		return sm.ErrInvalidTransition
	case len(r) == 2 && r[0] == reasonCondFailed:
		return errTaskMoved
	}
	return err
}

// aReused is, on a rerun's job item, the map of its reused stages (by
// index) to the job whose committed outputs each reuses.
const aReused = "rru"

// RerunParams makes a new job a rerun of Of: the stages in Reuse are not
// run, they adopt the committed outputs of the job each maps to (Of, or
// the job Of itself reused the stage from).
type RerunParams struct {
	Of    string
	Reuse map[int]string
}

func (p *RerunParams) addTo(item map[string]types.AttributeValue) {
	if p == nil {
		return
	}
	item[aRerunOf] = sv(p.Of)
	m := map[string]types.AttributeValue{}
	for idx, job := range p.Reuse {
		m[strconv.Itoa(idx)] = sv(job)
	}
	item[aReused] = &types.AttributeValueMemberM{Value: m}
}

func decodeReused(item map[string]types.AttributeValue) map[int]string {
	m, ok := item[aReused].(*types.AttributeValueMemberM)
	if !ok || len(m.Value) == 0 {
		return nil
	}
	out := make(map[int]string, len(m.Value))
	for k, v := range m.Value {
		if idx, err := strconv.Atoi(k); err == nil {
			if s, ok := v.(*types.AttributeValueMemberS); ok {
				out[idx] = s.Value
			}
		}
	}
	return out
}

// AdoptStage plans a running stage of a rerun that reuses another job's
// committed outputs: total tasks (the source stage's), none to run, no
// counters (so its completion check finds it complete). A repeat finds
// it planned and changes nothing.
func (s *Store) StageAdopt(ctx context.Context, job string, idx, total int) error {
	_, err := s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: &s.table, Key: key(jobPK(job), stageSK(idx)),
		UpdateExpression:         aws.String("SET tot = :t, nsh = :zero, enq = :t, mat = :true"),
		ConditionExpression:      aws.String("#st = :run AND attribute_not_exists(tot)"),
		ExpressionAttributeNames: stNames,
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":t": nv(int64(total)), ":zero": nv(0), ":true": bv(true), ":run": sv(string(sm.StageRunning)),
		},
	})
	if err != nil && !isCondFailed(err) {
		return fmt.Errorf("adopt stage %s/%d: %w", job, idx, err)
	}
	return nil
}
