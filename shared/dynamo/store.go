// Package dynamo is the DynamoDB adapter: the store of jobs, stages, task
// records, completion counters and idempotency records. Every status change
// is a conditional write whose condition comes from package statemachine.
package dynamo

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/batchwork/batchwork/shared/domain"
	"github.com/batchwork/batchwork/shared/events"
	"github.com/batchwork/batchwork/shared/spec"
	sm "github.com/batchwork/batchwork/statemachine"
)

// API is the slice of the DynamoDB client the store uses.
type API interface {
	GetItem(context.Context, *dynamodb.GetItemInput, ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error)
	PutItem(context.Context, *dynamodb.PutItemInput, ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error)
	UpdateItem(context.Context, *dynamodb.UpdateItemInput, ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error)
	Query(context.Context, *dynamodb.QueryInput, ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error)
	Scan(context.Context, *dynamodb.ScanInput, ...func(*dynamodb.Options)) (*dynamodb.ScanOutput, error)
	BatchGetItem(context.Context, *dynamodb.BatchGetItemInput, ...func(*dynamodb.Options)) (*dynamodb.BatchGetItemOutput, error)
	TransactWriteItems(context.Context, *dynamodb.TransactWriteItemsInput, ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error)
	BatchExecuteStatement(context.Context, *dynamodb.BatchExecuteStatementInput, ...func(*dynamodb.Options)) (*dynamodb.BatchExecuteStatementOutput, error)
}

// Store is the DynamoDB-backed store.
type Store struct {
	db    API
	table string
	// retention, when positive, is how long an ended job's records are
	// kept (retention.go).
	retention time.Duration
	// partiQLOffUntil, when set (unix nanoseconds), is until when claims
	// and commits write UpdateItems and materialization transactions
	// instead of PartiQL (puttasks.go): the endpoint failed a PartiQL
	// batch before any statement ran on it (partiQLFailed, partiQLOff).
	// partiQLWorks: a PartiQL statement ran on this store
	// (notePartiQLRan).
	partiQLOffUntil atomic.Int64
	partiQLWorks    atomic.Bool
	// now is the clock the PartiQL wait is read on (nil: time.Now).
	now func() time.Time
	// completed remembers stages seen COMPLETED, for the ready markers'
	// looks (readydone.go).
	completed completedStages
	// done holds the markers of COMPLETED stages that DueList or DueScan
	// found, for DueRemoveDone (readydonebatch.go).
	done doneMarkers
	// firstClaims and commits batch the first claims of unwritten tasks
	// (firstclaim.go) and the plain commits (commitbatch.go).
	firstClaims, commits stmtGroups
}

// New returns a store over table.
func New(db API, table string) *Store { return &Store{db: db, table: table} }

func isCondFailed(err error) bool {
	var ccf *types.ConditionalCheckFailedException
	return errors.As(err, &ccf)
}

// cancelReasons returns the per-item cancellation codes of a cancelled
// transaction, or nil if err is not a cancellation.
func cancelReasons(err error) []string {
	var tce *types.TransactionCanceledException
	if !errors.As(err, &tce) {
		return nil
	}
	codes := make([]string, len(tce.CancellationReasons))
	for i, r := range tce.CancellationReasons {
		codes[i] = aws.ToString(r.Code)
	}
	return codes
}

// ---- jobs ----------------------------------------------------------------

// CreateJobParams describes a new job and its idempotency record.
type CreateJobParams struct {
	Job     domain.Job
	IdemKey string
	// StageDue is when the sweep should check each root stage was started,
	// in case the submitter dies between this write and the start.
	StageDue time.Time
	IdemTTL  time.Duration
	// JobDue, when set, puts the job in the sweep index at that time (its
	// deadline), so the sweep finds it without a scan.
	JobDue time.Time
	// Firing, when set, makes the job a schedule's firing: it is created
	// only if the schedule still exists, is not paused and still has the
	// cursor the firing was planned from, all in the job's transaction.
	// Otherwise CreateJob returns ErrCursorMoved and writes nothing.
	Firing *FiringGuard
	// Quota, when set, counts the job against its owner's quotas in the
	// same transaction (ErrQuotaReached and nothing written when over);
	// EndJob counts it off again.
	Quota *JobQuota
	// Rerun, when set, makes the job a rerun of another (redrive.go).
	Rerun *RerunParams
	// StartAt, when set, makes the job WAITING until then, with its start
	// entry in the schedules' index and no root stage due (jobstart.go).
	StartAt time.Time
}

// JobQuota is a job's share of its owner's quotas, and the quotas (0: no
// limit).
type JobQuota struct {
	Tasks             int
	MaxJobs, MaxTasks int
}

// FiringGuard names the schedule state a firing was planned from.
type FiringGuard struct {
	Owner, ScheduleID string
	// Cursor is the schedule's cursor when it was read (zero: none yet).
	Cursor time.Time
}

// cursorCondition is the condition that a schedule item still has the
// cursor old and is not paused, shared by the firing guard and
// AdvanceCursor.
func cursorCondition(old time.Time, vals map[string]types.AttributeValue) string {
	vals[":f"] = bv(false)
	if old.IsZero() {
		return "attribute_exists(pk) AND pz = :f AND attribute_not_exists(cur)"
	}
	vals[":old"] = nsv(old)
	return "attribute_exists(pk) AND pz = :f AND cur = :old"
}

// CreateJob writes the idempotency record, the job and its stages in one
// transaction, so a job exists exactly when its idempotency record does.
// A repeated key returns the original job id and created=false.
func (s *Store) JobCreate(ctx context.Context, p CreateJobParams) (jobID string, created bool, err error) {
	j := p.Job
	specJSON, err := j.Spec.Encode()
	if err != nil {
		return "", false, fmt.Errorf("create job: encode spec: %w", err)
	}
	now := j.Created
	state := sm.JobRunning
	if !p.StartAt.IsZero() {
		state = sm.JobWaiting // jobstart.go
	}
	items := []types.TransactWriteItem{{Put: &types.Put{
		TableName:           &s.table,
		ConditionExpression: aws.String("attribute_not_exists(pk)"),
		Item: map[string]types.AttributeValue{
			attrPK: sv(idemPK(j.Owner, p.IdemKey)), attrSK: sv(idemSK),
			aJob: sv(j.ID), aSpecHash: sv(j.SpecHash), aCreated: ms(now),
			aTTL: nv(now.Add(p.IdemTTL).Unix()),
		},
	}}, {Put: &types.Put{
		TableName:           &s.table,
		ConditionExpression: aws.String("attribute_not_exists(pk)"),
		Item: map[string]types.AttributeValue{
			attrPK: sv(jobPK(j.ID)), attrSK: sv(jobSK),
			aState: sv(string(state)), aName: sv(j.Spec.Name), aOwner: sv(j.Owner),
			aSpec: sv(string(specJSON)), aSpecHash: sv(j.SpecHash), aCreated: ms(now), aUpdated: ms(now),
			aIdemKey: sv(p.IdemKey), // for its deletion (jobdelete.go)
		},
	}}}
	putTrace(items[1].Put.Item, j.Trace) // trace.go
	p.Rerun.addTo(items[1].Put.Item)     // redrive.go
	quotaAt := -1
	if q := p.Quota; q != nil {
		items[1].Put.Item[aQuotaTasks] = nv(int64(q.Tasks))
		quotaAt = len(items)
		items = append(items, quotaUpdate(s.table, j.Owner, quotaJobs, 1, q.MaxJobs, quotaTasks, q.Tasks, q.MaxTasks))
	}
	if j.Spec.MaxConcurrency > 0 {
		items = append(items, types.TransactWriteItem{Put: &types.Put{TableName: &s.table, Item: slotItem(j.ID)}})
	}
	if !p.JobDue.IsZero() {
		jobItem := items[1].Put.Item
		jobItem[attrGPK] = sv(duePK(jobPK(j.ID) + jobSK))
		jobItem[attrDue] = ms(p.JobDue)
	}
	items = append(items, types.TransactWriteItem{Put: &types.Put{
		TableName: &s.table, Item: ownerIndexItem(j.Owner, j.ID, j.Spec.Name, state, now, time.Time{}),
	}})
	// The job's state records (jobstate.go), which claims read instead of
	// the spec-bearing job item.
	items = append(items, s.jobStatePuts(j.ID, state, now)...)
	roots := j.Spec.Roots()
	for i, st := range j.Spec.Stages {
		item := map[string]types.AttributeValue{
			attrPK: sv(jobPK(j.ID)), attrSK: sv(stageSK(i)),
			aState: sv(string(sm.StageBlocked)), aName: sv(st.Name), aUpdated: ms(now),
		}
		putTrace(item, j.Trace)                                  // the stage's spans join the job's trace
		if slices.Contains(roots, i) && state == sm.JobRunning { // a WAITING job's start puts them in
			item[attrGPK] = sv(duePK(jobPK(j.ID) + stageSK(i)))
			item[attrDue] = ms(p.StageDue)
		}
		items = append(items, types.TransactWriteItem{Put: &types.Put{TableName: &s.table, Item: item}})
	}
	if state == sm.JobWaiting {
		items[1].Put.Item[aStartAt] = ms(p.StartAt)
		items = append(items, types.TransactWriteItem{Put: &types.Put{TableName: &s.table, Item: startEntryItem(j.Owner, j.ID, p.StartAt, now)}})
	}
	// The job's submitted event, in its outbox (outbox.go); before the
	// firing's check, which must stay the last part.
	j.StartAt = p.StartAt // a WAITING job's event says so
	evPut, err := s.outboxPut(SubmittedEvent(j))
	if err != nil {
		return "", false, fmt.Errorf("create job: %w", err)
	}
	items = append(items, evPut)
	linkAt := len(items)
	items = append(items, p.Rerun.linkItems(s.table, j.ID)...) // reuselinks.go
	linkEnd := len(items)
	extra := 0
	if p.Firing != nil {
		extra = 1
	}
	if len(items)+extra > MaxTxItems {
		// Only a rerun's links take the parts past a job's own (64 stages
		// and its records fit): checked here, before anything is sent.
		return "", false, fmt.Errorf("create rerun %s: %d stages and links to %d jobs need %d transaction parts, more than %d: %w",
			j.ID, len(j.Spec.Stages), (linkEnd-linkAt)/2, len(items)+extra, MaxTxItems, ErrTooManySources)
	}
	if g := p.Firing; g != nil {
		vals := map[string]types.AttributeValue{}
		cond := cursorCondition(g.Cursor, vals)
		items = append(items, types.TransactWriteItem{ConditionCheck: &types.ConditionCheck{
			TableName: &s.table, Key: key(schedulePK(g.Owner), g.ScheduleID),
			ConditionExpression: &cond, ExpressionAttributeValues: vals,
		}})
	}
	if state == sm.JobWaiting {
		// Before the job: the sweep reads the index only from the
		// watermark, and a start entry must never be there unread.
		if err := s.startWatermark(ctx, now); err != nil { // jobstart.go
			return "", false, fmt.Errorf("create job: %w", err)
		}
	}
	// No ClientRequestToken of ours: the items hold a fresh job id and
	// time on every call, so a token fixed per key would make AWS refuse a
	// client's retry with IdempotentParameterMismatch. The conditional put
	// of the idempotency record is what deduplicates.
	err = s.transact(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: items})
	if err == nil {
		return j.ID, true, nil
	}
	reasons := cancelReasons(err)
	if quotaAt >= 0 && len(reasons) == len(items) && reasons[0] != reasonCondFailed && reasons[quotaAt] == reasonCondFailed {
		return "", false, fmt.Errorf("create job: %w", ErrQuotaReached)
	}
	if p.Firing != nil && len(reasons) == len(items) && reasons[0] != reasonCondFailed && reasons[len(items)-1] == reasonCondFailed {
		return "", false, fmt.Errorf("create job for schedule %s: %w", p.Firing.ScheduleID, ErrCursorMoved)
	}
	if len(reasons) == len(items) && reasons[0] != reasonCondFailed && slices.Contains(reasons[linkAt:linkEnd], reasonCondFailed) {
		return "", false, fmt.Errorf("create rerun %s: %w", j.ID, ErrSourceGone)
	}
	if len(reasons) > 0 && reasons[0] == reasonCondFailed {
		out, gerr := s.db.GetItem(ctx, &dynamodb.GetItemInput{
			TableName: &s.table, Key: key(idemPK(j.Owner, p.IdemKey), idemSK), ConsistentRead: aws.Bool(true),
		})
		if gerr != nil {
			return "", false, fmt.Errorf("create job: read idempotency record: %w", gerr)
		}
		if out.Item == nil {
			return "", false, fmt.Errorf("create job: idempotency record vanished: %w", err)
		}
		if getS(out.Item, aSpecHash) != j.SpecHash {
			return getS(out.Item, aJob), false, domain.ErrIdempotencyConflict
		}
		return getS(out.Item, aJob), false, nil
	}
	return "", false, fmt.Errorf("create job %s: %w", j.ID, err)
}

// GetJob reads a job consistently, with its spec.
func (s *Store) JobGet(ctx context.Context, id string) (domain.Job, error) {
	out, err := s.db.GetItem(ctx, &dynamodb.GetItemInput{
		TableName: &s.table, Key: key(jobPK(id), jobSK), ConsistentRead: aws.Bool(true),
	})
	if err != nil {
		return domain.Job{}, fmt.Errorf("get job %s: %w", id, err)
	}
	if out.Item == nil {
		return domain.Job{}, fmt.Errorf("get job %s: %w", id, domain.ErrNotFound)
	}
	return decodeJob(id, out.Item)
}

func decodeJob(id string, item map[string]types.AttributeValue) (domain.Job, error) {
	j := domain.Job{
		ID: id, Owner: getS(item, aOwner), SpecHash: getS(item, aSpecHash),
		State: sm.JobState(getS(item, aState)), Error: getS(item, aErr), Manifest: getS(item, aManifest),
		StartAt: getT(item, aStartAt), Started: getT(item, aStarted),
		Created: getT(item, aCreated), Updated: getT(item, aUpdated), Ended: getT(item, aEnded),
		DataDeleted: getT(item, aDataDeleted), Deleting: getT(item, aDeleting),
		Redrives: decodeRedrives(item), RerunOf: getS(item, aRerunOf), Reused: decodeReused(item), // redrive.go
		Trace: getS(item, aTrace),
	}
	if raw := getS(item, aSpec); raw != "" {
		var sp spec.Job
		if err := json.Unmarshal([]byte(raw), &sp); err != nil {
			return j, fmt.Errorf("decode spec of job %s: %w", id, err)
		}
		j.Spec = &sp
	}
	return j, nil
}

// EndJob moves a RUNNING job to the destination of ev (succeed, fail or
// cancel). It reports sm.ErrInvalidTransition when the job already ended.
// The owner's job index item changes in the same transaction, so a job
// list never disagrees with the job.
func (s *Store) JobEnd(ctx context.Context, id string, ev sm.Event, reason, manifest string, now time.Time) error {
	_, err := s.JobEndEvent(ctx, id, ev, reason, manifest, now)
	return err
}

// EndJobEvent is EndJob, and returns the id of the ended event it wrote
// to the outbox (events.JobEndedID: a redriven job ends once per redrive,
// each time under a new id).
//
// The event's id names the redrive count read with the job's head, and
// the transaction holds only while the count is still that. A caller that
// read the job before it ended and was redriven decided to end the
// generation that already ended: it is refused (sm.ErrInvalidTransition),
// so it neither ends the redriven job for a stale reason nor writes one
// generation's id for another's ending (which would overwrite or repeat
// its event).
func (s *Store) JobEndEvent(ctx context.Context, id string, ev sm.Event, reason, manifest string, now time.Time) (string, error) {
	return s.JobEndGen(ctx, id, ev, reason, manifest, now, -1)
}

// EndJobGen is EndJobEvent for a caller that decided to end the job when
// its redrive count was gen (< 0: the count read here): a job redriven
// since is not the one the decision was about, and is left alone
// (sm.ErrInvalidTransition).
func (s *Store) JobEndGen(ctx context.Context, id string, ev sm.Event, reason, manifest string, now time.Time, gen int) (string, error) {
	for try := 0; ; try++ {
		evID, qn, err := s.endJobOnce(ctx, id, ev, reason, manifest, now, gen)
		if !errors.Is(err, sm.ErrInvalidTransition) || qn < 0 {
			return evID, err
		}
		// A charge (quotacharge.go) may have moved the count this end was
		// to give back: then read it again. The end must not give up
		// while the job still runs: refused, it reads to its callers as
		// "someone else ended the job", and a failure would leave the job
		// RUNNING with its stages ended. Charges are bounded (one per
		// stage's plan, one per split) and each try loses only to one
		// that landed inside it; past the first few tries, back off.
		h, herr := s.jobHead(ctx, id)
		if herr != nil || h.QuotaTasks == qn || h.State != sm.JobRunning {
			return evID, err
		}
		if try+1 >= endQuotaTries {
			if werr := backoff(ctx, try+2-endQuotaTries); werr != nil {
				return "", fmt.Errorf("%s job %s: charges kept moving its count: %w", ev, id, werr)
			}
		}
	}
}

// endJobOnce is one try of EndJobGen; qn is the count of a counted job it
// gave back or tried to (-1: not counted).
func (s *Store) endJobOnce(ctx context.Context, id string, ev sm.Event, reason, manifest string, now time.Time, gen int) (string, int, error) {
	head, err := s.jobHead(ctx, id)
	if err != nil {
		return "", -1, fmt.Errorf("%s job %s: %w", ev, id, err)
	}
	if gen >= 0 && head.Redrives != gen {
		return "", -1, fmt.Errorf("%s job %s: decided at redrive %d, the job is at %d: %w", ev, id, gen, head.Redrives, sm.ErrInvalidTransition)
	}
	qn := -1
	tr := sm.Jobs.Transition(ev)
	c := newCond()
	expr := transition(c, tr) + redriveCountCond(c, head.Redrives) // redrive.go
	to(c, tr)
	c.values[":now"] = ms(now)
	update := "SET #st = :to, upd = :now, #end = :now"
	names := map[string]string{"#st": aState, "#end": aEnded}
	if head.Quota {
		qn = head.QuotaTasks
		expr += endQuotaCond(c, names, qn) // quotacharge.go
	}
	if ttl := s.expiry(now); ttl != nil { // retention.go
		c.values[":ttl"] = ttl
		names["#ttl"] = aTTL // a reserved word
		update += ", #ttl = :ttl"
	}
	if reason != "" {
		c.values[":err"] = sv(reason)
		update += ", err = :err"
	}
	if manifest != "" {
		c.values[":man"] = sv(manifest)
		update += ", man = :man"
	}
	items := []types.TransactWriteItem{{Update: &types.Update{
		TableName: &s.table, Key: key(jobPK(id), jobSK),
		UpdateExpression:          aws.String(update + s.expiryDue(c, id, now)), // retention.go
		ConditionExpression:       aws.String(expr),
		ExpressionAttributeNames:  names,
		ExpressionAttributeValues: c.values,
	}}, {Put: &types.Put{
		TableName: &s.table, Item: s.withExpiry(ownerIndexItem(head.Owner, id, head.Name, tr.To, head.Created, now), now),
	}}}
	if head.Quota {
		// The job leaves its owner's quotas with the transition that ends
		// it, so exactly once.
		items = append(items, quotaUpdate(s.table, head.Owner, quotaJobs, -1, 0, quotaTasks, -head.QuotaTasks, 0))
	}
	// Every copy of the job's state record ends with the job item, in
	// this transaction, under the job item's condition (jobstate.go).
	items = append(items, s.expiring(s.jobStatePuts(id, tr.To, now), now)...)
	// The job's ended event, in its outbox, with its stages' counts
	// (outbox.go).
	stages, err := s.StageList(ctx, id)
	if err != nil {
		return "", qn, fmt.Errorf("%s job %s: %w", ev, id, err)
	}
	ended := withEventID(JobEndedEvent(id, head.Owner, head.Name, tr.To, reason, manifest, stages, now), events.JobEndedID(id, head.Redrives))
	evPut, err := s.outboxPut(ended)
	if err != nil {
		return "", qn, fmt.Errorf("%s job %s: %w", ev, id, err)
	}
	items = append(items, evPut)
	err = s.transact(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: items})
	if reasons := cancelReasons(err); len(reasons) > 0 && reasons[0] == reasonCondFailed {
		return "", qn, fmt.Errorf("%s job %s: %w", ev, id, sm.ErrInvalidTransition)
	}
	if err != nil {
		return "", qn, fmt.Errorf("%s job %s: %w", ev, id, err)
	}
	return ended.ID, qn, nil
}

// ---- stages --------------------------------------------------------------

// ListStages reads every stage of a job with one consistent Query.
func (s *Store) StageList(ctx context.Context, job string) ([]domain.Stage, error) {
	out, err := s.db.Query(ctx, &dynamodb.QueryInput{
		TableName:              &s.table,
		KeyConditionExpression: aws.String("pk = :pk AND begins_with(sk, :pre)"),
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":pk": sv(jobPK(job)), ":pre": sv("STAGE#"),
		},
		ConsistentRead: aws.Bool(true),
	})
	if err != nil {
		return nil, fmt.Errorf("list stages of job %s: %w", job, err)
	}
	stages := make([]domain.Stage, 0, len(out.Items))
	for _, it := range out.Items {
		st, err := decodeStage(job, it)
		if err != nil {
			return nil, err
		}
		stages = append(stages, st)
	}
	return stages, nil
}

// GetStage reads one stage consistently.
func (s *Store) StageGet(ctx context.Context, job string, idx int) (domain.Stage, error) {
	out, err := s.db.GetItem(ctx, &dynamodb.GetItemInput{
		TableName: &s.table, Key: key(jobPK(job), stageSK(idx)), ConsistentRead: aws.Bool(true),
	})
	if err != nil {
		return domain.Stage{}, fmt.Errorf("get stage %s/%d: %w", job, idx, err)
	}
	if out.Item == nil {
		return domain.Stage{}, fmt.Errorf("get stage %s/%d: %w", job, idx, domain.ErrNotFound)
	}
	return decodeStage(job, out.Item)
}

func decodeStage(job string, it map[string]types.AttributeValue) (domain.Stage, error) {
	sk := getS(it, attrSK)
	idx, err := strconv.Atoi(sk[len("STAGE#"):])
	if err != nil {
		return domain.Stage{}, fmt.Errorf("stage key %q: %w", sk, err)
	}
	st := domain.Stage{
		Job: job, Index: idx, Name: getS(it, aName), State: sm.StageState(getS(it, aState)),
		Total: int(getN(it, aTotal)), Shards: int(getN(it, aShards)), Materialized: getB(it, aMat),
		Enqueued: int(getN(it, aEnqueued)),
		Started:  getT(it, aStarted), Ended: getT(it, aEnded), Error: getS(it, aErr),
		Tolerated: int(getN(it, aTolerated)), Trace: getS(it, aTrace),
	}
	decodeCopyCounts(&st, it) // speculationstats.go
	decodeSegments(&st, it)   // segments.go
	return st, nil
}

// StageTransitionParams moves a stage along one event of its lifecycle.
type StageTransitionParams struct {
	Job   string
	Stage int
	Event sm.Event
	Now   time.Time
	// Due, when set, keeps the stage in the sweep index until then, so that
	// a crash before the follow-up work (materializing, unblocking
	// downstream) is finished by the sweep. Zero removes it from the index.
	Due    time.Time
	Reason string
	// Outbox, when set, is an event written to the outbox in the same
	// transaction (outbox.go): a stage's completion event. Only a
	// transition guarded by its job's state (start, complete) is a
	// transaction to add it to.
	Outbox *events.Event
	// Redrives, when set, is the job's redrive count the caller decided
	// on: the transition holds only while it is still the job's, so a
	// decision about a generation that ended and was redriven since
	// (redrive.go) never changes the redriven job's stage.
	Redrives *int
}

// TransitionStage applies one stage event as a conditional write. Exactly
// one caller wins a race; the others get sm.ErrInvalidTransition.
func (s *Store) StageTransition(ctx context.Context, p StageTransitionParams) error {
	tr := sm.Stages.Transition(p.Event)
	c := newCond()
	expr := transition(c, tr)
	to(c, tr)
	c.values[":now"] = ms(p.Now)
	update := "SET #st = :to, upd = :now"
	switch tr.To {
	case sm.StageRunning:
		update += ", sta = :now, mat = :f"
		c.values[":f"] = bv(false)
	default:
		update += ", #end = :now"
	}
	if p.Reason != "" {
		update += ", err = :err"
		c.values[":err"] = sv(p.Reason)
	}
	update += s.dueClause(c, jobPK(p.Job)+stageSK(p.Stage), p.Due)
	names := map[string]string{"#st": aState}
	if tr.To != sm.StageRunning {
		names["#end"] = aEnded
	}
	if running := slices.Contains(tr.Guards, sm.GuardJobRunning); running || p.Redrives != nil {
		// Once per stage, so the transaction's extra cost is small.
		items := []types.TransactWriteItem{{Update: &types.Update{
			TableName: &s.table, Key: key(jobPK(p.Job), stageSK(p.Stage)),
			UpdateExpression: aws.String(update), ConditionExpression: aws.String(expr),
			ExpressionAttributeNames: names, ExpressionAttributeValues: c.values,
		}}, jobCheck(s.table, p.Job, running, p.Redrives)}
		if p.Outbox != nil {
			put, err := s.outboxPut(*p.Outbox)
			if err != nil {
				return fmt.Errorf("%s stage %s/%d: %w", p.Event, p.Job, p.Stage, err)
			}
			items = append(items, put)
		}
		err := s.transact(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: items})
		switch reasons := cancelReasons(err); {
		case len(reasons) >= 2 && reasons[1] == reasonCondFailed:
			return fmt.Errorf("%s stage %s/%d: %w: %w", p.Event, p.Job, p.Stage, domain.ErrJobNotRunning, sm.ErrInvalidTransition)
		case len(reasons) >= 2 && reasons[0] == reasonCondFailed:
			return fmt.Errorf("%s stage %s/%d: %w", p.Event, p.Job, p.Stage, sm.ErrInvalidTransition)
		case err != nil:
			return fmt.Errorf("%s stage %s/%d: %w", p.Event, p.Job, p.Stage, err)
		}
		return nil
	}
	_, err := s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: &s.table, Key: key(jobPK(p.Job), stageSK(p.Stage)),
		UpdateExpression: aws.String(update), ConditionExpression: aws.String(expr),
		ExpressionAttributeNames: names, ExpressionAttributeValues: c.values,
	})
	if isCondFailed(err) {
		return fmt.Errorf("%s stage %s/%d: %w", p.Event, p.Job, p.Stage, sm.ErrInvalidTransition)
	}
	if err != nil {
		return fmt.Errorf("%s stage %s/%d: %w", p.Event, p.Job, p.Stage, err)
	}
	return nil
}

// jobRunningCheck is the transaction part that enforces sm.GuardJobRunning.
func jobRunningCheck(table, job string) types.TransactWriteItem {
	return jobCheck(table, job, true, nil)
}

// jobCheck is the transaction part that checks the job item: RUNNING
// (sm.GuardJobRunning), and, with redrives, still at that redrive count
// (redrive.go).
func jobCheck(table, job string, running bool, redrives *int) types.TransactWriteItem {
	c := newCond()
	expr := "attribute_exists(pk)"
	var names map[string]string
	if running {
		expr = "#st = :run"
		names = stNames
		c.values[":run"] = sv(string(sm.JobRunning))
	}
	if redrives != nil {
		expr += redriveCountCond(c, *redrives)
	}
	if len(c.values) == 0 {
		c.values = nil
	}
	return types.TransactWriteItem{ConditionCheck: &types.ConditionCheck{
		TableName: &table, Key: key(jobPK(job), jobSK),
		ConditionExpression:       aws.String(expr),
		ExpressionAttributeNames:  names,
		ExpressionAttributeValues: c.values,
	}}
}

// dueClause returns the update fragment that puts an item in the sweep
// index at due, or takes it out when due is zero. It must come last in a
// SET clause.
func (s *Store) dueClause(c *cond, pk string, due time.Time) string {
	if due.IsZero() {
		return " REMOVE gpk, due"
	}
	c.values[":gpk"] = sv(duePK(pk))
	c.values[":due"] = ms(due)
	return ", gpk = :gpk, due = :due"
}

// SetDue puts any record in the sweep index at due, or removes it (zero).
func (s *Store) DueSet(ctx context.Context, it DueItem, due time.Time) error {
	pk, sk := dueItemKey(it)
	c := newCond()
	upd := s.dueClause(c, pk+sk, due)
	if !due.IsZero() {
		upd = "SET " + upd[2:]
	}
	in := &dynamodb.UpdateItemInput{
		TableName: &s.table, Key: key(pk, sk), UpdateExpression: aws.String(upd),
		ConditionExpression: aws.String("attribute_exists(pk)"),
	}
	if len(c.values) > 0 {
		in.ExpressionAttributeValues = c.values
	}
	if _, err := s.db.UpdateItem(ctx, in); err != nil && !isCondFailed(err) {
		return fmt.Errorf("set due of %s %s/%s: %w", it.Kind, pk, sk, err)
	}
	return nil
}

// UnindexTask takes a finished task out of the sweep index, unless it has
// changed since t was read: a redrive that put it back to READY (with an
// entry of its own, which is what finds its message if it is lost) must
// keep that entry. Both the state and the update time are checked, so a
// task redriven and finished again since keeps its new entry too.
func (s *Store) TaskUnindex(ctx context.Context, t domain.Task) error {
	vals := map[string]types.AttributeValue{":st": sv(string(t.State))}
	unchanged := "#st = :st AND attribute_not_exists(upd)"
	if !t.Updated.IsZero() {
		unchanged, vals[":upd"] = "#st = :st AND upd = :upd", ms(t.Updated)
	}
	_, err := s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: &s.table, Key: key(taskPK(t.Ref), taskSK(t.Ref.Partition)),
		UpdateExpression:          aws.String("REMOVE gpk, due"),
		ConditionExpression:       aws.String(unchanged),
		ExpressionAttributeNames:  stNames,
		ExpressionAttributeValues: vals,
	})
	if err != nil && !isCondFailed(err) {
		return fmt.Errorf("take task %s out of the sweep index: %w", t.Ref, err)
	}
	return nil
}

// HurryStage brings a RUNNING stage's next sweep look forward to due; it
// never pushes a look back, and never puts a stage that left RUNNING (its
// follow-up done, it is out of the index) back in the index.
func (s *Store) StageHurry(ctx context.Context, job string, stage int, due time.Time) error {
	pk, sk := jobPK(job), stageSK(stage)
	c := newCond()
	upd := "SET " + s.dueClause(c, pk+sk, due)[2:]
	c.values[":running"] = sv(string(sm.StageRunning))
	_, err := s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: &s.table, Key: key(pk, sk), UpdateExpression: aws.String(upd),
		ConditionExpression:       aws.String("#st = :running AND (attribute_not_exists(due) OR due > :due)"),
		ExpressionAttributeNames:  stNames,
		ExpressionAttributeValues: c.values,
	})
	if err != nil && !isCondFailed(err) {
		return fmt.Errorf("hurry stage %s/%d: %w", job, stage, err)
	}
	return nil
}

// aEmptied is, on a stage record, the set of its counter shards that a
// count has emptied (ShardEmptied).
const aEmptied = "emp"

// ShardEmptied adds shard to its stage's set of emptied counter shards and
// says whether the set now holds every shard: only then is reading all
// the counters (Progress) worth its reads. Each count that empties a shard
// reads the set back from its own write, so of two that empty the last
// two shards at once, the later sees the set full. The set only gates the
// read: a shard counted up again (a dynamic split) stays in it, and the
// counters themselves decide completion. A stage with no record says
// false.
func (s *Store) ShardEmptied(ctx context.Context, job string, stage, shard int) (all bool, err error) {
	out, err := s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: &s.table, Key: key(jobPK(job), stageSK(stage)),
		UpdateExpression:          aws.String("ADD " + aEmptied + " :k"),
		ConditionExpression:       aws.String("attribute_exists(pk)"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":k": &types.AttributeValueMemberNS{Value: []string{strconv.Itoa(shard)}}},
		ReturnValues:              types.ReturnValueAllNew,
	})
	if isCondFailed(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("note emptied shard %d of stage %s/%d: %w", shard, job, stage, err)
	}
	emptied, _ := out.Attributes[aEmptied].(*types.AttributeValueMemberNS)
	shards := int(getN(out.Attributes, aShards))
	return emptied != nil && shards > 0 && len(emptied.Value) >= shards, nil
}

func dueItemKey(it DueItem) (pk, sk string) {
	switch it.Kind {
	case DueJob:
		return jobPK(it.Job), jobSK
	case DueStage:
		return jobPK(it.Job), stageSK(it.Stage)
	case DueEvent:
		return outboxPK(it.Event), outboxSK
	default:
		return taskPK(it.Task), taskSK(it.Task.Partition)
	}
}

// SetStagePlan records a stage's task count and shard count once. A second
// call (a materialization retried after a crash) keeps the first values and
// returns the stage as stored.
func (s *Store) StageSetPlan(ctx context.Context, job string, idx, total int) (domain.Stage, error) {
	out, err := s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: &s.table, Key: key(jobPK(job), stageSK(idx)),
		UpdateExpression:    aws.String("SET tot = :t, nsh = :n"),
		ConditionExpression: aws.String("attribute_exists(pk) AND attribute_not_exists(tot)"),
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":t": nv(int64(total)), ":n": nv(int64(ShardCount(total))),
		},
		// The stage as planned, without a read after: every
		// materialization plans once, and most are the first.
		ReturnValues: types.ReturnValueAllNew,
	})
	if err != nil && !isCondFailed(err) {
		return domain.Stage{}, fmt.Errorf("plan stage %s/%d: %w", job, idx, err)
	}
	if err == nil && len(out.Attributes) > 0 {
		return decodeStage(job, out.Attributes)
	}
	// Planned before (a repeated materialization), or gone.
	return s.StageGet(ctx, job, idx)
}

// AdvanceEnqueued records that a stage's tasks before partition to are
// written and sent, if its count still stands at from, and says whether
// it did. A stale from (a concurrent materializer got there first) is not
// an error: the caller reads the stage again and carries on from its
// count.
//
// due moves the stage's sweep check on with the progress, so a
// materialization that is slow but alive is not repeated alongside by
// the sweep; only one that stalls for a whole grace period is.
func (s *Store) StageAdvanceEnqueued(ctx context.Context, job string, idx, from, to int, due time.Time) (bool, error) {
	cond := "#enq = :from"
	if from == 0 {
		cond = "attribute_not_exists(#enq) OR #enq = :from"
	}
	c := newCond()
	c.values[":from"] = nv(int64(from))
	c.values[":to"] = nv(int64(to))
	upd := "SET #enq = :to" + s.dueClause(c, jobPK(job)+stageSK(idx), due)
	_, err := s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: &s.table, Key: key(jobPK(job), stageSK(idx)),
		UpdateExpression:          aws.String(upd),
		ConditionExpression:       aws.String(cond),
		ExpressionAttributeNames:  map[string]string{"#enq": aEnqueued},
		ExpressionAttributeValues: c.values,
	})
	if isCondFailed(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("advance stage %s/%d to %d enqueued: %w", job, idx, to, err)
	}
	return true, nil
}

// MarkMaterialized records that all of a stage's tasks and counters exist
// and their messages were sent; due is the stage's next completion check.
func (s *Store) StageMarkMaterialized(ctx context.Context, job string, idx int, due time.Time) error {
	c := newCond()
	c.values[":t"] = bv(true)
	c.values[":run"] = sv(string(sm.StageRunning))
	upd := "SET mat = :t" + s.dueClause(c, jobPK(job)+stageSK(idx), due)
	_, err := s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: &s.table, Key: key(jobPK(job), stageSK(idx)),
		UpdateExpression: aws.String(upd), ExpressionAttributeValues: c.values,
		// A stale materializer must not put an ended stage back in the
		// sweep index.
		ConditionExpression: aws.String("#st = :run"), ExpressionAttributeNames: stNames,
	})
	if isCondFailed(err) {
		return fmt.Errorf("mark stage %s/%d materialized: %w", job, idx, sm.ErrInvalidTransition)
	}
	if err != nil {
		return fmt.Errorf("mark stage %s/%d materialized: %w", job, idx, err)
	}
	return nil
}

// ---- completion counters -------------------------------------------------

// ShardPut creates a stage's completion counters if they do not exist.
// Each counter starts at the number of tasks that count it down. They go
// as PartiQL INSERTs, 25 to a request (a 2,000-task stage's 32 counters
// in 2 requests instead of 32 PutItems): an INSERT is a conditional put,
// so a counter that exists (a repeated materialization, after counts)
// is never reset. An endpoint that cannot run PartiQL gets a conditional
// PutItem per counter, as materialization's chunks get transactions
// (puttasks.go).
func (s *Store) ShardPut(ctx context.Context, job string, idx, total, shards int) error {
	sizes := ShardSizes(total, shards)
	items := make([]map[string]types.AttributeValue, len(sizes))
	for k, n := range sizes {
		items[k] = map[string]types.AttributeValue{
			attrPK: sv(shardPK(job, idx, k)), attrSK: sv(cntSK), aLeft: nv(int64(n)), aTotal: nv(int64(n)),
		}
	}
	if !s.partiQLOff() {
		err := s.insertItems(ctx, items)
		if err == nil {
			return nil
		}
		if ctx.Err() != nil {
			return fmt.Errorf("create the counters of stage %s/%d: %w", job, idx, err)
		}
		s.partiQLFailed()
	}
	for k, it := range items {
		_, err := s.db.PutItem(ctx, &dynamodb.PutItemInput{
			TableName: &s.table, Item: it,
			ConditionExpression: aws.String("attribute_not_exists(pk)"),
		})
		if err != nil && !isCondFailed(err) {
			return fmt.Errorf("create counter %d of stage %s/%d: %w", k, job, idx, err)
		}
	}
	return nil
}

// ShardLeft reads one counter consistently.
func (s *Store) ShardLeft(ctx context.Context, job string, idx, shard int) (int, error) {
	out, err := s.db.GetItem(ctx, &dynamodb.GetItemInput{
		TableName: &s.table, Key: key(shardPK(job, idx, shard), cntSK), ConsistentRead: aws.Bool(true),
	})
	if err != nil {
		return 0, fmt.Errorf("read counter %d of stage %s/%d: %w", shard, job, idx, err)
	}
	if out.Item == nil {
		return 0, fmt.Errorf("read counter %d of stage %s/%d: %w", shard, job, idx, domain.ErrNotFound)
	}
	return int(getN(out.Item, aLeft)), nil
}

// Progress sums a stage's counters with consistent batch reads.
//
// A dynamic split (dynsplit.go) raises counters, so they are not only
// counted down, and a batch read is no snapshot: the counter a split's new
// task lands on may be read before the split and the giver's after the
// giver committed, adding up to zero with the new task not committed. The
// split raises the stage's total in the same transaction, so a zero sum is
// trusted only when the total, read again after the counters, is the one
// they were read for: no split happened while they were read, they were
// only counted down, and each was at zero when the read ended. Otherwise
// the counters are read again for the new total.
func (s *Store) StageProgress(ctx context.Context, st domain.Stage) (domain.Progress, error) {
	for {
		p, err := s.progressOnce(ctx, st)
		if err != nil || !p.Complete() {
			return p, err
		}
		now, err := s.StageGet(ctx, st.Job, st.Index)
		if err != nil {
			return domain.Progress{}, fmt.Errorf("progress of stage %s/%d: %w", st.Job, st.Index, err)
		}
		if now.Total == st.Total {
			return p, nil
		}
		st = now
	}
}

func (s *Store) progressOnce(ctx context.Context, st domain.Stage) (domain.Progress, error) {
	p := domain.Progress{Total: st.Total}
	for lo := 0; lo < st.Shards; lo += 100 {
		var keys []map[string]types.AttributeValue
		for k := lo; k < min(lo+100, st.Shards); k++ {
			keys = append(keys, key(shardPK(st.Job, st.Index, k), cntSK))
		}
		left, found, err := s.batchGetLeft(ctx, keys)
		if err != nil {
			return p, fmt.Errorf("progress of stage %s/%d: %w", st.Job, st.Index, err)
		}
		p.Left += left
		p.Missing += len(keys) - found
	}
	p.Committed = st.Total - p.Left
	if p.Missing > 0 {
		// Counters not yet created: nothing of theirs has committed.
		p.Committed = 0
	}
	return p, nil
}

func (s *Store) batchGetLeft(ctx context.Context, keys []map[string]types.AttributeValue) (left, found int, err error) {
	for len(keys) > 0 {
		out, err := s.db.BatchGetItem(ctx, &dynamodb.BatchGetItemInput{
			RequestItems: map[string]types.KeysAndAttributes{s.table: {Keys: keys, ConsistentRead: aws.Bool(true)}},
		})
		if err != nil {
			return 0, 0, err
		}
		for _, it := range out.Responses[s.table] {
			left += int(getN(it, aLeft))
			found++
		}
		keys = out.UnprocessedKeys[s.table].Keys
	}
	return left, found, nil
}
