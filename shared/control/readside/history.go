package readside

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/batchwork/batchwork/shared/control/page"
	"github.com/batchwork/batchwork/shared/domain"
	"github.com/batchwork/batchwork/shared/dynamo"
	"github.com/batchwork/batchwork/shared/spec"
	sm "github.com/batchwork/batchwork/statemachine"
)

// Timeline event types.
const (
	EventJobSubmitted    = "job.submitted"
	EventStageStarted    = "stage.started"
	EventTaskRetried     = "task.retried"
	EventTaskLeaseExpire = "task.lease_expired"
	EventTaskFailed      = "task.failed"
	// A stage's and a job's end events are "stage." and "job." followed by
	// the lower-case end state: stage.completed, job.cancelled and so on.
)

// Event is one entry of a job's timeline.
type Event struct {
	At        time.Time `json:"at"`
	Type      string    `json:"type"`
	Stage     string    `json:"stage,omitempty"`
	Task      string    `json:"task,omitempty"`
	Partition *int      `json:"partition,omitempty"`
	Attempt   int       `json:"attempt,omitempty"`
	Message   string    `json:"message,omitempty"`

	key string
}

// History is a page of a job's timeline, oldest first.
type History struct {
	Events     []Event `json:"events"`
	NextCursor string  `json:"nextCursor,omitempty"`
}

// HistoryRequest asks for a page of a job's timeline.
type HistoryRequest struct {
	Owner, ID string
	Limit     int
	Cursor    string
}

// History returns the ordered timeline of a job. The lifecycle events of
// the job and its stages are read from their records, which carry the time
// of every transition: they are exact and cost no extra writes. Task
// events (retries, expired leases, failures) are the attempt-end records.
func (r *Reader) History(ctx context.Context, req HistoryRequest) (History, error) {
	limit, err := page.CheckLimit(req.Limit)
	if err != nil {
		return History{}, err
	}
	j, err := r.kernel.OwnedJob(ctx, req.Owner, req.ID)
	if err != nil {
		return History{}, err
	}
	q := page.Query("history", req.Owner, req.ID)
	after := ""
	if req.Cursor != "" {
		pos, err := page.Decode(q, req.Cursor, 1)
		if err != nil {
			return History{}, err
		}
		after = pos[0]
	}
	stages, err := r.store.StageList(ctx, j.ID)
	if err != nil {
		return History{}, err
	}
	evs := lifecycleEvents(j, stages)
	stored, err := r.store.TimelineEvents(ctx, j.ID, after, limit+1)
	if err != nil {
		return History{}, err
	}
	for _, e := range stored {
		evs = append(evs, taskEvent(j.Spec, e))
	}
	bad, err := r.BadRecordCounts(ctx, j.Spec, j.ID)
	if err != nil {
		return History{}, err
	}
	noteBadRecordEvents(bad, j.Spec, evs)
	evs = slices.DeleteFunc(evs, func(e Event) bool { return e.key <= after })
	slices.SortFunc(evs, func(a, b Event) int { return strings.Compare(a.key, b.key) })
	h := History{Events: evs[:min(len(evs), limit)]}
	if len(evs) > limit {
		h.NextCursor = page.Encode(q, h.Events[limit-1].key)
	}
	return h, nil
}

func lifecycleEvents(j domain.Job, stages []domain.Stage) []Event {
	evs := []Event{{At: j.Created, Type: EventJobSubmitted, key: dynamo.EventKey(j.Created, dynamo.EventClassSubmitted, ""),
		Message: "job " + j.Spec.Name + " submitted with " + strconv.Itoa(len(j.Spec.Stages)) + " stages"}}
	for _, st := range stages {
		idx := padIndex(st.Index)
		if !st.Started.IsZero() {
			msg := ""
			if st.Total > 0 {
				msg = strconv.Itoa(st.Total) + " tasks"
			}
			evs = append(evs, Event{At: st.Started, Type: EventStageStarted, Stage: st.Name, Message: msg,
				key: dynamo.EventKey(st.Started, dynamo.EventClassStageStart, idx)})
		}
		if sm.Stages.IsTerminal(st.State) && !st.Ended.IsZero() {
			evs = append(evs, Event{At: st.Ended, Type: "stage." + strings.ToLower(string(st.State)), Stage: st.Name,
				Message: st.Error, key: dynamo.EventKey(st.Ended, dynamo.EventClassStageEnd, idx)})
		}
	}
	if sm.Jobs.IsTerminal(j.State) && !j.Ended.IsZero() {
		evs = append(evs, Event{At: j.Ended, Type: "job." + strings.ToLower(string(j.State)), Message: j.Error,
			key: dynamo.EventKey(j.Ended, dynamo.EventClassJobEnd, "")})
	}
	return append(evs, redriveEvents(j)...)
}

func padIndex(i int) string {
	if i < 10 {
		return "0" + strconv.Itoa(i)
	}
	return strconv.Itoa(i)
}

func taskEvent(sp *spec.Job, e dynamo.TimelineEvent) Event {
	typ := map[domain.AttemptEndKind]string{
		domain.AttemptRetried: EventTaskRetried, domain.AttemptLeaseExpired: EventTaskLeaseExpire, domain.AttemptFailed: EventTaskFailed,
	}[e.Kind]
	if typ == "" {
		typ = "task." + string(e.Kind)
	}
	p := e.Ref.Partition
	ev := Event{At: e.At, Type: typ, Task: e.Ref.String(), Partition: &p, Attempt: e.Attempt, Message: e.Err, key: e.Key}
	if e.Ref.Stage < len(sp.Stages) {
		ev.Stage = sp.Stages[e.Ref.Stage].Name
	}
	return ev
}

// noteBadRecordEvents adds each stage's bad-record count to the message
// of its end in a history page.
func noteBadRecordEvents(counts map[int]int64, sp *spec.Job, evs []Event) {
	if len(counts) == 0 {
		return
	}
	byName := BadRecordsByName(counts, sp)
	for i, e := range evs {
		n := byName[e.Stage]
		if n == 0 || e.Task != "" || !strings.HasPrefix(e.Type, "stage.") || e.Type == EventStageStarted {
			continue
		}
		note := strconv.FormatInt(n, 10) + " bad records skipped (batchwork result --bad-records)"
		if n == 1 {
			note = "1 bad record skipped (batchwork result --bad-records)"
		}
		evs[i].Message = strings.TrimPrefix(e.Message+"; "+note, "; ")
	}
}

// redriveEvents are the redrives of a job in its timeline: "job.redriven",
// with the error the job had failed with.
func redriveEvents(j domain.Job) []Event {
	var evs []Event
	for i, r := range j.Redrives {
		evs = append(evs, Event{At: r.At, Type: "job.redriven", Message: "redrive " + strconv.Itoa(i+1) + " after the job failed: " + r.Error,
			key: dynamo.EventKey(r.At, dynamo.EventClassJobEnd, "redrive"+strconv.Itoa(i))})
	}
	return evs
}
