package dynamo

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/batchwork/batchwork/shared/domain"
	"github.com/batchwork/batchwork/shared/schedule"
)

// Schedule records, in the same single table:
//
//	SCH#<owner hash>     <schedule>    schedule: definition, paused, cursor, last job (one Query lists an owner's)
//	SCHB#<minute>#<nn>   <schedule>    upcoming-firings index: the schedule's next firing, by minute and shard
//	SCHR#<schedule>      <ms>          run history: one item per scheduled time fired, skipped or missed
//	SCHW                 SCHW          the index-wide firing watermark: every shard drained up to it
//	                                   (each shard's own is in scheduleshards.go)
//
// The sweep Queries only the index partitions of due minutes (16 per
// minute), never scanning. The cursor (the latest scheduled time handled)
// moves with a conditional write on its old value, so of two sweeps that
// planned the same firing only one moves it on; the job itself is made
// once by the submission's idempotency key (schedule.FiringKey).

func schedulePK(owner string) string { return "SCH#" + ownerKey(owner) }
func bucketPK(b schedule.Bucket) string {
	return "SCHB#" + b.Key()
}
func runPK(id string) string { return "SCHR#" + id }
func runSK(t time.Time) string {
	return fmt.Sprintf("%019d", max(t.UnixNano(), 0))
}

const watermarkKey = "SCHW"

// Attribute names of schedule records.
const (
	aDoc      = "doc"  // the schedule's JSON, without Paused
	aPaused   = "pz"   // paused
	aCursor   = "cur"  // last handled scheduled time, Unix ns
	aLastJob  = "lj"   // the job of the latest started firing
	aNext     = "nx"   // next firing, Unix ns (informational)
	aWater    = "wm"   // watermark minute, Unix ms
	aAction   = "act"  // run: started, skipped, missed
	aThrough  = "thr"  // run: latest scheduled time a catch-up covers
	aMissed   = "miss" // run: how many times were missed
	aCatchUp  = "cu"   // run: a catch-up firing
	aSchedAt  = "at"   // run/bucket: scheduled time, Unix ns
	aNoteText = "note"
)

// ErrCursorMoved: another sweep handled the firing first (or the schedule
// was paused, resumed or deleted meanwhile).
var ErrCursorMoved = errors.New("schedule cursor moved")

// ScheduleRecord is a stored schedule with its firing state.
type ScheduleRecord struct {
	Schedule schedule.Schedule
	Cursor   time.Time // zero before the first firing
	LastJob  string
	Next     time.Time
}

func nsv(t time.Time) types.AttributeValue { return nv(t.UnixNano()) }
func getNS(item map[string]types.AttributeValue, name string) time.Time {
	if _, ok := item[name]; !ok {
		return time.Time{}
	}
	return time.Unix(0, getN(item, name)).UTC()
}

func decodeSchedule(item map[string]types.AttributeValue) (ScheduleRecord, error) {
	var r ScheduleRecord
	if err := json.Unmarshal([]byte(getS(item, aDoc)), &r.Schedule); err != nil {
		return r, fmt.Errorf("decode schedule %s: %w", getS(item, attrSK), err)
	}
	r.Schedule.Paused = getB(item, aPaused)
	r.Cursor = getNS(item, aCursor)
	r.LastJob = getS(item, aLastJob)
	r.Next = getNS(item, aNext)
	return r, nil
}

func bucketItem(owner, id string, at, now time.Time) map[string]types.AttributeValue {
	// A firing already due goes in the current minute's bucket: the sweep
	// drains minutes only up to the one before now, so it is still found.
	place := at
	if place.Before(now) {
		place = now
	}
	return map[string]types.AttributeValue{
		attrPK: sv(bucketPK(schedule.BucketOf(id, place))), attrSK: sv(id),
		aOwner: sv(owner), aSchedAt: nsv(at),
	}
}

// CreateSchedule writes a schedule and its first index entry (at now, so
// the next sweep plans it) in one transaction, and starts the watermark
// if no schedule ever existed.
//
// The owner's schedule count (its quota item) moves in the same
// transaction; with maxSchedules > 0, an owner at that many gets
// ErrQuotaReached and nothing is written.
func (s *Store) ScheduleCreate(ctx context.Context, sc schedule.Schedule, now time.Time, maxSchedules int) error {
	doc := sc
	doc.Paused = false
	raw, err := json.Marshal(doc)
	if err != nil {
		return fmt.Errorf("create schedule: encode: %w", err)
	}
	err = s.transact(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{
		{Put: &types.Put{
			TableName: &s.table, ConditionExpression: aws.String("attribute_not_exists(pk)"),
			Item: map[string]types.AttributeValue{
				attrPK: sv(schedulePK(sc.Owner)), attrSK: sv(sc.ID),
				aDoc: sv(string(raw)), aPaused: bv(sc.Paused), aCreated: ms(now),
			},
		}},
		{Put: &types.Put{TableName: &s.table, Item: bucketItem(sc.Owner, sc.ID, now, now)}},
		quotaUpdate(s.table, sc.Owner, quotaScheds, 1, maxSchedules),
	}})
	if reasons := cancelReasons(err); len(reasons) == 3 && reasons[0] != reasonCondFailed && reasons[2] == reasonCondFailed {
		return fmt.Errorf("create schedule %s: %w", sc.ID, ErrQuotaReached)
	}
	if err != nil {
		return fmt.Errorf("create schedule %s: %w", sc.ID, err)
	}
	if err := s.startWatermark(ctx, now); err != nil { // jobstart.go
		return fmt.Errorf("create schedule %s: %w", sc.ID, err)
	}
	return nil
}

// GetSchedule reads an owner's schedule consistently.
func (s *Store) ScheduleGet(ctx context.Context, owner, id string) (ScheduleRecord, error) {
	out, err := s.db.GetItem(ctx, &dynamodb.GetItemInput{
		TableName: &s.table, Key: key(schedulePK(owner), id), ConsistentRead: aws.Bool(true),
	})
	if err != nil {
		return ScheduleRecord{}, fmt.Errorf("get schedule %s: %w", id, err)
	}
	if out.Item == nil {
		return ScheduleRecord{}, fmt.Errorf("get schedule %s: %w", id, domain.ErrNotFound)
	}
	return decodeSchedule(out.Item)
}

// ListSchedules lists an owner's schedules by id, at most limit of them,
// after the id `after`. It returns the last id when there may be more.
func (s *Store) ScheduleList(ctx context.Context, owner, after string, limit int) ([]ScheduleRecord, string, error) {
	in := &dynamodb.QueryInput{
		TableName: &s.table, KeyConditionExpression: aws.String("pk = :pk"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":pk": sv(schedulePK(owner))},
		Limit:                     aws.Int32(int32(limit)),
	}
	if after != "" {
		in.ExclusiveStartKey = key(schedulePK(owner), after)
	}
	out, err := s.db.Query(ctx, in)
	if err != nil {
		return nil, "", fmt.Errorf("list schedules: %w", err)
	}
	recs := make([]ScheduleRecord, 0, len(out.Items))
	for _, it := range out.Items {
		r, err := decodeSchedule(it)
		if err != nil {
			return nil, "", err
		}
		recs = append(recs, r)
	}
	next := ""
	if len(out.LastEvaluatedKey) > 0 {
		next = getS(out.LastEvaluatedKey, attrSK)
	}
	return recs, next, nil
}

// SetPaused pauses or resumes a schedule. Resuming moves the cursor to
// now, so the paused stretch is not caught up as downtime, and puts the
// schedule back in the index. It reports whether the state changed.
func (s *Store) ScheduleSetPaused(ctx context.Context, owner, id string, paused bool, now time.Time) (bool, error) {
	upd := &types.Update{
		TableName: &s.table, Key: key(schedulePK(owner), id),
		ConditionExpression:       aws.String("attribute_exists(pk) AND pz <> :pz"),
		UpdateExpression:          aws.String("SET pz = :pz"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":pz": bv(paused)},
	}
	items := []types.TransactWriteItem{{Update: upd}}
	if !paused {
		upd.UpdateExpression = aws.String("SET pz = :pz, cur = :cur")
		upd.ExpressionAttributeValues[":cur"] = nsv(now)
		items = append(items, types.TransactWriteItem{Put: &types.Put{TableName: &s.table, Item: bucketItem(owner, id, now, now)}})
	}
	err := s.transact(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: items})
	if reasons := cancelReasons(err); len(reasons) > 0 && reasons[0] == reasonCondFailed {
		if _, gerr := s.ScheduleGet(ctx, owner, id); gerr != nil {
			return false, gerr
		}
		return false, nil // already in that state
	}
	if err != nil {
		return false, fmt.Errorf("set schedule %s paused=%t: %w", id, paused, err)
	}
	return true, nil
}

// DeleteSchedule deletes a schedule. Its index entry is dropped by the
// sweep, which finds no schedule behind it; its run history stays.
func (s *Store) ScheduleDelete(ctx context.Context, owner, id string) error {
	err := s.transact(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{{
		Delete: &types.Delete{TableName: &s.table, Key: key(schedulePK(owner), id), ConditionExpression: aws.String("attribute_exists(pk)")},
	}, quotaUpdate(s.table, owner, quotaScheds, -1, 0)}})
	if reasons := cancelReasons(err); len(reasons) > 0 && reasons[0] == reasonCondFailed {
		return fmt.Errorf("delete schedule %s: %w", id, domain.ErrNotFound)
	}
	if err != nil {
		return fmt.Errorf("delete schedule %s: %w", id, err)
	}
	return nil
}

// AdvanceCursor moves a schedule's cursor from old to cur, records the
// latest started job and the next firing, moves the schedule's index
// entry from where it was found (entry) to the next firing and records
// the runs of the times it handled, in one transaction, on the condition
// that the cursor is still old and the schedule is not paused; otherwise
// ErrCursorMoved and nothing changes. One request per firing, and never
// a cursor advanced with its entry left behind or its runs unrecorded.
//
// Each run keeps SchedulePutRun's condition (the first record of a
// scheduled time wins, a started run replaces a skipped one or a missed
// one of its time alone); a run
// already recorded is left as it is and the rest is written without it.
func (s *Store) ScheduleAdvanceCursor(ctx context.Context, owner, id string, old, cur time.Time, lastJob string, next time.Time, entry IndexEntry, runs []Run, now time.Time) error {
	vals := map[string]types.AttributeValue{":cur": nsv(cur), ":nx": nsv(next), ":lj": sv(lastJob)}
	cond := cursorCondition(old, vals)
	// A zero cursor (nothing handled yet) and a zero next (no more
	// firings) are left out rather than stored as a meaningless number.
	// The cursor is always set, even unchanged, so the update is never
	// empty and the condition is always checked.
	sets := []string{}
	var remove string
	if cur.IsZero() {
		delete(vals, ":cur")
	} else {
		sets = append(sets, "cur = :cur")
	}
	if next.IsZero() {
		delete(vals, ":nx")
		remove = " REMOVE nx"
	} else {
		sets = append(sets, "nx = :nx")
	}
	if lastJob != "" {
		sets = append(sets, "lj = :lj")
	} else {
		delete(vals, ":lj")
	}
	if len(sets) == 0 {
		sets = append(sets, "pz = :f")
	}
	upd := "SET " + strings.Join(sets, ", ") + remove
	items := append([]types.TransactWriteItem{{Update: &types.Update{
		TableName: &s.table, Key: key(schedulePK(owner), id),
		ConditionExpression: &cond, UpdateExpression: &upd, ExpressionAttributeValues: vals,
	}}}, s.moveItems(entry, next, now)...)
	fixed := len(items)
	seen := map[string]bool{}
	for _, r := range runs {
		if sk := runSK(r.Scheduled); !seen[sk] { // one write per item in a transaction; the first wins
			seen[sk] = true
			put := s.runPut(id, r)
			items = append(items, types.TransactWriteItem{Put: &put})
		}
	}
	for {
		err := s.transact(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: items})
		reasons := cancelReasons(err)
		if len(reasons) > 0 && reasons[0] == reasonCondFailed {
			return ErrCursorMoved
		}
		// Runs already recorded (a firer that recorded them and died
		// before its cursor moved): they stay as they are.
		kept := items[:fixed:fixed]
		for i, it := range items[fixed:] {
			if len(reasons) != len(items) || reasons[fixed+i] != reasonCondFailed {
				kept = append(kept, it)
			}
		}
		if err != nil && len(kept) < len(items) {
			items = kept
			continue
		}
		if err != nil {
			return fmt.Errorf("advance schedule %s cursor: %w", id, err)
		}
		return nil
	}
}

// IndexEntry is one schedule in the upcoming-firings index, or one job's
// start (jobstart.go).
type IndexEntry struct {
	Bucket     schedule.Bucket
	ScheduleID string
	// Job is the job of a start entry (ScheduleID is then empty).
	Job   string
	Owner string
	At    time.Time
}

// DueEntries lists up to limit index entries of one bucket, over as many
// pages as that takes (a busy shard's minute holds thousands, past a
// page's 1 MB).
func (s *Store) ScheduleDueEntries(ctx context.Context, b schedule.Bucket, limit int) ([]IndexEntry, error) {
	var es []IndexEntry
	var start map[string]types.AttributeValue
	for len(es) < limit {
		out, err := s.db.Query(ctx, &dynamodb.QueryInput{
			TableName: &s.table, KeyConditionExpression: aws.String("pk = :pk"),
			ExpressionAttributeValues: map[string]types.AttributeValue{":pk": sv(bucketPK(b))},
			Limit:                     aws.Int32(int32(limit - len(es))), ConsistentRead: aws.Bool(true),
			ExclusiveStartKey: start,
		})
		if err != nil {
			return nil, fmt.Errorf("query bucket %s: %w", b.Key(), err)
		}
		for _, it := range out.Items {
			e := IndexEntry{Bucket: b, ScheduleID: getS(it, attrSK), Owner: getS(it, aOwner), At: getNS(it, aSchedAt)}
			if getS(it, aEntryKind) == entryStart {
				e.Job, e.ScheduleID = e.ScheduleID, ""
			}
			es = append(es, e)
		}
		if start = out.LastEvaluatedKey; len(start) == 0 {
			break
		}
	}
	return es, nil
}

// MoveEntry puts the schedule's entry for its next firing (none when next
// is zero) and removes the old one, unless both are the same bucket.
func (s *Store) ScheduleMoveEntry(ctx context.Context, old IndexEntry, next, now time.Time) error {
	items := s.moveItems(old, next, now)
	if err := s.transact(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: items}); err != nil {
		return fmt.Errorf("move schedule %s index entry: %w", old.ScheduleID, err)
	}
	return nil
}

// moveItems are the writes that move an index entry to next (zero: drop
// it): a put of the new entry and a delete of the old, or just the put
// when both are the same item.
func (s *Store) moveItems(old IndexEntry, next, now time.Time) []types.TransactWriteItem {
	var items []types.TransactWriteItem
	oldPK := bucketPK(old.Bucket)
	if !next.IsZero() {
		it := bucketItem(old.Owner, old.ScheduleID, next, now)
		items = append(items, types.TransactWriteItem{Put: &types.Put{TableName: &s.table, Item: it}})
		if getS(it, attrPK) == oldPK {
			oldPK = ""
		}
	}
	if oldPK != "" {
		items = append(items, types.TransactWriteItem{Delete: &types.Delete{TableName: &s.table, Key: key(oldPK, old.sk())}})
	}
	return items
}

// Watermark reads the firing watermark; ok is false when no schedule was
// ever created.
func (s *Store) ScheduleWatermark(ctx context.Context) (time.Time, bool, error) {
	out, err := s.db.GetItem(ctx, &dynamodb.GetItemInput{TableName: &s.table, Key: key(watermarkKey, watermarkKey), ConsistentRead: aws.Bool(true)})
	if err != nil {
		return time.Time{}, false, fmt.Errorf("read schedule watermark: %w", err)
	}
	if out.Item == nil {
		return time.Time{}, false, nil
	}
	return getT(out.Item, aWater), true, nil
}

// AdvanceWatermark moves the watermark forward from old to to; a sweep
// that lost the race leaves it alone.
func (s *Store) ScheduleAdvanceWatermark(ctx context.Context, old, to time.Time) error {
	_, err := s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: &s.table, Key: key(watermarkKey, watermarkKey),
		ConditionExpression: aws.String("wm = :old"), UpdateExpression: aws.String("SET wm = :to"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":old": ms(old), ":to": ms(to)},
	})
	if err != nil && !isCondFailed(err) {
		return fmt.Errorf("advance schedule watermark: %w", err)
	}
	return nil
}

// RunAction says what a scheduled time led to.
type RunAction string

const (
	RunStarted RunAction = "started"
	RunSkipped RunAction = "skipped" // the overlap policy skipped it
	RunMissed  RunAction = "missed"  // passed during downtime, not caught up
)

// Run is one entry of a schedule's history.
type Run struct {
	Scheduled time.Time
	Started   time.Time // when the job was created (zero unless started)
	JobID     string
	Action    RunAction
	CatchUp   bool
	Through   time.Time // for a catch-up or missed entry: the latest time covered
	Missed    int64
	Note      string
}

// PutRun records a run. The first record of a scheduled time wins, except
// that a started run replaces a skipped or missed one: of two racing
// sweeps one may see the previous run still going and the other not, or
// plan the time on time while the other plans it past its grace, and the
// history must name the job that exists.
func (s *Store) SchedulePutRun(ctx context.Context, id string, r Run) error {
	put := s.runPut(id, r)
	_, err := s.db.PutItem(ctx, &dynamodb.PutItemInput{
		TableName: put.TableName, Item: put.Item, ConditionExpression: put.ConditionExpression,
		ExpressionAttributeValues: put.ExpressionAttributeValues,
	})
	if isCondFailed(err) && r.Action == RunStarted {
		err = s.startedOverMissed(ctx, id, r) // schedules_missed.go
	}
	if err != nil && !isCondFailed(err) {
		return fmt.Errorf("record run of schedule %s at %s: %w", id, r.Scheduled.Format(time.RFC3339), err)
	}
	return nil
}

// runPut is the conditional put of a run record (SchedulePutRun).
func (s *Store) runPut(id string, r Run) types.Put {
	item := map[string]types.AttributeValue{
		attrPK: sv(runPK(id)), attrSK: sv(runSK(r.Scheduled)),
		aSchedAt: nsv(r.Scheduled), aAction: sv(string(r.Action)),
	}
	if !r.Started.IsZero() {
		item[aStarted] = nsv(r.Started)
	}
	if r.JobID != "" {
		item[aJob] = sv(r.JobID)
	}
	if r.CatchUp {
		item[aCatchUp] = bv(true)
	}
	if !r.Through.IsZero() {
		item[aThrough] = nsv(r.Through)
	}
	if r.Missed > 0 {
		item[aMissed] = nv(r.Missed)
	}
	if r.Note != "" {
		item[aNoteText] = sv(r.Note)
	}
	cond := "attribute_not_exists(pk)"
	var vals map[string]types.AttributeValue
	if r.Action == RunStarted {
		// A missed record of this time alone is replaced whole; one that
		// also summarises later times is SchedulePutRun's to merge.
		cond += " OR act = :sk OR (act = :mi AND " + aThrough + " = :at)"
		vals = map[string]types.AttributeValue{
			":sk": sv(string(RunSkipped)), ":mi": sv(string(RunMissed)), ":at": nsv(r.Scheduled),
		}
	}
	return types.Put{TableName: &s.table, Item: item, ConditionExpression: &cond, ExpressionAttributeValues: vals}
}

// Runs lists a schedule's history, newest first, at most limit entries
// before the scheduled time `before` (zero: from the newest).
func (s *Store) ScheduleRuns(ctx context.Context, id string, before time.Time, limit int) ([]Run, error) {
	in := &dynamodb.QueryInput{
		TableName: &s.table, KeyConditionExpression: aws.String("pk = :pk"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":pk": sv(runPK(id))},
		ScanIndexForward:          aws.Bool(false), Limit: aws.Int32(int32(limit)), ConsistentRead: aws.Bool(true),
	}
	if !before.IsZero() {
		in.KeyConditionExpression = aws.String("pk = :pk AND sk < :b")
		in.ExpressionAttributeValues[":b"] = sv(runSK(before))
	}
	out, err := s.db.Query(ctx, in)
	if err != nil {
		return nil, fmt.Errorf("list runs of schedule %s: %w", id, err)
	}
	runs := make([]Run, 0, len(out.Items))
	for _, it := range out.Items {
		runs = append(runs, Run{
			Scheduled: getNS(it, aSchedAt), Started: getNS(it, aStarted), JobID: getS(it, aJob),
			Action: RunAction(getS(it, aAction)), CatchUp: getB(it, aCatchUp), Through: getNS(it, aThrough),
			Missed: getN(it, aMissed), Note: getS(it, aNoteText),
		})
	}
	return runs, nil
}
