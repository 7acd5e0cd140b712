package readside

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"

	"github.com/batchwork/batchwork/shared/blob"
	"github.com/batchwork/batchwork/shared/control/page"
	"github.com/batchwork/batchwork/shared/domain"
	"github.com/batchwork/batchwork/shared/spec"
	sm "github.com/batchwork/batchwork/statemachine"
)

// Bad records: the records task functions rejected (batchwork's
// Task.Reject). An attempt writes its rejected records as one object
// (blob.BadRecordsKey) before it commits, and its commit adds their count
// to its stage's, guarded by the stage's maxBadRecords (dynamo's
// badRecordsUpdate). Only committed attempts count and are shown: an
// attempt that failed or was fenced may have left its object, but its
// commit never happened, so its count was never added and BadRecords
// skips its object.

// BadRecordCounts is how many records each stage of a job rejected in
// committed attempts, by stage index; nil when no stage allows any (then
// no commit can have added one, and nothing is read).
func (r *Reader) BadRecordCounts(ctx context.Context, sp *spec.Job, job string) (map[int]int64, error) {
	if sp == nil || !slices.ContainsFunc(sp.Stages, func(st spec.Stage) bool { return st.MaxBadRecords > 0 }) {
		return nil, nil
	}
	return r.store.StageBadRecordCounts(ctx, job)
}

// BadRecordsByName keys a job's bad-record counts by stage name, as its
// status and its history show them.
func BadRecordsByName(counts map[int]int64, sp *spec.Job) map[string]int64 {
	byName := map[string]int64{}
	for i, n := range counts {
		if i < len(sp.Stages) {
			byName[sp.Stages[i].Name] = n
		}
	}
	return byName
}

// noteBadRecords adds each stage's bad-record count to its status.
func noteBadRecords(counts map[int]int64, sp *spec.Job, stages []StageStatus) {
	if len(counts) == 0 {
		return
	}
	byName := BadRecordsByName(counts, sp)
	for i := range stages {
		stages[i].BadRecords = byName[stages[i].Name]
	}
}

// BadRecordsRequest asks for a page of a job's bad records, of one stage
// when Stage is set.
type BadRecordsRequest struct {
	Owner, ID string
	Stage     string
	Limit     int
	Cursor    string
}

// BadRecordPage is a page of a job's bad records: by stage name, then
// partition, then in the order the task rejected them.
type BadRecordPage struct {
	Job     string             `json:"job"`
	Records []domain.BadRecord `json:"records"`
	// Counts are each stage's committed bad records (stages without any
	// are absent).
	Counts     map[string]int64 `json:"counts"`
	NextCursor string           `json:"nextCursor,omitempty"`
}

// BadRecords lists the records a job's committed attempts rejected. Each
// page reads at most page.MaxReads attempt objects and checks their
// tasks, so a page may come back short, with a cursor.
func (r *Reader) BadRecords(ctx context.Context, req BadRecordsRequest) (BadRecordPage, error) {
	limit, err := page.CheckLimit(req.Limit)
	if err != nil {
		return BadRecordPage{}, err
	}
	j, err := r.kernel.OwnedJob(ctx, req.Owner, req.ID)
	if err != nil {
		return BadRecordPage{}, err
	}
	if !j.DataDeleted.IsZero() {
		return BadRecordPage{}, &DataDeletedError{ID: j.ID, At: j.DataDeleted}
	}
	if req.Stage != "" {
		if _, ok := j.Spec.StageIndex(req.Stage); !ok {
			return BadRecordPage{}, &spec.FieldError{Field: "stage", Message: fmt.Sprintf("job has no stage %q", req.Stage)}
		}
	}
	q := page.Query("badrecords", req.Owner, req.ID, req.Stage)
	afterKey, skip := "", 0
	if req.Cursor != "" {
		pos, err := page.Decode(q, req.Cursor, 2)
		if err != nil {
			return BadRecordPage{}, err
		}
		if skip, err = strconv.Atoi(pos[1]); err != nil || skip < 0 {
			return BadRecordPage{}, &spec.FieldError{Field: "cursor", Message: "is not a cursor of this query; start again without it"}
		}
		afterKey = pos[0]
	}
	out := BadRecordPage{Job: j.ID, Records: []domain.BadRecord{}, Counts: map[string]int64{}}
	counts, err := r.BadRecordCounts(ctx, j.Spec, j.ID)
	if err != nil {
		return BadRecordPage{}, err
	}
	for i, n := range counts {
		if i < len(j.Spec.Stages) && (req.Stage == "" || req.Stage == j.Spec.Stages[i].Name) {
			out.Counts[j.Spec.Stages[i].Name] = n
		}
	}
	if len(counts) == 0 {
		return out, nil // no committed attempt rejected a record
	}
	objs, err := r.blob.List(ctx, r.blob.Bucket(), blob.BadRecordsPrefix(j.ID, req.Stage))
	if err != nil {
		return BadRecordPage{}, fmt.Errorf("bad records of job %s: %w", j.ID, err)
	}
	keys := make([]string, 0, len(objs))
	for _, o := range objs {
		if o.Key >= afterKey {
			keys = append(keys, o.Key)
		}
	}
	slices.Sort(keys)
	reads := 0
	for _, k := range keys {
		if k != afterKey {
			skip = 0
		}
		if reads == page.MaxReads {
			out.NextCursor = page.Encode(q, k, "0")
			return out, nil
		}
		recs, err := r.committedBadRecords(ctx, j, k)
		if err != nil {
			return BadRecordPage{}, err
		}
		reads++
		for i := skip; i < len(recs); i++ {
			if len(out.Records) == limit {
				out.NextCursor = page.Encode(q, k, strconv.Itoa(i))
				return out, nil
			}
			out.Records = append(out.Records, recs[i])
		}
	}
	return out, nil
}

// committedBadRecords reads the bad records at key when its attempt is
// its task's committed one, and nothing otherwise: a failed or fenced
// attempt's.
func (r *Reader) committedBadRecords(ctx context.Context, j domain.Job, key string) ([]domain.BadRecord, error) {
	name, part, att, ok := blob.ParseBadRecordsKey(j.ID, key)
	if !ok {
		return nil, nil
	}
	idx, ok := j.Spec.StageIndex(name)
	if !ok {
		return nil, nil
	}
	t, err := r.store.TaskGet(ctx, domain.TaskRef{Job: j.ID, Stage: idx, Partition: part})
	if err != nil {
		return nil, fmt.Errorf("bad records %s: %w", key, err)
	}
	if t.State != sm.TaskSucceeded || t.CommittedAttempt != att {
		return nil, nil
	}
	body, err := r.blob.Get(ctx, key)
	if err != nil {
		return nil, fmt.Errorf("bad records %s: %w", key, err)
	}
	var recs []domain.BadRecord
	sc := bufio.NewScanner(bytes.NewReader(body))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		var r domain.BadRecord
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			return nil, fmt.Errorf("bad records %s: %w", key, err)
		}
		recs = append(recs, r)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("bad records %s: %w", key, err)
	}
	return recs, nil
}
