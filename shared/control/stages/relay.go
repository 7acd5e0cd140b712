package stages

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/batchwork/batchwork/shared/cost/meter"
	"github.com/batchwork/batchwork/shared/domain"
	"github.com/batchwork/batchwork/shared/dynamo"
	"github.com/batchwork/batchwork/shared/queue"
	"github.com/batchwork/batchwork/shared/tuning"
	sm "github.com/batchwork/batchwork/statemachine"
)

// Materialization relays. One materialize call queues at most
// ChunksPerCall chunks (or what fits in its deadline), so a 100,000-task
// stage takes several calls. Left to the sweep, which runs once a minute,
// that is ten minutes of waiting; instead the call that stops with tasks
// left relays the rest through the timer queue, which the sweep function
// consumes at once (the local runner's RunTimers too), and the consumer
// materializes the next ChunksPerCall chunks, and so on: the stage is
// queued in one continuous run.
//
// The sweep stays the safety net. The stage stays in its index, due a
// StartGrace after the last chunk recorded (every chunk pushes it on), so
// a relay lost, failed or dead-lettered is picked up by the sweep
// as before. A process without the timer queue (the api and commit
// functions on AWS) leaves the rest to the sweep as before, and the
// sweep's own materialization hands on from there.
//
// A relay is idempotent: it names the stage and the Enqueued count
// when it is sent, and resumes from the stage's recorded count. One that finds
// the count moved on (a duplicate delivered after the first ran, or the
// sweep stepped in) does nothing: whoever moved it owns the rest. Two
// delivered at once both write the next chunk (conditional puts; the
// duplicate messages are dropped at claim) and the one that loses the
// count's conditional update stops, so duplicates never multiply.
//
// A stage queued in segments (segments.go) has a relay per segment: it
// names the segment, whose own count it resumes from, and the same rules
// hold for each.

// relayMsg is a relay's body on the timer queue. Its one field
// ("continue", kept on the wire) tells it from a timer message
// (timerMsg), which has none.
type relayMsg struct {
	Relay *Relay `json:"continue"`
}

// Relay names the stage whose materialization goes on, and where.
type Relay struct {
	Job   string `json:"job"`
	Stage int    `json:"stage"`
	// Segment is the segment it queues (segments.go); 0 for a stage of
	// one chain.
	Segment int `json:"segment,omitempty"`
	// From is the segment's count (the stage's Enqueued count for segment
	// 0) when the relay is sent.
	From int `json:"from"`
}

// RelayBudget bounds the materialization of one relay: it then hands
// on again. It is well inside the sweep function's timeout and the timer
// queue's visibility (both tuning.SweepTimeout).
const RelayBudget = tuning.SweepTimeout * 2 / 3

// ParseRelay says whether body is a relay, and which.
func ParseRelay(body string) (Relay, bool) {
	var m relayMsg
	if json.Unmarshal([]byte(body), &m) != nil || m.Relay == nil || m.Relay.Job == "" || m.Relay.Stage < 0 || m.Relay.Segment < 0 {
		return Relay{}, false
	}
	return *m.Relay, true
}

// leaveRest is how a materialize call that stops with tasks left hands
// them on: a relay on the timer queue, with the stage due a grace
// later as the safety net; without a timer queue (or if the send fails),
// the stage due now, for the next sweep.
func (s *Lifecycle) leaveRest(ctx context.Context, job string, idx, seg, enqueued int) error {
	it := dynamo.DueItem{Kind: dynamo.DueStage, Job: job, Stage: idx}
	if s.cfg.Queues.Timer != "" {
		// The safety net first: once the message is sent, a consumer may
		// already be recording chunks, each of which pushes the due on.
		if err := s.store.DueSet(ctx, it, s.Now().Add(s.cfg.StartGrace)); err != nil {
			return err
		}
		body, err := json.Marshal(relayMsg{Relay: &Relay{Job: job, Stage: idx, Segment: seg, From: enqueued}})
		if err == nil {
			err = s.queue.SendBatch(ctx, s.cfg.Queues.Timer, []queue.Send{{Body: string(body)}})
		}
		if err == nil {
			return nil
		}
		s.log.Warn("materialization relay not sent; the sweep carries on", "job_id", job, "stage", idx, "err", err)
	}
	return s.store.DueSet(ctx, it, s.Now())
}

// MaterializeRelay handles a relay: it materializes the next
// chunks of the stage it names, if the stage is still running, not yet
// materialized, and its count still where the relay left it.
func (s *Lifecycle) MaterializeRelay(ctx context.Context, c Relay) error {
	ctx = meter.WithJob(ctx, c.Job) // its requests are the job's cost
	ctx, cancel := context.WithTimeout(ctx, RelayBudget)
	defer cancel()
	st, err := s.store.StageGet(ctx, c.Job, c.Stage)
	if errors.Is(err, domain.ErrNotFound) {
		return nil // the job was deleted
	}
	if err != nil {
		return fmt.Errorf("continue stage %s/%d: %w", c.Job, c.Stage, err)
	}
	if st.State != sm.StageRunning || st.Materialized || c.Segment >= st.SegmentCount() || st.SegmentNext(c.Segment) != c.From {
		return nil // ended, done, or another materializer moved it on
	}
	state, err := s.store.JobState(ctx, c.Job)
	if err != nil && !errors.Is(err, domain.ErrNotFound) {
		return fmt.Errorf("continue stage %s/%d: %w", c.Job, c.Stage, err)
	}
	if state != sm.JobRunning {
		return nil // the sweep cancels the stages of an ended job
	}
	sp, err := s.CachedSpec(ctx, c.Job)
	if err != nil {
		return fmt.Errorf("continue stage %s/%d: %w", c.Job, c.Stage, err)
	}
	if c.Stage >= len(sp.Stages) {
		return nil // names no stage of the job: never valid
	}
	began := time.Now()
	if err := s.materializeStage(ctx, c.Job, sp, c.Stage, c.Segment, c.From); err != nil {
		return fmt.Errorf("continue stage %s/%d: %w", c.Job, c.Stage, err)
	}
	s.log.Info("stage materialization continued", "job_id", c.Job, "stage", sp.Stages[c.Stage].Name, "segment", c.Segment, "from", c.From, "took", time.Since(began))
	return nil
}
