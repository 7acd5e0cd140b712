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

// Ready markers keep a stage's tasks out of the sweep index.
//
// The sweep must find a READY task whose message was lost, and a CLAIMED
// task whose lease lapsed with its message gone. Each task used to enter
// the index when it was written, and its claim, every heartbeat and its
// commit moved or removed the entry: an index write per step of every
// task, doubled inside the commit's transaction, and what made the index
// shards hot at 10,000 tasks a second.
//
// Now a materialization chunk writes its tasks without index entries and
// one marker item in the index in their place, in the same transaction:
//
//	RDY#<job>#<stage>#<bucket>   <first partition>#<end partition>
//
// (bucket: TaskBucket of the first partition, so a job's markers are found
// without reading, like its tasks). The marker stays in the index until
// every task of its chunk has finished or has an entry of its own. A
// claim and a heartbeat of such a task write its due time (lease + grace)
// on the task item but no gpk, so the task is not in the index: no index
// write at all on the per-task path.
//
// When the marker falls due, DueItems looks at its chunk (one consistent
// Query): a task still READY (the first look is at the tasks' StuckAfter,
// and every later one is later) and a task whose due time has passed (a
// lapsed lease) go into the index on their own (due ExpandedRecheck
// later, in case this sweep run does not get to them) and are returned as
// due tasks; from there the sweep handles them as it handles any indexed
// task (sweepTask: resend, back off, take over, exhaust, cancel when the
// job ended). The marker is then due again at the earliest time anything
// else in its chunk could need the sweep, or leaves the index when
// nothing can. A task with its own entry (a retry, a failure, a redrive,
// a speculative copy) is the index's to watch, and the marker skips it.
// A chunk whose stage completed before its first look costs its marker's
// write and a share of one more (readydone.go: the stage is read once for
// all its markers, and readydonebatch.go: a run removes them together); a chunk of long tasks costs reads of its stage and its
// chunk and a write per look, not an index write per heartbeat of each
// task.
const readyPrefix = "RDY#"

// aMarkAt is, on the marker of a chunk whose tasks were not written
// (sm.TaskUnwritten, puttasks.go), when the chunk was materialized; the
// marker's mx holds the tasks' attempts. A look reads a missing task of
// such a chunk as READY since then.
const aMarkAt = "mkt"

// ExpandedRecheck is when a task that an expanded marker returned is due
// again in its own index entry: a sweep run that handles it moves that on
// (a resend backs it off); one that stops first leaves it due soon. Not
// due at once, so that the same run, reading the task's own shard later,
// does not handle it twice.
const ExpandedRecheck = time.Minute

// malformedRecheck is when the sweep reports an index entry it cannot
// parse again.
const malformedRecheck = 24 * time.Hour

func readyPK(job string, stage, bucket int) string {
	return readyPrefix + job + "#" + strconv.Itoa(stage) + "#" + strconv.Itoa(bucket)
}

func readySK(lo, hi int) string { return fmt.Sprintf("%06d#%06d", lo, hi) }

// readyMarkerItem is the marker of tasks lo..hi-1 of one stage, due at due.
// Its first look is at due, when its READY tasks have waited too long
// (StuckAfter); every later look is later still.
func readyMarkerItem(job string, stage, lo, hi int, due time.Time) map[string]types.AttributeValue {
	pk, sk := readyPK(job, stage, lo/TaskBucket), readySK(lo, hi)
	return map[string]types.AttributeValue{
		attrPK: sv(pk), attrSK: sv(sk), attrGPK: sv(duePK(pk + sk)), attrDue: ms(due),
	}
}

// readyMarker is a marker as the index shows it.
type readyMarker struct {
	job       string
	stage     int
	lo, hi    int
	key       map[string]types.AttributeValue
	due       types.AttributeValue // as indexed: its removal is conditional on it
	pk, sk    string
	malformed bool
}

// parseReadyMarker says whether an index item is a ready marker.
func parseReadyMarker(it map[string]types.AttributeValue) (readyMarker, bool) {
	pk, sk := getS(it, attrPK), getS(it, attrSK)
	if !strings.HasPrefix(pk, readyPrefix) {
		return readyMarker{}, false
	}
	m := readyMarker{pk: pk, sk: sk, key: key(pk, sk), due: it[attrDue]}
	parts := strings.Split(strings.TrimPrefix(pk, readyPrefix), "#")
	bounds := strings.Split(sk, "#")
	var err1, err2, err3 error
	if len(parts) == 3 && len(bounds) == 2 {
		m.job = parts[0]
		m.stage, err1 = strconv.Atoi(parts[1])
		m.lo, err2 = strconv.Atoi(bounds[0])
		m.hi, err3 = strconv.Atoi(bounds[1])
	}
	m.malformed = m.job == "" || err1 != nil || err2 != nil || err3 != nil || m.hi < m.lo
	return m, true
}

// expandReady adds to items the tasks behind each due marker that the
// sweep must handle now, each put in the index on the way (see above), and
// moves each marker it looked at on: due again when the next of its
// tasks could need the sweep, or out of the index. It stops once items
// holds limit records; the markers left are due at the next run. A
// marker it cannot look at stays due, and its error comes back beside the
// items of the others: one bad record never stops the sweep of a shard.
func (s *Store) expandReady(ctx context.Context, now time.Time, items []DueItem, markers []readyMarker, limit int) ([]DueItem, error) {
	var errs []error
	for _, m := range markers {
		if len(items) >= limit {
			break
		}
		var err error
		if items, err = s.expandMarker(ctx, now, items, m); err != nil {
			errs = append(errs, err)
		}
	}
	return items, errors.Join(errs...)
}

// expandMarker is expandReady's look at one marker. On an error it returns
// items as they were: what it put in the index is due again soon anyway.
func (s *Store) expandMarker(ctx context.Context, now time.Time, items []DueItem, m readyMarker) ([]DueItem, error) {
	in := items
	if m.malformed {
		// Nothing this code wrote: reported, and moved a day on so that
		// it does not take a place in every run's page of the shard.
		if err := s.moveMarker(ctx, m, now.Add(malformedRecheck)); err != nil {
			return in, err
		}
		return in, fmt.Errorf("unexpected key %q/%q in the sweep index", m.pk, m.sk)
	}
	st, completed, err := s.markerStage(ctx, m) // readydone.go
	if err != nil {
		return in, err
	}
	if completed {
		// Removed with the run's others (readydonebatch.go).
		if s.done.add(m) {
			return in, s.DueRemoveDone(ctx)
		}
		return items, nil
	}
	def, err := s.markerDef(ctx, m)
	if err != nil {
		return in, err
	}
	watched, committed, err := s.readyWatched(ctx, m, def)
	if err != nil {
		return in, err
	}
	var next time.Time // zero: nothing left for this marker to watch
	again := func(at time.Time) {
		if next.IsZero() || at.Before(next) {
			next = at
		}
	}
	recheck := now.Add(ExpandedRecheck)
	var queued *bool // sentAndRunning, read once per marker when needed
	for _, w := range watched {
		var put bool
		switch {
		case w.task.State == sm.TaskReady:
			if queued == nil {
				q, err := s.sentAndRunning(ctx, m, st)
				if err != nil {
					return in, err
				}
				queued = &q
			}
			if age := now.Sub(w.task.Updated); *queued && age < SentWait {
				// Behind a backlog, not lost: look again after as
				// long as it has waited, and resend at SentWait.
				again(minTime(now.Add(max(age, ExpandedRecheck)), w.task.Updated.Add(SentWait)))
				continue
			}
			var unwritten *domain.Task
			if w.task.Unwritten {
				unwritten = &w.task
			}
			put, err = s.indexIn(ctx, w.task.Ref, sm.TaskReady, recheck, unwritten)
		case !w.due.IsZero() && w.due.After(now):
			again(w.due)
			continue
		default: // a lease lapsed (or a record of an earlier release)
			put, err = s.indexLapsed(ctx, w, recheck)
		}
		if err != nil {
			return in, err
		}
		if !put {
			// It moved on since the read (claimed, renewed, finished):
			// look again rather than lose sight of it.
			again(recheck)
			continue
		}
		items = append(items, DueItem{Kind: DueTask, Job: w.task.Ref.Job, Stage: w.task.Ref.Stage, Task: w.task.Ref})
	}
	if next.IsZero() {
		// The chunk's last look: a committed task that was never
		// counted (its committer died between the two writes,
		// count.go) goes into the index for the sweep to count.
		if items, err = s.indexUncounted(ctx, m, st, committed, recheck, items); err != nil {
			return in, err
		}
	}
	if err := s.moveMarker(ctx, m, next); err != nil {
		return in, err
	}
	return items, nil
}

// SentWait is how long a task whose message SQS acknowledged may wait
// unclaimed before the sweep resends it. A message SQS acknowledged is
// not lost (it stays until received and deleted, moved to the dead-letter
// queue, whose messages the sweep returns, or past the queue's 4-day
// retention), so a task still READY then is waiting behind its stage's
// backlog, and a resend at StuckAfter would only add a duplicate to the
// queue, a refused claim and index writes, again at each doubling wait: a
// task queued for four hours was resent about six times. The resend
// remains for chunks whose send was never confirmed (the materializer
// died between writing the tasks and sending them) and for ended jobs
// (the sweep cancels their READY tasks), both at the first look.
const SentWait = time.Hour

// sentAndRunning says whether a marker's chunk was sent and acknowledged
// (the stage's enqueued count, or its segment's, which a materializer advances only after
// SendMessageBatch succeeded, covers it) and its job is running. st is
// the marker's stage as its look read it (nil: gone).
func (s *Store) sentAndRunning(ctx context.Context, m readyMarker, st *domain.Stage) (bool, error) {
	if st == nil || !st.Sent(m.hi-1) { // its segment's count, in a stage queued in segments
		return false, nil
	}
	state, err := s.JobState(ctx, m.job)
	if errors.Is(err, domain.ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	return state == sm.JobRunning, nil
}

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

// moveMarker makes a marker due at next, or takes it out of the index
// (next zero). The item stays, a few bytes, until the job's records are
// deleted (jobdelete.go). Conditional on the due time read: a
// materialization that has written the marker again since (a repeated
// chunk) set a later one, and its tasks are not all in this read.
func (s *Store) moveMarker(ctx context.Context, m readyMarker, next time.Time) error {
	in := &dynamodb.UpdateItemInput{
		TableName: &s.table, Key: m.key,
		UpdateExpression:          aws.String("REMOVE gpk, due"),
		ConditionExpression:       aws.String("due = :due"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":due": m.due},
	}
	if !next.IsZero() {
		in.UpdateExpression = aws.String("SET due = :next")
		in.ExpressionAttributeValues[":next"] = ms(next)
	}
	if _, err := s.db.UpdateItem(ctx, in); err != nil && !isCondFailed(err) {
		return fmt.Errorf("move ready marker %s/%s in the sweep index: %w", m.pk, m.sk, err)
	}
	return nil
}

// watchedTask is a task a marker watches, as read: its due time is the
// lease's end plus grace for a claimed task.
type watchedTask struct {
	task domain.Task
	due  time.Time
	upd  types.AttributeValue
}

// markerDef reads a marker's item, consistently, for the definition of
// its chunk's unwritten tasks (sm.TaskUnwritten); nil when the chunk's
// tasks were written (or the marker is gone with its job).
func (s *Store) markerDef(ctx context.Context, m readyMarker) (*domain.Task, error) {
	out, err := s.db.GetItem(ctx, &dynamodb.GetItemInput{TableName: &s.table, Key: m.key, ConsistentRead: aws.Bool(true)})
	if err != nil {
		return nil, fmt.Errorf("read ready marker %s/%s: %w", m.pk, m.sk, err)
	}
	if out.Item == nil || out.Item[aMarkAt] == nil {
		return nil, nil
	}
	return &domain.Task{State: sm.TaskUnwritten, MaxAttempts: int(getN(out.Item, aMax)), Updated: getT(out.Item, aMarkAt)}, nil
}

// readyWatched reads a marker's tasks, consistently, and returns those the
// marker still watches: unfinished, and in no index entry of their own;
// and the partitions of those that committed, with no entry of their own.
// With def, a task of the chunk with no record is watched as def says.
func (s *Store) readyWatched(ctx context.Context, m readyMarker, def *domain.Task) (watched []watchedTask, committed []int, err error) {
	if m.hi <= m.lo {
		return nil, nil, nil
	}
	written := make([]bool, m.hi-m.lo)
	for b := m.lo / TaskBucket; b <= (m.hi-1)/TaskBucket; b++ {
		var start map[string]types.AttributeValue
		for {
			out, err := s.db.Query(ctx, &dynamodb.QueryInput{
				TableName:              &s.table,
				KeyConditionExpression: aws.String("pk = :pk AND sk BETWEEN :lo AND :hi"),
				ExpressionAttributeValues: map[string]types.AttributeValue{
					":pk": sv(taskBucketPK(m.job, m.stage, b)), ":lo": sv(taskSK(m.lo)), ":hi": sv(taskSK(m.hi - 1)),
				},
				ConsistentRead:    aws.Bool(true),
				ExclusiveStartKey: start,
			})
			if err != nil {
				return nil, nil, fmt.Errorf("read tasks of ready marker %s/%s: %w", m.pk, m.sk, err)
			}
			for _, it := range out.Items {
				p, err := strconv.Atoi(getS(it, attrSK))
				if err != nil {
					return nil, nil, fmt.Errorf("task key %q/%q is malformed", getS(it, attrPK), getS(it, attrSK))
				}
				if p >= m.lo && p < m.hi {
					written[p-m.lo] = true
				}
				t := decodeTask(domain.TaskRef{Job: m.job, Stage: m.stage, Partition: p}, it)
				switch {
				case getS(it, attrGPK) != "":
				case t.State == sm.TaskSucceeded:
					// Only a split commit (count.go) can have left its
					// task uncounted; it keeps a due time, which a commit
					// that counted in its transaction removes.
					if it[attrDue] != nil {
						committed = append(committed, p)
					}
				case !sm.Tasks.IsTerminal(t.State):
					watched = append(watched, watchedTask{task: t, due: getT(it, attrDue), upd: it[aUpdated]})
				}
			}
			if start = out.LastEvaluatedKey; start == nil {
				break
			}
		}
	}
	if def != nil {
		for i, w := range written {
			if !w {
				t := unwrittenTask(domain.TaskRef{Job: m.job, Stage: m.stage, Partition: m.lo + i}, def.MaxAttempts)
				t.Updated = def.Updated
				watched = append(watched, watchedTask{task: t})
			}
		}
	}
	return watched, committed, nil
}

// indexUncounted puts those of a marker's committed tasks that their
// counters have not counted in the index, due at due, and adds them to
// items for this sweep run.
func (s *Store) indexUncounted(ctx context.Context, m readyMarker, st *domain.Stage, committed []int, due time.Time, items []DueItem) ([]DueItem, error) {
	left, err := s.uncounted(ctx, st, committed)
	if err != nil {
		return nil, fmt.Errorf("counts of ready marker %s/%s: %w", m.pk, m.sk, err)
	}
	for _, p := range left {
		ref := domain.TaskRef{Job: m.job, Stage: m.stage, Partition: p}
		put, err := s.indexIn(ctx, ref, sm.TaskSucceeded, due, nil)
		if err != nil {
			return nil, err
		}
		if put {
			items = append(items, DueItem{Kind: DueTask, Job: m.job, Stage: m.stage, Task: ref})
		}
	}
	return items, nil
}

// indexIn puts a task that is in state (a waiting task, READY; a
// committed one to be counted, SUCCEEDED) in the index at due, unless it
// has moved on (claimed, or in the index already) since it was read; put
// says whether it did. With unwritten (a READY task read from its
// marker: sm.TaskUnwritten), a task with no record is written as that
// says, in the index; one that a claim wrote meanwhile has moved on.
func (s *Store) indexIn(ctx context.Context, ref domain.TaskRef, state sm.TaskState, due time.Time, unwritten *domain.Task) (put bool, err error) {
	pk, sk := taskPK(ref), taskSK(ref.Partition)
	in := &dynamodb.UpdateItemInput{
		TableName: &s.table, Key: key(pk, sk),
		UpdateExpression:         aws.String("SET gpk = :gpk, due = :due"),
		ConditionExpression:      aws.String("#st = :st AND attribute_not_exists(gpk)"),
		ExpressionAttributeNames: map[string]string{"#st": aState},
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":gpk": sv(duePK(pk + sk)), ":due": ms(due), ":st": sv(string(state)),
		},
	}
	if unwritten != nil {
		vals := in.ExpressionAttributeValues
		vals[":mx"], vals[":zero"], vals[":upd"] = nv(int64(unwritten.MaxAttempts)), nv(0), ms(unwritten.Updated)
		in.UpdateExpression = aws.String("SET gpk = :gpk, due = :due, #st = if_not_exists(#st, :st), mx = if_not_exists(mx, :mx), " +
			"att = if_not_exists(att, :zero), upd = if_not_exists(upd, :upd)")
		in.ConditionExpression = aws.String("attribute_not_exists(pk) OR (" + *in.ConditionExpression + ")")
	}
	_, err = s.db.UpdateItem(ctx, in)
	if isCondFailed(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("put %s task %s in the sweep index: %w", state, ref, err)
	}
	return true, nil
}

// indexLapsed puts a task whose due time passed in the index at due,
// unless it has changed at all since it was read (a heartbeat, a commit,
// a takeover all write upd).
func (s *Store) indexLapsed(ctx context.Context, w watchedTask, due time.Time) (put bool, err error) {
	pk, sk := taskPK(w.task.Ref), taskSK(w.task.Ref.Partition)
	vals := map[string]types.AttributeValue{":gpk": sv(duePK(pk + sk)), ":due": ms(due)}
	unchanged := "attribute_not_exists(upd)" // every writer sets upd; never fail the shard over one that did not
	if w.upd != nil {
		unchanged, vals[":upd"] = "upd = :upd", w.upd
	}
	_, err = s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: &s.table, Key: key(pk, sk),
		UpdateExpression:          aws.String("SET gpk = :gpk, due = :due"),
		ConditionExpression:       aws.String(unchanged + " AND attribute_not_exists(gpk)"),
		ExpressionAttributeValues: vals,
	})
	if isCondFailed(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("put lapsed task %s in the sweep index: %w", w.task.Ref, err)
	}
	return true, nil
}
