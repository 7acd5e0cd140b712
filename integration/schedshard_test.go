package integration

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/batchwork/batchwork/shared/control"
	"github.com/batchwork/batchwork/shared/dynamo"
	"github.com/batchwork/batchwork/shared/schedule"
)

// The shard lease's conditions on DynamoDB Local, each step one of the
// rules of schedule.ShardLease, in order on one shard.
func TestScheduleShardLeaseConditions(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil, envOptions{noRun: true})
	st := e.r.Store
	ctx := context.Background()
	t0 := time.Now().UTC().Truncate(time.Minute)
	wm := func(m int) time.Time { return t0.Add(time.Duration(m) * time.Minute) }
	const lease = 45 * time.Second
	steps := []struct {
		name string
		do   func() error
		want error
	}{
		{"a never-taken shard is taken", func() error {
			l, err := st.ScheduleShardTake(ctx, 3, "a", t0, t0.Add(lease))
			if err == nil && (!l.Watermark.IsZero() || l.Owner != "a" || l.Shard != 3) {
				return fmt.Errorf("took %+v, want shard 3 held by a with no watermark", l)
			}
			return err
		}, nil},
		{"another run cannot take a live lease", func() error {
			_, err := st.ScheduleShardTake(ctx, 3, "b", t0.Add(lease-time.Millisecond), t0.Add(2*lease))
			return err
		}, dynamo.ErrShardLeased},
		{"the holder renews it", func() error {
			_, err := st.ScheduleShardTake(ctx, 3, "a", t0.Add(time.Second), t0.Add(lease))
			return err
		}, nil},
		{"a non-holder cannot advance the watermark", func() error {
			return st.ScheduleShardAdvance(ctx, 3, "b", time.Time{}, wm(1), t0.Add(time.Second))
		}, dynamo.ErrShardLost},
		{"the holder advances a shard with no watermark (from the global one)", func() error {
			return st.ScheduleShardAdvance(ctx, 3, "a", time.Time{}, wm(1), t0.Add(time.Second))
		}, nil},
		{"an advance from a watermark that moved is refused", func() error {
			return st.ScheduleShardAdvance(ctx, 3, "a", time.Time{}, wm(2), t0.Add(time.Second))
		}, dynamo.ErrShardLost},
		{"the holder advances from the watermark as read", func() error {
			return st.ScheduleShardAdvance(ctx, 3, "a", wm(1), wm(2), t0.Add(2*time.Second))
		}, nil},
		{"the holder cannot advance once its lease expired", func() error {
			return st.ScheduleShardAdvance(ctx, 3, "a", wm(2), wm(3), t0.Add(lease))
		}, dynamo.ErrShardLost},
		{"another run takes an expired lease over, with the watermark", func() error {
			l, err := st.ScheduleShardTake(ctx, 3, "b", t0.Add(lease), t0.Add(2*lease))
			if err == nil && (!l.Watermark.Equal(wm(2)) || l.Owner != "b") {
				return fmt.Errorf("took over %+v, want b holding watermark %s", l, wm(2))
			}
			return err
		}, nil},
		{"the old holder's release leaves the new holder's lease", func() error {
			if err := st.ScheduleShardRelease(ctx, 3, "a"); err != nil {
				return err
			}
			_, err := st.ScheduleShardTake(ctx, 3, "c", t0.Add(lease+time.Second), t0.Add(3*lease))
			return err
		}, dynamo.ErrShardLeased},
		{"a released lease is taken at once", func() error {
			if err := st.ScheduleShardRelease(ctx, 3, "b"); err != nil {
				return err
			}
			_, err := st.ScheduleShardTake(ctx, 3, "c", t0.Add(lease+time.Second), t0.Add(3*lease))
			return err
		}, nil},
		{"every shard taken is read back", func() error {
			ls, err := st.ScheduleShards(ctx)
			if err == nil && (len(ls) != 1 || ls[0].Shard != 3 || ls[0].Owner != "c" || !ls[0].Watermark.Equal(wm(2))) {
				return fmt.Errorf("shards %+v, want shard 3 held by c at %s", ls, wm(2))
			}
			return err
		}, nil},
	}
	for _, s := range steps {
		err := s.do()
		if s.want == nil && err != nil || s.want != nil && !errors.Is(err, s.want) {
			t.Fatalf("%s: %v, want %v", s.name, err, s.want)
		}
	}
}

// shardRig is a schedRig with n hourly schedules planned for h0.
func newShardRig(t *testing.T, n int) (*schedRig, []control.ScheduleView) {
	t.Helper()
	r := newSchedRig(t)
	scs := make([]control.ScheduleView, n)
	var wg sync.WaitGroup
	sem := make(chan struct{}, 8)
	for i := range scs {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			scs[i] = r.create("sharded", `,"overlap":"allow"`)
		})
	}
	wg.Wait()
	r.fireUntilCaughtUp() // plans each: its first firing is h0
	return r, scs
}

// checkFiredOnce checks that each schedule recorded exactly one run at
// h0, started, and that the owner has one job per schedule.
func (r *schedRig) checkFiredOnce(scs []control.ScheduleView) {
	r.t.Helper()
	var jobs []string
	for _, sc := range scs {
		runs := r.runs("sharded", sc.ID)
		if got := r.runSummary(runs); !slices.Equal(got, []string{"started@0s"}) {
			r.t.Errorf("schedule %s (shard %d): runs %v, want one started@0s", sc.ID, schedule.ShardOf(sc.ID), got)
			continue
		}
		jobs = append(jobs, runs[0].JobID)
	}
	l, err := r.svc.ListJobs(context.Background(), control.ListJobsRequest{Owner: "sharded", Limit: 100})
	if err != nil {
		r.t.Fatal(err)
	}
	if len(l.Jobs) != len(scs) || len(slices.Compact(slices.Sorted(slices.Values(jobs)))) != len(scs) {
		r.t.Errorf("%d jobs, %d distinct in the runs; want one per schedule, %d", len(l.Jobs), len(jobs), len(scs))
	}
}

// R concurrent runs, each asking for every shard in its own order (as the
// timer queue's consumers run relayed shards), fire a burst due at one
// instant across all shards: every firing once, each shard fired by one
// run at a time.
func TestScheduleShardedBurst(t *testing.T) {
	t.Parallel()
	const n, runs = 48, 4
	r, scs := newShardRig(t, n)
	r.at(2 * time.Second)
	svcs := make([]*control.Service, runs)
	for i := range svcs {
		svcs[i] = r0service(r.e, r.clk)
	}
	var fired, leased atomic.Int64
	var wg sync.WaitGroup
	errs := make([]error, runs)
	for i, svc := range svcs {
		wg.Go(func() {
			for k := range schedule.ShardCount {
				sh := (k*5 + i*4) % schedule.ShardCount
				c, err := svc.FireShard(context.Background(), sh, r.clk.Now())
				if err != nil {
					errs[i] = err
					return
				}
				fired.Add(int64(c.Started))
				leased.Add(int64(c.Leased))
			}
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	// A shard asked for while another run held it was left to that run,
	// which fired it whole.
	for sh := range schedule.ShardCount {
		c, err := r.svc.FireShard(context.Background(), sh, r.clk.Now())
		if err != nil || c.Started != 0 {
			t.Fatalf("shard %d after the burst: %+v, %v; want nothing left to fire", sh, c, err)
		}
	}
	if fired.Load() != n {
		t.Errorf("runs created %d jobs (%d shard requests left to a holder), want %d", fired.Load(), leased.Load(), n)
	}
	r.checkFiredOnce(scs)
}

// settledTransport sends a request only while its context is live, and
// then lets it finish whatever becomes of the context. A run killed over
// it has had every request it sent answered by the time its call
// returns, so nothing it sent lands after the test has moved on. On AWS a
// dying process's last take or release may land late; this test is about
// the takeover of the leases left, and a lease released (or taken) late
// changes how many the second run finds held after it looked.
type settledTransport struct{ inner http.RoundTripper }

func (s settledTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if err := req.Context().Err(); err != nil {
		return nil, err
	}
	return s.inner.RoundTrip(req.WithContext(context.WithoutCancel(req.Context())))
}

// settledStore is a store over its own client whose requests settle
// (settledTransport).
func settledStore(e *env) *dynamo.Store {
	cfg := e.cfg.Copy()
	cfg.HTTPClient = &http.Client{Transport: settledTransport{http.DefaultTransport.(*http.Transport).Clone()}}
	return dynamo.New(dynamodb.NewFromConfig(cfg), e.r.Resources.Table)
}

// cursorKill is the store of a run that dies after k schedules' cursors
// advanced: the k-th advance is written but its answer is lost, and the
// run's context is cancelled, as a process's end would stop it.
type cursorKill struct {
	*dynamo.Store
	k      int32
	n      atomic.Int32
	cancel context.CancelFunc
}

func (s *cursorKill) ScheduleAdvanceCursor(ctx context.Context, owner, id string, old, cur time.Time, lastJob string, next time.Time, entry dynamo.IndexEntry, runs []dynamo.Run, now time.Time) error {
	err := s.Store.ScheduleAdvanceCursor(ctx, owner, id, old, cur, lastJob, next, entry, runs, now)
	if err == nil && s.n.Add(1) == s.k {
		s.cancel()
		return context.Canceled
	}
	return err
}

// A run killed mid-shard (after some firings, one of them with its cursor
// written and the answer lost) holds its shards until their leases
// expire; another run then takes them over from their watermarks, and
// every firing is recorded once, none lost.
func TestScheduleShardTakenOverAfterKill(t *testing.T) {
	t.Parallel()
	const n = 32
	r, scs := newShardRig(t, n)
	r.at(2 * time.Second)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	dying := r0serviceOver(r.e, r.clk, &cursorKill{Store: settledStore(r.e), k: 5, cancel: cancel})
	if _, err := dying.FireDue(ctx, r.clk.Now()); err == nil {
		t.Fatal("the killed run reported no error")
	}
	// Before the leases expire another run leaves the dead run's shards.
	c, err := r.svc.FireDue(context.Background(), r.clk.Now())
	if err != nil {
		t.Fatal(err)
	}
	// Every request the dead run sent had settled when its FireDue
	// returned (settledStore), so the leases it holds now are the ones
	// the second run found.
	ls, err := r.e.r.Store.ScheduleShards(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	held := 0
	for _, l := range ls {
		if !l.TakeableBy("another", r.clk.Now()) {
			held++
		}
	}
	if held == 0 {
		t.Fatal("the killed run holds no shard: the takeover is not tested")
	}
	if c.Leased != held {
		t.Fatalf("second run: %+v; want the %d shards still leased left alone", c, held)
	}
	r.clk.Advance(time.Minute) // past the leases
	c, err = r.svc.FireDue(context.Background(), r.clk.Now())
	if err != nil {
		t.Fatal(err)
	}
	if c.Leased != 0 || c.Shards != schedule.ShardCount {
		t.Fatalf("after the leases expired: %+v; want every shard taken", c)
	}
	r.checkFiredOnce(scs)
	// Every shard's watermark reached the minute before now.
	ls, err = r.e.r.Store.ScheduleShards(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	want := r.clk.Now().Truncate(time.Minute).Add(-time.Minute)
	for _, l := range ls {
		if !l.Watermark.Equal(want) {
			t.Errorf("shard %d watermark %s, want %s", l.Shard, l.Watermark, want)
		}
	}
}

// slowReads is the store of a run that stalls after each schedule read,
// until released: the read is as of before the stall.
type slowReads struct {
	*dynamo.Store
	once    sync.Once
	stalled chan struct{}
	release chan struct{}
}

func (s *slowReads) ScheduleGet(ctx context.Context, owner, id string) (dynamo.ScheduleRecord, error) {
	rec, err := s.Store.ScheduleGet(ctx, owner, id)
	s.once.Do(func() { close(s.stalled) })
	<-s.release
	return rec, err
}

// Two runs on one shard: the first stalls past its lease with schedules
// read, the second takes the shard over and fires it, then the first
// goes on from its stale reads. Each firing still has one job, and the
// stale run's watermark write is refused.
func TestScheduleShardSlowOwnerFiresOnce(t *testing.T) {
	t.Parallel()
	const n = 48
	r, scs := newShardRig(t, n)
	// The shard with the most schedules.
	count := map[int]int{}
	for _, sc := range scs {
		count[schedule.ShardOf(sc.ID)]++
	}
	shard := 0
	for sh, k := range count {
		if k > count[shard] {
			shard = sh
		}
	}
	var inShard []control.ScheduleView
	for _, sc := range scs {
		if schedule.ShardOf(sc.ID) == shard {
			inShard = append(inShard, sc)
		}
	}
	r.at(2 * time.Second)
	slow := &slowReads{Store: r.e.r.Store, stalled: make(chan struct{}), release: make(chan struct{})}
	stale := r0serviceOver(r.e, r.clk, slow)
	type result struct {
		c   control.FireCounts
		err error
	}
	first := make(chan result, 1)
	go func() {
		c, err := stale.FireShard(context.Background(), shard, r.clk.Now())
		first <- result{c, err}
	}()
	<-slow.stalled
	r.clk.Advance(time.Minute) // the stalled run's lease expires
	c, err := r.svc.FireShard(context.Background(), shard, r.clk.Now())
	if err != nil || c.Shards != 1 || c.Started != len(inShard) {
		t.Fatalf("takeover run: %+v, %v; want the shard taken and its %d firings started", c, err, len(inShard))
	}
	close(slow.release)
	res := <-first
	if res.err != nil {
		t.Fatalf("stale run: %v", res.err)
	}
	if res.c.Started != 0 || res.c.Lost != 1 {
		t.Fatalf("stale run: %+v; want no job created and its watermark refused (lost 1)", res.c)
	}
	r.checkFiredOnce(inShard)
}

func r0serviceOver(e *env, clk *testClock, st control.Store) *control.Service {
	return newService(e, testTimings, st, e.r.Queue, clk, newLogCounter().logger())
}

// After downtime a shard run walks at most 30 minutes of its index and
// relays the rest: a "fire shard" message on the timer queue, whose
// consumer goes on from the shard's watermark (relaying again while work
// is left) without waiting for the next sweep.
func TestScheduleShardRelayedAfterDowntime(t *testing.T) {
	t.Parallel()
	r, scs := newShardRig(t, 1)
	r.at(2*time.Hour + 2*time.Second) // two hours down
	ctx := context.Background()
	shard := schedule.ShardOf(scs[0].ID)
	c, err := r.svc.FireShard(ctx, shard, r.clk.Now())
	if err != nil || c.Relayed != 1 {
		t.Fatalf("first run: %+v, %v; want the shard relayed", c, err)
	}
	url := r.e.r.Resources.Queues.Timer
	relays := 0
	for relays < 10 {
		msgs, err := r.e.r.Queue.Receive(ctx, url, 10, time.Second, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		if len(msgs) == 0 {
			break
		}
		for _, m := range msgs {
			if m.Body != fmt.Sprintf(`{"fireShard":%d}`, shard) {
				t.Fatalf("timer queue message %s, want the shard's relay", m.Body)
			}
			relays++
			if errs := r.svc.FireTimers(ctx, []string{m.Body}); errs[0] != nil {
				t.Fatalf("relay %d: %v", relays, errs[0])
			}
			if err := r.e.r.Queue.DeleteBatch(ctx, url, []string{m.Receipt}); err != nil {
				t.Fatal(err)
			}
		}
	}
	if relays < 2 || relays == 10 {
		t.Fatalf("%d relays consumed, want the two hours worked off in a few", relays)
	}
	got, err := r.svc.GetSchedule(ctx, "sharded", scs[0].ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.LastFired == nil || !got.LastFired.Equal(r.h0.Add(2*time.Hour)) {
		t.Errorf("schedule after the relays: last fired %v, want %s", got.LastFired, r.h0.Add(2*time.Hour))
	}
	ls, err := r.e.r.Store.ScheduleShards(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := r.clk.Now().Truncate(time.Minute).Add(-time.Minute)
	for _, l := range ls {
		if l.Shard == shard && !l.Watermark.Equal(want) {
			t.Errorf("shard %d watermark %s, want %s", shard, l.Watermark, want)
		}
	}
}
