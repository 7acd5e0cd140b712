package stages

import (
	"context"
	"encoding/json"
	"errors"
	"sync"

	"github.com/batchwork/batchwork/shared/domain"
	"github.com/batchwork/batchwork/shared/dynamo"
	"github.com/batchwork/batchwork/shared/queue"
)

// Materialization in segments. A stage larger than SegmentTasks is split,
// once and by its first materializer (the size is recorded on the stage,
// so every caller works the same segments), into segments of SegmentTasks
// partitions, and each segment is queued by its own chain, as a stage of
// one chain is: chunks written before they are sent, the segment's count
// advanced after both with a conditional update, and a chain that loses
// the count to another yielding or carrying on from it. So each chunk is
// written once (its puts are conditional, a repeated chunk's duplicate
// messages are dropped at claim), and the chains run at once: queueing a
// million tasks is bounded by DynamoDB and SQS rather than by one loop.
//
// The caller that starts the stage (or the sweep that finds it stalled)
// runs SegmentWorkers unfinished segments in its own process and hands
// each of the others to a relay on the timer queue (relay.go), one message
// per segment, sent in batches of ten, which the sweep function consumes
// at once and concurrently. Without a timer queue the others are the next
// sweep's. A segment's relay that stops hands its own rest on the same
// way. The chain that sends a segment's last chunk reads the stage back:
// the one that finds every segment sent marks the stage materialized.
//
// The sweep stays the safety net: every chunk counted pushes the stage's
// check on by StartGrace, so a segment whose chain died (and whose relay
// was lost) is resumed by the sweep once no chain has counted a chunk for
// a grace period. A stage no larger than one segment never pays for
// any of this: it is the one chain it always was, with the same requests.

// segmentStage splits a large stage into segments of size tasks, once; a
// stage of one segment is returned as it is.
func segmentStage(ctx context.Context, store Store, stage domain.Stage, size int) (domain.Stage, error) {
	if stage.SegmentTasks > 0 || size <= 0 || stage.Total <= size {
		return stage, nil
	}
	return store.StageSetSegments(ctx, stage.Job, stage.Index, size)
}

// runSegments works every unfinished segment of a stage: SegmentWorkers of
// them here at once, the others through relays (or the sweep).
func (s *Lifecycle) runSegments(ctx context.Context, c chain, stage domain.Stage) error {
	var todo []int
	for k := range stage.SegmentCount() {
		if !stage.SegmentDone(k) {
			todo = append(todo, k)
		}
	}
	if len(todo) == 0 {
		return s.chainDone(ctx, c, stage)
	}
	here := todo[:min(len(todo), max(s.cfg.SegmentWorkers, 1))]
	rest := todo[len(here):]
	if len(rest) > 0 {
		if err := s.relaySegments(ctx, stage, rest); err != nil {
			return err
		}
	}
	errs := make([]error, len(here))
	var wg sync.WaitGroup
	for i, k := range here {
		wg.Add(1)
		go func() {
			defer wg.Done()
			done, err := s.runChain(ctx, c, stage, k, false)
			if err == nil && done {
				err = s.chainDone(ctx, c, stage)
			}
			errs[i] = err
		}()
	}
	wg.Wait()
	if len(rest) > 0 && s.cfg.Queues.Timer == "" {
		// The chains here pushed the stage's check on with each chunk:
		// the segments left are the next sweep's, not a grace later.
		errs = append(errs, s.store.DueSet(ctx, dynamo.DueItem{Kind: dynamo.DueStage, Job: stage.Job, Stage: stage.Index}, s.Now()))
	}
	return errors.Join(errs...)
}

// relaySegments hands segments to relays on the timer queue, one each,
// with the stage due a grace later as the safety net; without a timer
// queue (or if the send fails), the stage due now, for the next sweep.
func (s *Lifecycle) relaySegments(ctx context.Context, stage domain.Stage, segs []int) error {
	it := dynamo.DueItem{Kind: dynamo.DueStage, Job: stage.Job, Stage: stage.Index}
	if s.cfg.Queues.Timer != "" {
		if err := s.store.DueSet(ctx, it, s.Now().Add(s.cfg.StartGrace)); err != nil {
			return err
		}
		msgs := make([]queue.Send, 0, len(segs))
		var err error
		for _, k := range segs {
			var body []byte
			if body, err = json.Marshal(relayMsg{Relay: &Relay{Job: stage.Job, Stage: stage.Index, Segment: k, From: stage.SegmentNext(k)}}); err != nil {
				break
			}
			msgs = append(msgs, queue.Send{Body: string(body)})
		}
		if err == nil {
			err = s.queue.SendBatch(ctx, s.cfg.Queues.Timer, msgs)
		}
		if err == nil {
			return nil
		}
		s.log.Warn("materialization relays not sent; the sweep carries on", "job_id", stage.Job, "stage", stage.Index, "segments", len(segs), "err", err)
	}
	return s.store.DueSet(ctx, it, s.Now())
}
