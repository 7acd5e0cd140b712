package dynamo

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/batchwork/batchwork/shared/cost"
	"github.com/batchwork/batchwork/shared/domain"
	"github.com/batchwork/batchwork/shared/events"
	"github.com/batchwork/batchwork/shared/spec"
	"github.com/batchwork/batchwork/shared/split"
	sm "github.com/batchwork/batchwork/statemachine"
)

func encodeTask(t domain.Task, due time.Time) map[string]types.AttributeValue {
	item := map[string]types.AttributeValue{
		attrPK: sv(taskPK(t.Ref)), attrSK: sv(taskSK(t.Ref.Partition)),
		aState: sv(string(t.State)), aAttempt: nv(int64(t.Attempt)), aMax: nv(int64(t.MaxAttempts)),
		aUpdated: ms(t.Updated),
	}
	if t.Input != nil {
		item[aInKey] = sv(t.Input.Key)
		item[aInStart] = nv(t.Input.Start)
		item[aInEnd] = nv(t.Input.End)
		if t.Input.ETag != "" {
			item[aInTag] = sv(t.Input.ETag)
		}
		if t.Input.Version != "" {
			item[aInVersion] = sv(t.Input.Version) // inputpin.go
		}
		if t.Input.Source != 0 {
			item[aInSource] = nv(int64(t.Input.Source)) // inputsource.go
		}
	}
	putTraceSpan(item, t.TraceSpan) // trace.go
	if !due.IsZero() {
		item[attrGPK] = sv(duePK(taskPK(t.Ref) + taskSK(t.Ref.Partition)))
		item[attrDue] = ms(due)
	}
	return item
}

// TaskItemSize is the size of the largest task record the store writes for
// t: a claimed task with a token, lease and last error of maxErr bytes.
func TaskItemSize(t domain.Task, maxErr int) int {
	item := encodeTask(t, time.Now())
	item[aToken] = sv("0123456789abcdef0123456789abcdef")
	item[aLease] = ms(time.Now())
	item[aNotBefore] = ms(time.Now())
	item[aSlotAt] = ms(time.Now())
	item[aExecutor] = sv("0123456789abcdef")
	item[aClaimed] = ms(time.Now())
	item[aCommitAtt] = nv(int64(t.MaxAttempts))
	item[aOutputs] = nv(10000)
	item[aRecIn] = nv(1 << 50)
	item[aRecOut] = nv(1 << 50)
	item[aErr] = sv(string(make([]byte, maxErr)))
	item[aTaskTolerated] = bv(true) // tolerate.go
	// The error's class and an out-of-memory retry's size (errorclass.go).
	item[aErrClass], item[aMemory] = sv(string(domain.ClassOutOfMemory)), nv(10<<30)
	item[aCkAttempt], item[aCkSeq], item[aCkOffset], item[aCont] = nv(int64(t.MaxAttempts)), nv(1<<20), nv(1<<50), nv(100) // checkpoint.go
	// A traceparent (trace.go).
	item[aTrace] = &types.AttributeValueMemberB{Value: make([]byte, 8)}
	return ItemSize(item)
}

func decodeTask(ref domain.TaskRef, it map[string]types.AttributeValue) domain.Task {
	t := domain.Task{
		Ref: ref, State: sm.TaskState(getS(it, aState)), Attempt: int(getN(it, aAttempt)),
		MaxAttempts: int(getN(it, aMax)), Token: getS(it, aToken), LeaseUntil: getT(it, aLease),
		NotBefore: getT(it, aNotBefore), CommittedAttempt: int(getN(it, aCommitAtt)),
		Outputs: int(getN(it, aOutputs)), LastError: getS(it, aErr), Updated: getT(it, aUpdated),
		SlotAt: getT(it, aSlotAt), Executor: getS(it, aExecutor), Claimed: getT(it, aClaimed),
		ErrorClass: domain.ErrorClass(getS(it, aErrClass)), Memory: spec.Size(getN(it, aMemory)),
		Tolerated:      getB(it, aTaskTolerated),
		Checkpoint:     decodeCheckpointRef(it), // checkpoint.go
		Copy:           decodeCopy(it),          // speculation.go
		Watched:        getS(it, attrGPK) != "",
		RedrivePending: int(getN(it, aRedrivePending)), // redrive.go
		TraceSpan:      getTraceSpan(it),               // trace.go
	}
	if k := getS(it, aInKey); k != "" {
		t.Input = &split.Split{Key: k, Start: getN(it, aInStart), End: getN(it, aInEnd), ETag: getS(it, aInTag), Version: getS(it, aInVersion), Source: int(getN(it, aInSource))}
	}
	return t
}

// putTasksEach creates task records that do not exist yet, each with its
// own conditional put, so a task that a retried materialization finds
// already claimed or committed is never reset (PutTasks' fallback).
func (s *Store) putTasksEach(ctx context.Context, tasks []domain.Task, due time.Time) error {
	sem := make(chan struct{}, putConcurrency)
	errs := make(chan error, len(tasks))
	var wg sync.WaitGroup
	for _, t := range tasks {
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			_, err := s.db.PutItem(ctx, &dynamodb.PutItemInput{
				TableName: &s.table, Item: encodeTask(t, due),
				ConditionExpression: aws.String("attribute_not_exists(pk)"),
			})
			if err != nil && !isCondFailed(err) {
				errs <- fmt.Errorf("put task %s: %w", t.Ref, err)
			}
		}()
	}
	wg.Wait()
	close(errs)
	return <-errs // nil when every put succeeded or found its task
}

// putConcurrency bounds the parallel puts of one materialization chunk.
const putConcurrency = 16

// GetTask reads a task consistently.
func (s *Store) TaskGet(ctx context.Context, ref domain.TaskRef) (domain.Task, error) {
	out, err := s.db.GetItem(ctx, &dynamodb.GetItemInput{
		TableName: &s.table, Key: key(taskPK(ref), taskSK(ref.Partition)), ConsistentRead: aws.Bool(true),
	})
	if err != nil {
		return domain.Task{}, fmt.Errorf("get task %s: %w", ref, err)
	}
	if out.Item == nil {
		return domain.Task{}, fmt.Errorf("get task %s: %w", ref, domain.ErrNotFound)
	}
	return decodeTask(ref, out.Item), nil
}

// ListStageTasks reads every task of a stage of total tasks, bucket by
// bucket, consistently.
func (s *Store) TaskListStage(ctx context.Context, job string, stage, total int) ([]domain.Task, error) {
	tasks := make([]domain.Task, 0, total)
	for b := 0; b*TaskBucket < total; b++ {
		var start map[string]types.AttributeValue
		for {
			out, err := s.db.Query(ctx, &dynamodb.QueryInput{
				TableName:                 &s.table,
				KeyConditionExpression:    aws.String("pk = :pk"),
				ExpressionAttributeValues: map[string]types.AttributeValue{":pk": sv(taskBucketPK(job, stage, b))},
				ConsistentRead:            aws.Bool(true),
				ExclusiveStartKey:         start,
			})
			if err != nil {
				return nil, fmt.Errorf("list tasks of stage %s/%d: %w", job, stage, err)
			}
			for _, it := range out.Items {
				var p int
				fmt.Sscanf(getS(it, attrSK), "%d", &p)
				tasks = append(tasks, decodeTask(domain.TaskRef{Job: job, Stage: stage, Partition: p}, it))
			}
			if start = out.LastEvaluatedKey; start == nil {
				break
			}
		}
	}
	return tasks, nil
}

// WithUnwritten adds to tasks, a stage's records as ListStageTasks read
// them, its unwritten tasks (sm.TaskUnwritten): each partition below
// materialized (the stage's enqueued count) with no record, READY at
// attempt 0 with maxAttempts. The answer is in partition order.
func WithUnwritten(tasks []domain.Task, job string, stage, materialized, maxAttempts int) []domain.Task {
	have := make(map[int]bool, len(tasks))
	for _, t := range tasks {
		have[t.Ref.Partition] = true
	}
	out := slices.Clone(tasks)
	for p := range materialized {
		if !have[p] {
			out = append(out, unwrittenTask(domain.TaskRef{Job: job, Stage: stage, Partition: p}, maxAttempts))
		}
	}
	slices.SortFunc(out, func(a, b domain.Task) int { return a.Ref.Partition - b.Ref.Partition })
	return out
}

// unwrittenTask is how a reader fills in a task with no record.
func unwrittenTask(ref domain.TaskRef, maxAttempts int) domain.Task {
	return domain.Task{Ref: ref, State: sm.TaskUnwritten, MaxAttempts: maxAttempts, Unwritten: true}
}

// ClaimParams claims a task for one attempt.
type ClaimParams struct {
	Ref   domain.TaskRef
	Token string
	Now   time.Time
	Lease time.Duration
	// Grace is how long past the lease the sweep waits before it takes an
	// unrenewed claim back (the message normally returns first).
	Grace time.Duration
	// SlotAt, when set, is the stamp of the concurrency slots taken for
	// this claim; it is kept on the task (see domain.Task.SlotAt).
	SlotAt time.Time
	// Executor, when set, is the claiming executor's id, kept on the task
	// so that others can tell from its liveness record that it died.
	Executor string
	// MaxAttempts, when set, is the attempts of the task's stage: the
	// claim of a task with no record (sm.TaskUnwritten) then writes it,
	// with these attempts. Zero for a stage whose tasks are always
	// written (they carry an input split): a missing record is then a
	// deleted job's.
	MaxAttempts int
	// TraceSpan is the task's span id its message carried: the claim
	// that writes an unwritten task's record writes it too (a record that
	// has one keeps it), so later attempts join the same trace.
	TraceSpan string
}

// ClaimTask claims a READY task whose backoff has passed, or takes over a
// CLAIMED task whose lease expired with attempts left. Either way the
// attempt increments and the token is fresh. Other cases return an outcome
// error: *domain.ClaimHeldError, *domain.NotDueError, domain.ErrAlreadyDone,
// or sm.ErrInvalidTransition for an expired claim with no attempts left
// (the caller exhausts it).
func (s *Store) TaskClaim(ctx context.Context, p ClaimParams) (domain.Task, error) {
	if p.MaxAttempts > 0 && !s.partiQLOff() {
		// A task that may be unwritten: its first claim goes in a batch
		// of inserts (firstclaim.go). Any other outcome is the
		// UpdateItem's below to decide, with the same token.
		item := firstClaimItem(p)
		err := s.firstClaims.write(ctx, s, p.Ref.Job, itemKey(item), InsertStatement(s.table, item))
		if err == nil {
			return decodeTask(p.Ref, item), nil
		}
		s.noteBatchFailed(err)
	}
	c := newCond()
	claim := transition(c, sm.Tasks.Transition(sm.TaskClaim))
	reclaim := transition(c, sm.Tasks.Transition(sm.TaskReclaim))
	to(c, sm.Tasks.Transition(sm.TaskClaim))
	lease := p.Now.Add(p.Lease)
	c.values[":now"] = ms(p.Now)
	pk := taskPK(p.Ref)
	bindLeaseExpired(c, p.Now)
	upd := s.claimUpdate(c, p, lease)
	upd = claimTrace(c, p.TraceSpan, upd) // trace.go
	expr := "(" + claim + ") OR (" + reclaim + ")"
	if p.MaxAttempts > 0 {
		// The first claim of an unwritten task writes it: its own
		// claim from READY at attempt 0, conditional on the absence,
		// so two claims of it race on one item as on a written one.
		expr = "attribute_not_exists(pk) OR " + expr
		c.values[":mx"] = nv(int64(p.MaxAttempts))
		upd = "SET mx = if_not_exists(mx, :mx), " + strings.TrimPrefix(upd, "SET ")
	}
	out, err := s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: &s.table, Key: key(pk, taskSK(p.Ref.Partition)),
		UpdateExpression:          aws.String(upd),
		ConditionExpression:       aws.String(expr),
		ExpressionAttributeNames:  stNames,
		ExpressionAttributeValues: c.values,
		ReturnValues:              types.ReturnValueAllNew,
	})
	if err == nil {
		return decodeTask(p.Ref, out.Attributes), nil
	}
	if !isCondFailed(err) {
		return domain.Task{}, fmt.Errorf("claim task %s: %w", p.Ref, err)
	}
	// Read the task back to tell the caller why: moto ignores
	// ReturnValuesOnConditionCheckFailure on UpdateItem, and a consistent
	// read is as good on AWS.
	t, gerr := s.TaskGet(ctx, p.Ref)
	if gerr != nil {
		return domain.Task{}, fmt.Errorf("claim task %s: %w", p.Ref, gerr)
	}
	if t.State == sm.TaskClaimed && t.Token == p.Token {
		// Our own claim: the write applied, its response was lost, and the
		// SDK's retry of it found the condition false. The token is fresh
		// per call, so no other caller can hold it.
		return t, nil
	}
	return t, explainClaim(t, p.Now)
}

// ForgetClaim deletes the record of a task while the claim with token
// holds it: the first claim of an unwritten task (sm.TaskUnwritten) whose
// job was deleted meanwhile wrote it after the deletion's pass over the
// job's tasks, and nothing else would ever delete it. A record that moved
// on is left alone. (A transaction of one delete: the store deletes
// nothing else on its own, and this path is rare.)
func (s *Store) TaskForgetClaim(ctx context.Context, ref domain.TaskRef, token string) error {
	err := s.transact(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{{Delete: &types.Delete{
		TableName: &s.table, Key: key(taskPK(ref), taskSK(ref.Partition)),
		ConditionExpression:      aws.String("#st = :st AND tok = :tok"),
		ExpressionAttributeNames: stNames,
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":st": sv(string(sm.TaskClaimed)), ":tok": sv(token),
		},
	}}}})
	if err != nil && !anyCondFailed(cancelReasons(err)) {
		return fmt.Errorf("forget claim of task %s: %w", ref, err)
	}
	return nil
}

// claimUpdate is the update expression of a claim or a takeover, binding
// its values in c: the new token and lease, the optional slot stamp, the
// claiming executor, and the attempt's increment. A claim without an
// executor removes the previous holder's, so no one judges the new claim
// by a dead executor's liveness record.
func (s *Store) claimUpdate(c *cond, p ClaimParams, lease time.Time) string {
	c.values[":tok"] = sv(p.Token)
	c.values[":lease"] = ms(lease)
	c.values[":one"] = nv(1)
	upd := "SET #st = :to, tok = :tok, lease = :lease, upd = :now, " + aClaimed + " = :now"
	if !p.SlotAt.IsZero() {
		c.values[":sat"] = ms(p.SlotAt)
		upd += ", sat = :sat"
	}
	// A claim from READY ends whatever copy claim a task that went back
	// to READY under it still named (speculation.go), and the new claim is
	// the holder: reclaims and takeovers need no live copy, so for them
	// this removes at most the attempt of a holder whose copy ended.
	remove := " REMOVE " + copyClaimAttrs + ", " + aHolderAtt
	if p.Executor != "" {
		c.values[":ex"] = sv(p.Executor)
		upd += ", ex = :ex"
	} else {
		remove += ", ex"
	}
	return upd + leaseDue(c, lease.Add(p.Grace)) + remove + " ADD att :one"
}

// leaseDue is the SET fragment that records when a claimed task needs the
// sweep if nothing renews it (its lease's end plus grace). It writes the
// index's sort key only: a task with an entry of its own (gpk) moves in the
// index, and a task its chunk's ready marker watches stays out of it, so
// claims and heartbeats write no index entry (ready.go).
func leaseDue(c *cond, due time.Time) string {
	c.values[":due"] = ms(due)
	return ", due = :due"
}

// explainClaim turns a refused claim into the outcome the executor acts on,
// using the same rules that built the condition.
func explainClaim(t domain.Task, now time.Time) error {
	in := sm.TaskInput{At: now}
	if t.State == sm.TaskSucceeded {
		return fmt.Errorf("claim task %s (%s): %w: %w", t.Ref, t.State, ErrCommitted, domain.ErrAlreadyDone)
	}
	if sm.Tasks.IsTerminal(t.State) {
		return fmt.Errorf("claim task %s (%s): %w", t.Ref, t.State, domain.ErrAlreadyDone)
	}
	if t.State == sm.TaskReady {
		return &domain.NotDueError{At: t.NotBefore}
	}
	if t.Copy.Live() {
		// Two live claims (speculation.go): neither is reclaimed while the
		// other lives, so the message waits for the later lease.
		return &domain.ClaimHeldError{LeaseUntil: later(t.LeaseUntil, t.Copy.LeaseUntil).Add(sm.LeaseSkew)}
	}
	_, err := sm.Decide(t.View(), sm.TaskReclaim, in)
	var ge *sm.GuardError
	if errors.As(err, &ge) && ge.Guard == sm.GuardLeaseExpired {
		return &domain.ClaimHeldError{LeaseUntil: t.LeaseUntil.Add(sm.LeaseSkew)}
	}
	if errors.As(err, &ge) && ge.Guard == sm.GuardAttemptsLeft {
		return fmt.Errorf("claim task %s: lease expired on attempt %d of %d: %w", t.Ref, t.Attempt, t.MaxAttempts, sm.ErrInvalidTransition)
	}
	// The condition failed but the rules allow the claim now: the record
	// changed between the write and the read. Report a live claim so the
	// message comes back shortly.
	return &domain.ClaimHeldError{LeaseUntil: now.Add(time.Second)}
}

// HolderParams identifies the holder of a claim acting on its task.
type HolderParams struct {
	Ref   domain.TaskRef
	Token string
	Now   time.Time
}

// Heartbeat extends the holder's lease to now+lease.
func (s *Store) TaskHeartbeat(ctx context.Context, p HolderParams, lease, grace time.Duration) error {
	c := newCond()
	tr := sm.Tasks.Transition(sm.TaskHeartbeat)
	expr := transition(c, tr)
	until := p.Now.Add(lease)
	c.values[":tok"] = sv(p.Token)
	c.values[":lease"] = ms(until)
	c.values[":now"] = ms(p.Now)
	pk := taskPK(p.Ref)
	_, err := s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: &s.table, Key: key(pk, taskSK(p.Ref.Partition)),
		UpdateExpression:          aws.String("SET lease = :lease, upd = :now" + leaseDue(c, until.Add(grace))),
		ConditionExpression:       aws.String(expr),
		ExpressionAttributeNames:  stNames,
		ExpressionAttributeValues: c.values,
	})
	if isCondFailed(err) {
		return fmt.Errorf("heartbeat task %s: %w", p.Ref, domain.ErrStaleClaim)
	}
	if err != nil {
		return fmt.Errorf("heartbeat task %s: %w", p.Ref, err)
	}
	return nil
}

// CommitParams commits the holder's attempt.
type CommitParams struct {
	HolderParams
	Attempt int
	Outputs int
	Shards  int
	// RecordsIn and RecordsOut are what the executor counted; they are kept
	// on the task and summed on its counter shard.
	RecordsIn, RecordsOut int64
	// Duration is the attempt's run time, claim to commit, counted in the
	// shard's duration histogram (speculation.go); 0 counts nothing.
	Duration time.Duration
	// BadRecords, when above 0, is added to the stage's bad-record count
	// in the same transaction, which the count's guard refuses past
	// MaxBadRecords (badrecords.go).
	BadRecords    int64
	MaxBadRecords int
	// DeferCount: the caller counts the commit itself, later and
	// batched with others (CountCommits); CommitTask then only commits.
	// A commit with bad records is counted in its transaction regardless.
	DeferCount bool
	// Watched: the task has an index entry of its own (domain.Task.Watched
	// as claimed). Its commit is then one transaction that counts it and
	// takes the entry out, as a split commit would leave the entry for the
	// sweep to check the count and remove (count.go): about the same
	// write units, and no sweep visit after every such task.
	Watched bool
	// Copy: the committing claim is a speculative copy, whose win its
	// counter shard counts (speculationstats.go).
	Copy bool
	// Cost is what the job's requests cost since the committer's last
	// count, added on the counter shard with the count (cost.go).
	Cost cost.Counts
	// costFlush names Cost in the counter's set of cost writes once it
	// moved off the count it came with (count_cost.go).
	costFlush string
}

// CommitTask marks the task SUCCEEDED and counts it on its stage's counter
// shard, and reports whether that emptied the shard: two single-item
// writes, the fence first (count.go says why that is safe).
//
// A retry of a commit whose response was lost finds the task SUCCEEDED with
// its own token: it recognises its own success and counts (once: the
// count is idempotent). Any other refusal is domain.ErrStaleClaim or
// domain.ErrAlreadyDone.
func (s *Store) TaskCommit(ctx context.Context, p CommitParams) (shardDone bool, err error) {
	if err := checkBadRecords(p); err != nil { // badrecords.go
		return false, err
	}
	if p.BadRecords > 0 || p.Watched {
		return s.commitGuarded(ctx, p)
	}
	if stmt, ok := s.commitStatement(p); ok && !s.partiQLOff() {
		// In a batch with the process's other commits of the job
		// (commitbatch.go); any other outcome is the UpdateItem's below.
		err := s.commits.write(ctx, s, p.Ref.Job, taskPK(p.Ref)+"\x00"+taskSK(p.Ref.Partition), stmt)
		if err == nil {
			if p.DeferCount {
				return false, nil
			}
			return s.countCommit(ctx, p)
		}
		s.noteBatchFailed(err)
	}
	c := newCond()
	expr, upd := commitUpdate(c, p)
	c.values[":cnt"] = ms(p.Now.Add(CountGrace))
	_, err = s.updateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: &s.table, Key: key(taskPK(p.Ref), taskSK(p.Ref.Partition)),
		ConditionExpression: aws.String(expr),
		// An index entry of the task's own stays, due when the sweep
		// checks that the task was counted (count.go).
		UpdateExpression:          aws.String(upd + ", due = :cnt REMOVE lease, " + aCopyTok + ", " + aCopyLease + ", " + aCopyEx),
		ExpressionAttributeNames:  commitNames,
		ExpressionAttributeValues: c.values,
	})
	if isCondFailed(err) {
		err = s.explainCommit(ctx, p)
	}
	if err != nil {
		return false, fmt.Errorf("commit task %s: %w", p.Ref, err)
	}
	if p.DeferCount {
		return false, nil
	}
	return s.countCommit(ctx, p)
}

// commitUpdate is the commit's condition and SET clause on the task item.
func commitUpdate(c *cond, p CommitParams) (expr, set string) {
	tr := sm.Tasks.Transition(sm.TaskCommit)
	expr = transition(c, tr)
	to(c, tr)
	c.values[":tok"] = sv(p.Token)
	c.values[":now"] = ms(p.Now)
	c.values[":att"] = nv(int64(p.Attempt))
	c.values[":nout"] = nv(int64(p.Outputs))
	c.values[":rin"] = nv(p.RecordsIn)
	c.values[":rout"] = nv(p.RecordsOut)
	// The attempt pin names the attempt whose outputs the caller checked:
	// the holder's (patt once its task was copied) or the copy's. The
	// winner's token stays on the record (a lost response's retry
	// recognises its success by it); the other claim is gone with the
	// copy's fields (speculation.go).
	return expr + " AND (att = :att OR " + aHolderAtt + " = :att)",
		"SET #st = :to, catt = :att, tok = :tok, nout = :nout, #rin = :rin, #rout = :rout, upd = :now"
}

// explainCommit reads a task whose commit was refused: nil when the task
// is SUCCEEDED by this very attempt (a retry after a lost answer), else
// why not.
func (s *Store) explainCommit(ctx context.Context, p CommitParams) error {
	t, err := s.TaskGet(ctx, p.Ref)
	if err != nil {
		return err
	}
	switch {
	case t.State == sm.TaskSucceeded && t.Token == p.Token && t.CommittedAttempt == p.Attempt:
		return nil
	case sm.Tasks.IsTerminal(t.State):
		return fmt.Errorf("attempt %d: task is %s: %w", p.Attempt, t.State, domain.ErrAlreadyDone)
	case t.Token != p.Token, t.State == sm.TaskReady:
		// READY keeps the token of the attempt whose failure (a retry, a
		// timeout) released it: that attempt's claim is gone all the same.
		return fmt.Errorf("attempt %d: current attempt is %d (%s): %w", p.Attempt, t.Attempt, t.State, domain.ErrStaleClaim)
	}
	return fmt.Errorf("attempt %d: refused while %s with its token", p.Attempt, t.State)
}

// commitGuarded commits a task in one transaction with its count (and
// takes its own index entry out): a task the sweep watches on its own
// (CommitParams.Watched), and one whose attempt rejected records, whose
// stage's bad-record count is in the transaction too, guarded to refuse
// the commit past the stage's maxBadRecords.
//
// The first try guards the counter with left > 1, so the common commit is
// one request: only the shard's last committer sees that guard fail, and
// it retries without it, knowing it took the shard to zero.
func (s *Store) commitGuarded(ctx context.Context, p CommitParams) (shardDone bool, err error) {
	err = s.commitTx(ctx, p, false)
	if r := cancelReasons(err); len(r) >= 2 && r[0] == reasonNone && r[1] == reasonCondFailed && !badRecordsRefused(p, r) {
		// The task's guard held; the counter's did not: this is the last.
		if err = s.commitTx(ctx, p, true); err == nil {
			return true, nil
		}
	}
	if err == nil {
		return false, nil
	}
	if r := cancelReasons(err); badRecordsRefused(p, r) {
		return false, tooManyBadRecords(p)
	}
	if cancelReasons(err) == nil {
		return false, fmt.Errorf("commit task %s: %w", p.Ref, err)
	}
	if r := cancelReasons(err); len(r) == 0 || r[0] != reasonCondFailed {
		return false, fmt.Errorf("commit task %s: transaction cancelled %v: %w", p.Ref, r, err)
	}
	if err := s.explainCommit(ctx, p); err != nil {
		return false, fmt.Errorf("commit task %s: %w", p.Ref, err)
	}
	counted, left, err := s.shardCounted(ctx, p.Ref, p.Shards)
	if err != nil {
		return false, err
	}
	if !counted {
		return false, fmt.Errorf("commit task %s: committed, and its counter does not hold it", p.Ref)
	}
	return left == 0, nil
}

// commitTx is one try of the commit transaction (retried by transact while
// contention alone cancels it). It carries no ClientRequestToken of ours:
// its parameters hold the time, so a token fixed per claim would be
// refused on an application-level retry (IdempotentParameterMismatch);
// the read-back in CommitTask recognises a retry's own earlier success.
func (s *Store) commitTx(ctx context.Context, p CommitParams, last bool) error {
	c := newCond()
	expr, upd := commitUpdate(c, p)
	cnt := map[string]types.AttributeValue{}
	cntUpd := countUpdate([]CommitParams{p}, cnt) // count.go
	cntCond := "attribute_exists(pk)"
	if !last {
		cntCond = "attribute_exists(pk) AND #left > :one"
		cnt[":one"] = nv(1)
	}
	items := []types.TransactWriteItem{{Update: &types.Update{
		TableName: &s.table, Key: key(taskPK(p.Ref), taskSK(p.Ref.Partition)),
		ConditionExpression:       aws.String(expr),
		UpdateExpression:          aws.String(upd + " REMOVE gpk, due, lease, " + aCopyTok + ", " + aCopyLease + ", " + aCopyEx),
		ExpressionAttributeNames:  commitNames,
		ExpressionAttributeValues: c.values,
	}}, {Update: &types.Update{
		TableName: &s.table, Key: key(shardPK(p.Ref.Job, p.Ref.Stage, ShardOf(p.Ref.Partition, p.Shards)), cntSK),
		ConditionExpression:       aws.String(cntCond),
		UpdateExpression:          aws.String(cntUpd),
		ExpressionAttributeNames:  countNames,
		ExpressionAttributeValues: cnt,
	}}}
	if p.BadRecords > 0 {
		items = append(items, s.badRecordsUpdate(p)) // the stage's bad-record guard: badrecords.go
	}
	return s.transact(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: items})
}

// ReleaseParams gives a claimed task back: to READY for another attempt
// (retry), or to FAILED (fail) with its error.
type ReleaseParams struct {
	HolderParams
	Event     sm.Event // TaskRetry, TaskFail or TaskFailPermanent
	NotBefore time.Time
	Err       string
	// Class is Err's class, kept with it; Memory, when set, is the
	// executor size the next attempt runs on (an out-of-memory retry).
	Class  domain.ErrorClass
	Memory spec.Size
	// Due is when the sweep checks the task next: for a retry, when its
	// message should long have been claimed; for a failure, at once, until
	// the failure has reached the stage and job.
	Due time.Time
	// Outbox, when set, is an event written to the outbox in the same
	// transaction (outbox.go): a task's final failure (TaskFail).
	Outbox *events.Event
}

// ReleaseTask applies the holder's retry or fail event.
func (s *Store) TaskRelease(ctx context.Context, p ReleaseParams) (domain.Task, error) {
	c := newCond()
	tr := sm.Tasks.Transition(p.Event)
	expr := transition(c, tr)
	to(c, tr)
	c.values[":tok"] = sv(p.Token)
	c.values[":now"] = ms(p.Now)
	c.values[":err"] = sv(p.Err)
	pk := taskPK(p.Ref)
	upd := "SET #st = :to, err = :err, upd = :now"
	if !p.NotBefore.IsZero() {
		c.values[":nb"] = ms(p.NotBefore)
		upd += ", nb = :nb"
	}
	if p.Class != domain.ClassNone {
		c.values[":ecl"] = sv(string(p.Class))
		upd += ", " + aErrClass + " = :ecl"
	}
	if p.Memory > 0 {
		c.values[":mem"] = nv(int64(p.Memory))
		upd += ", " + aMemory + " = :mem"
	}
	attrs, err := s.updateWithOutbox(ctx, &dynamodb.UpdateItemInput{
		TableName: &s.table, Key: key(pk, taskSK(p.Ref.Partition)),
		UpdateExpression:          aws.String(upd + s.dueClause(c, pk+taskSK(p.Ref.Partition), p.Due)),
		ConditionExpression:       aws.String(expr),
		ExpressionAttributeNames:  stNames,
		ExpressionAttributeValues: c.values,
		ReturnValues:              types.ReturnValueAllNew,
	}, p.Outbox)
	if isCondFailed(err) {
		// The SDK's retry of a write whose response was lost finds the
		// condition false: if the record holds this very release, it was
		// the caller's own (failclass_lostresponse_test.go).
		if t, gerr := s.TaskGet(ctx, p.Ref); gerr == nil && ownRelease(t, tr.To, p) {
			return t, nil
		}
		return domain.Task{}, fmt.Errorf("%s task %s: %w", p.Event, p.Ref, domain.ErrStaleClaim)
	}
	if err != nil {
		return domain.Task{}, fmt.Errorf("%s task %s: %w", p.Event, p.Ref, err)
	}
	return decodeTask(p.Ref, attrs), nil
}

// ownRelease reports whether t holds release p's outcome: the claim's
// token is still on it (the next claim replaces it) and the state, error
// and update time are those p wrote. A sweep's expiry of the same claim
// writes its own error and time.
func ownRelease(t domain.Task, to sm.TaskState, p ReleaseParams) bool {
	return t.State == to && t.Token == p.Token && t.LastError == p.Err &&
		t.Updated.Equal(time.UnixMilli(p.Now.UnixMilli()))
}

// SweepTaskParams applies a non-holder event (expire, exhaust, cancel) to a
// task, as the sweep or a cancelling job does.
type SweepTaskParams struct {
	Ref   domain.TaskRef
	Event sm.Event // TaskExpire, TaskExhaust or TaskCancel
	Now   time.Time
	Err   string
	// Class is Err's class, kept with it (lease_expired for an exhaust).
	Class domain.ErrorClass
	// Memory, when set, is the executor size the next attempt runs on (an
	// expiry of a holder that died for memory: oomkill.go in control).
	Memory spec.Size
	Due    time.Time
	// Outbox, when set, is an event written to the outbox in the same
	// transaction (outbox.go): a task's final failure (TaskExhaust).
	Outbox *events.Event
}

// SweepTask applies p.Event; sm.ErrInvalidTransition means the task moved
// on (it was claimed, committed or renewed) and there is nothing to do.
func (s *Store) TaskSweep(ctx context.Context, p SweepTaskParams) error {
	c := newCond()
	tr := sm.Tasks.Transition(p.Event)
	expr := transition(c, tr)
	to(c, tr)
	c.values[":now"] = ms(p.Now)
	if slices.Contains(tr.Guards, sm.GuardLeaseExpired) {
		bindLeaseExpired(c, p.Now)
	}
	upd := "SET #st = :to, upd = :now"
	if p.Err != "" {
		c.values[":err"] = sv(p.Err)
		upd += ", err = :err"
	}
	if p.Class != domain.ClassNone {
		c.values[":ecl"] = sv(string(p.Class))
		upd += ", " + aErrClass + " = :ecl"
	}
	if p.Memory > 0 {
		c.values[":mem"] = nv(int64(p.Memory))
		upd += ", " + aMemory + " = :mem"
	}
	pk := taskPK(p.Ref)
	_, err := s.updateWithOutbox(ctx, &dynamodb.UpdateItemInput{
		TableName: &s.table, Key: key(pk, taskSK(p.Ref.Partition)),
		UpdateExpression:          aws.String(upd + s.dueClause(c, pk+taskSK(p.Ref.Partition), p.Due)),
		ConditionExpression:       aws.String(expr),
		ExpressionAttributeNames:  stNames,
		ExpressionAttributeValues: c.values,
	}, p.Outbox)
	if isCondFailed(err) {
		return fmt.Errorf("%s task %s: %w", p.Event, p.Ref, sm.ErrInvalidTransition)
	}
	if err != nil {
		return fmt.Errorf("%s task %s: %w", p.Event, p.Ref, err)
	}
	return nil
}

// DueItems returns up to limit records of one index shard that are due at
// now. The index is eventually consistent: callers re-read each record
// before acting, and every action is a conditional write. A due ready
// marker is expanded into its tasks that still wait (ready.go), so the
// answer may hold more than limit records, and from other shards.
func (s *Store) DueList(ctx context.Context, shard int, now time.Time, limit int) ([]DueItem, error) {
	out, err := s.db.Query(ctx, &dynamodb.QueryInput{
		TableName:              &s.table,
		IndexName:              aws.String(DueIndex),
		KeyConditionExpression: aws.String("gpk = :g AND due <= :now"),
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":g": sv(fmt.Sprintf("D#%d", shard)), ":now": ms(now),
		},
		Limit: aws.Int32(int32(limit)),
	})
	if err != nil {
		return nil, fmt.Errorf("query sweep index shard %d: %w", shard, err)
	}
	return s.dueItems(ctx, now, out.Items, limit)
}

// DueScan reads the whole sweep index in one request when it is small:
// whole reports that it held fewer than limit entries (due or not), and
// the items are then every one due at now, its ready markers expanded
// into as many records as the walk's (limit a shard). A sweep run of an
// idle or lightly loaded deployment so costs one request rather than a
// Query per shard; when whole is false the items are nil and the caller
// walks the shards.
func (s *Store) DueScan(ctx context.Context, now time.Time, limit int) (items []DueItem, whole bool, err error) {
	out, err := s.db.Scan(ctx, &dynamodb.ScanInput{
		TableName:                 &s.table,
		IndexName:                 aws.String(DueIndex),
		FilterExpression:          aws.String("#due <= :now"),
		ExpressionAttributeNames:  map[string]string{"#due": attrDue},
		ExpressionAttributeValues: map[string]types.AttributeValue{":now": ms(now)},
		// Limit counts the entries read before the filter: an index
		// of limit entries or more answers with a LastEvaluatedKey.
		Limit: aws.Int32(int32(limit)),
	})
	if err != nil {
		return nil, false, fmt.Errorf("scan sweep index: %w", err)
	}
	if len(out.LastEvaluatedKey) > 0 {
		return nil, false, nil
	}
	// The walk expands each shard's markers up to limit records; one
	// read of every shard gets the walk's whole budget.
	items, err = s.dueItems(ctx, now, out.Items, limit*DueShards)
	return items, true, err
}

// dueItems makes the index entries read into the records due, expanding
// ready markers.
func (s *Store) dueItems(ctx context.Context, now time.Time, raw []map[string]types.AttributeValue, limit int) ([]DueItem, error) {
	items := make([]DueItem, 0, len(raw))
	var markers []readyMarker // ready.go
	var errs []error
	for _, it := range raw {
		if m, ok := parseReadyMarker(it); ok {
			markers = append(markers, m)
			continue
		}
		d, err := parseDueKey(getS(it, attrPK), getS(it, attrSK))
		if err != nil {
			errs = append(errs, err)
			continue
		}
		items = append(items, d)
	}
	items, err := s.expandReady(ctx, now, items, markers, limit)
	return items, errors.Join(append(errs, err)...)
}
