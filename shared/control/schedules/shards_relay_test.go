package schedules

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/batchwork/batchwork/shared/dynamo"
	"github.com/batchwork/batchwork/shared/queue"
	"github.com/batchwork/batchwork/shared/schedule"
)

// handOffStore is a Store whose one shard holds, in the minute after now,
// more firings than one shard run hands off (timerMaxPerShard), and
// nothing due.
type handOffStore struct {
	Store // nil: any other call panics
	wm    time.Time
	busy  schedule.Bucket
	n     int
	mu    sync.Mutex
	shard map[int]time.Time // each shard's watermark, as advanced
}

func (s *handOffStore) ScheduleWatermark(context.Context) (time.Time, bool, error) {
	return s.wm, true, nil
}

func (s *handOffStore) ScheduleShardTake(_ context.Context, shard int, run string, _, until time.Time) (schedule.ShardLease, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return schedule.ShardLease{Shard: shard, Owner: run, Expires: until, Watermark: s.shard[shard]}, nil
}

func (s *handOffStore) ScheduleShardAdvance(_ context.Context, shard int, _ string, _, to, _ time.Time) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.shard == nil {
		s.shard = map[int]time.Time{}
	}
	s.shard[shard] = to
	return nil
}

func (s *handOffStore) ScheduleShardRelease(context.Context, int, string) error { return nil }

func (s *handOffStore) ScheduleDueEntries(_ context.Context, b schedule.Bucket, limit int) ([]dynamo.IndexEntry, error) {
	if b != s.busy {
		return nil, nil
	}
	var es []dynamo.IndexEntry
	for i := 0; i < s.n && len(es) < limit; i++ {
		es = append(es, dynamo.IndexEntry{Bucket: b, ScheduleID: fmt.Sprintf("s%06d", i), Owner: "o", At: b.Minute})
	}
	return es, nil
}

type countingQueue struct {
	mu   sync.Mutex
	sent map[string]int
}

func (q *countingQueue) SendBatch(_ context.Context, _ string, msgs []queue.Send) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	for _, m := range msgs {
		if _, relay := parseShardMsg(m.Body); relay {
			continue
		}
		q.sent[m.Body]++
	}
	return nil
}

// A shard run whose window holds more firings than it may hand off used
// to relay the shard (handOff's `more` set `left`). The relayed run
// Queries the same buckets in the same order and hands off the same
// first timerMaxPerShard firings again, never the rest, and relays again:
// while the window stays over the limit (up to TimerWindow) the timer
// queue's consumer loops, each turn resending timerMaxPerShard duplicate
// timer messages. A relay must make progress: the run it asks for must
// hand off something not handed off before (or there must be no relay).
// The hand-off limit now relays nothing: the sweep fires the rest when due.
func TestShardHandOffOverLimitDoesNotRelay(t *testing.T) {
	now := time.Date(2026, 3, 1, 12, 0, 10, 0, time.UTC)
	st := &handOffStore{
		wm:   now.Truncate(time.Minute).Add(-time.Minute),
		busy: schedule.Bucket{Minute: now.Truncate(time.Minute).Add(time.Minute), Shard: 0},
		n:    timerMaxPerShard + 1,
	}
	q := &countingQueue{sent: map[string]int{}}
	f := New(Config{TimerQueue: "timer"}, st, q, nil, func() time.Time { return now }, slog.New(slog.NewTextHandler(io.Discard, nil)))
	c, err := f.FireShard(context.Background(), 0, now)
	if err != nil {
		t.Fatal(err)
	}
	if c.HandedOff != timerMaxPerShard {
		t.Errorf("handed off %d, want the limit %d", c.HandedOff, timerMaxPerShard)
	}
	if c.Relayed == 0 {
		return // over-limit firings left to the sweep: fine
	}
	before := len(q.sent)
	// The relay's run, as the timer queue's consumer would make it.
	c2, err := f.FireShard(context.Background(), 0, now)
	if err != nil {
		t.Fatal(err)
	}
	dups := 0
	for _, n := range q.sent {
		if n > 1 {
			dups++
		}
	}
	if len(q.sent) == before {
		t.Errorf("the relayed run handed off %d firings, all already handed off (%d duplicates), none of the %d left, and relayed again (%d times): a relay loop without progress",
			c2.HandedOff, dups, st.n-before, c2.Relayed)
	}
}

// failingStore is a Store two hours behind (so a run's walk is capped at
// fireMinutes and leaves work) whose shard-0 bucket Query fails, as under
// throttling or any error that outlasts a run.
type failingStore struct {
	handOffStore
	calls int
}

func (s *failingStore) ScheduleDueEntries(_ context.Context, b schedule.Bucket, _ int) ([]dynamo.IndexEntry, error) {
	s.calls++
	return nil, fmt.Errorf("query bucket %s: throttled", b.Key())
}

// A "fire shard" message whose run fails is kept for redelivery
// (FireTimers returns its error; the runner deletes only nil and
// ErrNotTimer), and FireShard has also sent a new relay for the work left
// (the capped walk). So each failing delivery becomes two live messages
// for the shard, each of which fails the same way and doubles again: the
// shard's messages multiply for as long as the error lasts (a lease held
// drops some, but every run releases at once after failing). A run must
// either relay (and be done with its message) or fail (and be delivered
// again), not both.
func TestFailingShardRunDoesNotRelay(t *testing.T) {
	now := time.Date(2026, 3, 1, 12, 0, 10, 0, time.UTC)
	st := &failingStore{handOffStore: handOffStore{wm: now.Truncate(time.Minute).Add(-2 * time.Hour)}}
	q := &relayQueue{}
	f := New(Config{TimerQueue: "timer"}, st, q, nil, func() time.Time { return now }, slog.New(slog.NewTextHandler(io.Discard, nil)))
	c, err := f.FireShard(context.Background(), 0, now)
	if err != nil && q.relays > 0 {
		t.Errorf("the run failed (%v: its message will be delivered again) and relayed the shard too (%d relays, counts %+v): two live messages where there was one", err, q.relays, c)
	}
}

type relayQueue struct {
	mu     sync.Mutex
	relays int
}

func (q *relayQueue) SendBatch(_ context.Context, _ string, msgs []queue.Send) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	for _, m := range msgs {
		if _, ok := parseShardMsg(m.Body); ok {
			q.relays++
		}
	}
	return nil
}

// Every run of a shard handed its window off again, relays included. A
// shard relayed because its fire budget or its 30-minute walk ran out
// (a busy minute: 6,250 due per shard at the documented 100,000 a
// minute, 500 per run, about 13 relays) sends the same window's timer
// messages once per relay, each a FireTimer that reads the schedule to
// find it fired. Here: two hours behind, nothing due, 10 firings in the
// window; the run and the relays it chains until the shard is caught up
// must hand each firing off once: only the run that leaves nothing
// behind hands off.
func TestRelayedShardRunsHandOffTheWindowOnce(t *testing.T) {
	now := time.Date(2026, 3, 1, 12, 0, 10, 0, time.UTC)
	st := &handOffStore{
		wm:   now.Truncate(time.Minute).Add(-2 * time.Hour),
		busy: schedule.Bucket{Minute: now.Truncate(time.Minute).Add(time.Minute), Shard: 0},
		n:    10,
	}
	q := &countingQueue{sent: map[string]int{}}
	f := New(Config{TimerQueue: "timer"}, st, q, nil, func() time.Time { return now }, slog.New(slog.NewTextHandler(io.Discard, nil)))
	runs := 0
	for ; runs < 10; runs++ {
		c, err := f.FireShard(context.Background(), 0, now)
		if err != nil {
			t.Fatal(err)
		}
		if c.Relayed == 0 {
			break
		}
	}
	total := 0
	for _, n := range q.sent {
		total += n
	}
	if total != st.n {
		t.Errorf("%d runs handed off %d timer messages for %d firings in the window", runs+1, total, st.n)
	}
}

// Relayed counts the relays sent: without a timer queue a shard with work
// left is the next sweep's, and nothing is relayed.
func TestShardRunWithoutTimerQueueCountsNoRelay(t *testing.T) {
	now := time.Date(2026, 3, 1, 12, 0, 10, 0, time.UTC)
	st := &handOffStore{wm: now.Truncate(time.Minute).Add(-2 * time.Hour)}
	q := &relayQueue{}
	f := New(Config{}, st, q, nil, func() time.Time { return now }, slog.New(slog.NewTextHandler(io.Discard, nil)))
	c, err := f.FireShard(context.Background(), 0, now)
	if err != nil {
		t.Fatal(err)
	}
	if c.Relayed != 0 || q.relays != 0 {
		t.Errorf("no timer queue: Relayed %d, %d relays sent; want 0", c.Relayed, q.relays)
	}
}
