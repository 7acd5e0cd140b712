package schedules

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/batchwork/batchwork/shared/domain"
	"github.com/batchwork/batchwork/shared/dynamo"
	"github.com/batchwork/batchwork/shared/queue"
	"github.com/batchwork/batchwork/shared/schedule"
	"github.com/batchwork/batchwork/shared/tuning"
)

// On-time firing. The sweep runs once a minute, so firing only from it can
// be a minute late. Instead each sweep also hands the firings due in the
// next TimerWindow to the timer queue, one message per firing, delayed to
// arrive timerLead before its time; the consumer (FireTimer) reads the
// schedule, waits for the time and fires.
//
// Nothing about a firing's guarantees moves to the queue: FireTimer fires
// through the sweep's own code path (fireEntry), so the job's idempotency
// key (schedule.FiringKey) and the conditional cursor still make it
// exactly one job per scheduled time, whoever gets there first. A paused
// or deleted schedule's messages are dropped on arrival, and one paused or
// deleted while its consumer waits gets no job (the job's transaction
// checks the schedule is as read), which is how pausing stops firings
// already handed to SQS. A message lost or failed is no worse than
// before: the sweep fires the time itself.
//
// A firing is handed off by every sweep that sees it within the window
// (with a 90 s window and a 1 minute sweep, once or twice): marking entries
// as handed off would cost a write per firing to save a message that is
// dropped with one read.

const (
	// TimerWindow is how far ahead the sweep hands firings off. It exceeds
	// the sweep's period, so every firing is handed off at least once.
	TimerWindow = 90 * time.Second
	// timerMaxPerSweep bounds the messages one sweep sends; firings beyond
	// it are fired by the sweep, later.
	timerMaxPerSweep = 2000
	// timerLead is how early a message is meant to arrive. The consumer
	// reads the schedule on arrival and then waits for the exact time, so
	// at the scheduled time only the job's own write is left to do, and
	// neither SQS's delivery (delays are whole seconds, and a long poll
	// may see a message that became visible a moment late) nor a consumer
	// busy with an earlier batch makes the firing late. The wait costs a
	// Lambda consumer about this long per batch; a burst of a thousand
	// firings at one instant needs a few seconds to be received and read
	// on the emulator.
	timerLead = tuning.TimerLead
	// timerMaxWait is how early a message may arrive and still be waited
	// out: the lead plus the rounding of delays to whole seconds, and a
	// margin. One arriving earlier (a delay capped at SQS's 15 minutes)
	// is handed back with the time left.
	timerMaxWait = timerLead + 2*time.Second
)

// timerMsg is a timer message's body.
type timerMsg struct {
	Owner string `json:"owner"`
	// Firing is schedule.FiringKey: the schedule and the scheduled time.
	Firing string `json:"firing,omitempty"`
	// Job and At are a job's start instead (starts.go).
	Job string    `json:"job,omitempty"`
	At  time.Time `json:"at,omitzero"`
	// Bucket is the index bucket the schedule's entry was in at handoff,
	// so the consumer moves the entry on as the sweep would.
	Bucket string `json:"bucket"`
}

// ErrNotTimer: a message is not a timer message. It can never succeed,
// so hosts drop it rather than retry it.
var ErrNotTimer = errors.New("not a timer message")

func parseTimer(body string) (timerMsg, string, time.Time, schedule.Bucket, error) {
	var m timerMsg
	if err := json.Unmarshal([]byte(body), &m); err != nil {
		return m, "", time.Time{}, schedule.Bucket{}, fmt.Errorf("%w: %v", ErrNotTimer, err)
	}
	if m.Job != "" { // a start (starts.go)
		b, err := schedule.ParseBucketKey(m.Bucket)
		if err != nil || m.Owner == "" || m.At.IsZero() || m.Firing != "" {
			return m, "", time.Time{}, schedule.Bucket{}, fmt.Errorf("%w: a start of %s: owner %q, at %s, bucket: %v", ErrNotTimer, m.Job, m.Owner, m.At, err)
		}
		return m, "", m.At, b, nil
	}
	id, at, err := schedule.ParseFiringKey(m.Firing)
	if err != nil {
		return m, "", time.Time{}, schedule.Bucket{}, fmt.Errorf("%w: %v", ErrNotTimer, err)
	}
	b, err := schedule.ParseBucketKey(m.Bucket)
	if err != nil || m.Owner == "" {
		return m, "", time.Time{}, schedule.Bucket{}, fmt.Errorf("%w: owner %q, bucket: %v", ErrNotTimer, m.Owner, err)
	}
	return m, id, at, b, nil
}

// timerDelay is the SQS delay for a firing at `at` handed off at now: the
// time left less timerLead, rounded down to whole seconds (the consumer
// waits out the rest), at most SQS's limit.
func timerDelay(at, now time.Time) time.Duration {
	return min(max(at.Sub(now)-timerLead, 0).Truncate(time.Second), queue.MaxDelay)
}

// HandOffTimers sends one delayed timer message per firing due after now
// and within TimerWindow, at most timerMaxPerSweep of them, from every
// shard. It Queries only the index buckets of the window's minutes. It
// returns how many it sent.
func (s *Firer) HandOffTimers(ctx context.Context, now time.Time) (int, error) {
	if _, ok, err := s.store.ScheduleWatermark(ctx); err != nil || !ok {
		return 0, err // no schedule was ever created
	}
	all := make([]int, schedule.ShardCount)
	for sh := range all {
		all[sh] = sh
	}
	n, _, err := s.handOff(ctx, now, all, timerMaxPerSweep)
	return n, err
}

// handOff hands off the window's firings of the given shards, at most
// limit; more says some were left over the limit.
func (s *Firer) handOff(ctx context.Context, now time.Time, shards []int, limit int) (int, bool, error) {
	if s.cfg.TimerQueue == "" {
		return 0, false, nil
	}
	until := now.Add(TimerWindow)
	var buckets []schedule.Bucket
	for m := now.UTC().Truncate(time.Minute); !m.After(until); m = m.Add(time.Minute) {
		for _, sh := range shards {
			buckets = append(buckets, schedule.Bucket{Minute: m, Shard: sh})
		}
	}
	res, errs := queryBuckets(ctx, s.store, buckets, limit+1)
	var sends []queue.Send
	var ats []time.Time
	more := false
	for i, es := range res {
		for _, e := range es {
			if !e.At.After(now) || e.At.After(until) {
				continue // due already (FireDue's), or beyond the window
			}
			if len(sends) == limit {
				more = true
				continue
			}
			body, err := json.Marshal(timerBody(e, buckets[i]))
			if err != nil {
				return 0, false, fmt.Errorf("hand off timers: %w", err)
			}
			sends = append(sends, queue.Send{Body: string(body)})
			ats = append(ats, e.At)
		}
	}
	err := errors.Join(errs...)
	// Sending a thousand messages takes seconds, so each group's delays
	// are worked out just before it is sent: a delay computed at the
	// start would make the last messages arrive that much late.
	for lo := 0; lo < len(sends); lo += timerSendGroup {
		hi := min(lo+timerSendGroup, len(sends))
		now := s.now()
		for i := lo; i < hi; i++ {
			sends[i].Delay = timerDelay(ats[i], now)
		}
		if serr := s.queue.SendBatch(ctx, s.cfg.TimerQueue, sends[lo:hi]); serr != nil {
			return lo, more, errors.Join(err, fmt.Errorf("hand off timers: %w", serr))
		}
	}
	if len(sends) > 0 {
		s.log.Info("schedule firings handed off", "count", len(sends), "shards", len(shards))
	}
	if err != nil {
		return len(sends), more, fmt.Errorf("hand off timers: %w", err)
	}
	return len(sends), more, nil
}

// timerSendGroup is how many timer messages are sent per delay
// computation: what queue.SendBatch sends at once (8 batches of 10).
const timerSendGroup = 80

// TimerOutcome says what FireTimer did with a message. Every outcome means
// the message is done with; only an error asks for a retry.
type TimerOutcome string

const (
	// TimerFired: the firing was handled now (a job started, or the
	// overlap policy skipped it).
	TimerFired TimerOutcome = "fired"
	// TimerAlreadyFired: the sweep or an earlier message handled it.
	TimerAlreadyFired TimerOutcome = "alreadyFired"
	// TimerDropped: the schedule is paused or deleted.
	TimerDropped TimerOutcome = "dropped"
	// TimerHandedBack: it arrived too early and was sent again with the
	// time left.
	TimerHandedBack TimerOutcome = "handedBack"
)

// FireTimer handles one timer message: it re-reads the schedule, drops the
// message if the schedule is paused or deleted or the time was already
// handled, waits out a remainder of at most timerMaxWait, and fires the
// schedule exactly as the sweep would, from the schedule as read: the
// job's creation is guarded by that state (see fireEntry), so a pause
// during the wait still stops the firing. A body that is not a timer
// message returns ErrNotTimer.
func (s *Firer) FireTimer(ctx context.Context, body string) (TimerOutcome, error) {
	if sh, ok := parseShardMsg(body); ok {
		return s.fireShardMessage(ctx, sh) // shards.go
	}
	m, id, at, b, err := parseTimer(body)
	if err != nil {
		return "", err
	}
	now := s.now()
	if left := at.Sub(now); left > timerMaxWait {
		err := s.queue.SendBatch(ctx, s.cfg.TimerQueue, []queue.Send{{Body: body, Delay: timerDelay(at, now)}})
		if err != nil {
			return "", fmt.Errorf("hand back timer %s%s: %w", m.Firing, m.Job, err)
		}
		return TimerHandedBack, nil
	}
	if m.Job != "" {
		return s.startTimer(ctx, dynamo.IndexEntry{Bucket: b, Job: m.Job, Owner: m.Owner, At: at}) // starts.go
	}
	rec, err := s.store.ScheduleGet(ctx, m.Owner, id)
	if errors.Is(err, domain.ErrNotFound) {
		return TimerDropped, nil // deleted; the sweep drops its index entry
	}
	if err != nil {
		return "", err
	}
	if rec.Schedule.Paused {
		return TimerDropped, nil
	}
	if !rec.Cursor.Before(at) {
		return TimerAlreadyFired, nil
	}
	if left := at.Sub(now); left > 0 {
		t := time.NewTimer(left)
		select {
		case <-ctx.Done():
			t.Stop()
			return "", ctx.Err()
		case <-t.C:
		}
		// The wait was real time; an injected clock may lag it by a
		// little, and the firing is due now either way.
		now = s.now()
		if now.Before(at) {
			now = at
		}
	}
	// A burst's job writes go before its follow-up work (firinggate.go).
	ctx, turn, err := s.enterFiring(ctx)
	if err != nil {
		return "", err
	}
	defer turn.done()
	var c FireCounts
	e := dynamo.IndexEntry{Bucket: b, ScheduleID: id, Owner: m.Owner, At: at}
	if err := s.fireEntry(ctx, e, &rec, now, &c, 2); err != nil {
		return "", fmt.Errorf("fire timer %s: %w", m.Firing, err)
	}
	switch {
	case c.Dropped > 0:
		return TimerDropped, nil // paused or deleted while it waited
	case c.Started+c.Skipped+c.Missed == 0:
		return TimerAlreadyFired, nil // a racing firer got there first
	}
	return TimerFired, nil
}

// IsTimerMessage reports whether body is a firing handed off to the timer
// queue (the queue also carries control's materialization relays).
func IsTimerMessage(body string) bool {
	if _, ok := parseShardMsg(body); ok {
		return true
	}
	_, _, _, _, err := parseTimer(body)
	return err == nil
}
