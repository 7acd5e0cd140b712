package integration

import (
	"context"
	"encoding/json"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/batchwork/batchwork/shared/control"
	"github.com/batchwork/batchwork/shared/domain"
	sm "github.com/batchwork/batchwork/statemachine"
)

// segmentTimings split a stage of more than 10 tasks into segments of 10,
// each two chunks of 5 (one call's worth), two worked by the caller and
// the rest by relays; the sweep waits a minute on the rig's clock.
var segmentTimings = control.Config{
	StartGrace: time.Minute, CheckEvery: time.Minute, StuckAfter: time.Hour,
	ChunkTasks: 5, ChunksPerCall: 2, SegmentTasks: 10, SegmentWorkers: 2,
}

// segmentTasks is a stage of five segments: 0-9, 10-19, 20-29, 30-39 and
// 40-44.
const segmentTasks = 45

// meetStore holds the first chunk write of each of the first want
// segments until all of them are inside one, which proves their chains
// run at once: chains run one after another never meet, and the test
// fails when the wait times out.
type meetStore struct {
	control.Store
	want int

	mu     sync.Mutex
	inside map[int]bool
	all    chan struct{}
	missed atomic.Bool
}

func newMeetStore(s control.Store, want int) *meetStore {
	return &meetStore{Store: s, want: want, inside: map[int]bool{}, all: make(chan struct{})}
}

func (m *meetStore) TaskPutMany(ctx context.Context, tasks []domain.Task, due time.Time) error {
	seg := tasks[0].Ref.Partition / segmentTimings.SegmentTasks
	m.mu.Lock()
	wait := !m.inside[seg] && len(m.inside) < m.want
	if wait {
		m.inside[seg] = true
		if len(m.inside) == m.want {
			close(m.all)
		}
	}
	m.mu.Unlock()
	if wait {
		select {
		case <-m.all:
		case <-time.After(30 * time.Second): // a guard against a hang, not a synchronisation
			m.missed.Store(true)
		}
	}
	return m.Store.TaskPutMany(ctx, tasks, due)
}

// relaySegments are the segments the relays in bodies name.
func relaySegments(t *testing.T, bodies []string) []int {
	t.Helper()
	var segs []int
	for _, b := range bodies {
		var m struct {
			Relay *struct {
				Segment int `json:"segment"`
			} `json:"continue"`
		}
		if err := json.Unmarshal([]byte(b), &m); err != nil || m.Relay == nil {
			t.Fatalf("not a relay: %q (%v)", b, err)
		}
		segs = append(segs, m.Relay.Segment)
	}
	return segs
}

// A stage of several segments is queued by several chains at once: the
// submit's two and the relays' three each meet the others inside a
// chunk, every task is written once with one message, the last chain to
// finish marks the stage materialized, and the job runs to the end.
func TestMaterializationInSegments(t *testing.T) {
	t.Parallel()
	rig := newSweepRig(t, segmentTimings)
	e := rig.e
	meet := newMeetStore(e.r.Store, 2)
	id := submitTo(t, rig.service(meet, e.r.Queue), "seg", oneStage("seg", "work", segmentTasks))
	if meet.missed.Load() {
		t.Fatal("the submit's two segments never were inside a chunk at once")
	}
	st, err := e.r.Store.StageGet(context.Background(), id, 0)
	if err != nil {
		t.Fatal(err)
	}
	if st.SegmentCount() != 5 || !st.SegmentDone(0) || !st.SegmentDone(1) || st.Materialized {
		t.Fatalf("after the submit: %+v, want segments 0 and 1 of 5 done, not materialized", st)
	}
	bodies := takeTimerMessages(t, e)
	if segs := relaySegments(t, bodies); len(segs) != 3 {
		t.Fatalf("relays for segments %v, want one for each of 2, 3 and 4", segs)
	}
	meet = newMeetStore(e.r.Store, 3)
	errs := rig.service(meet, e.r.Queue).FireTimers(context.Background(), bodies)
	for i, err := range errs {
		if err != nil {
			t.Fatalf("relay %s: %v", bodies[i], err)
		}
	}
	if meet.missed.Load() {
		t.Fatal("the three relays' segments never were inside a chunk at once")
	}
	if st := stageOf(t, e, id); !st.Materialized || st.Enqueued != segmentTasks {
		t.Fatalf("after the relays: %+v, want materialized with %d enqueued", st, segmentTasks)
	}
	if got := messagesIn(t, e, e.r.Resources.Queues.Normal); got != segmentTasks {
		t.Fatalf("%d task messages, want one per task (%d)", got, segmentTasks)
	}
	if left := takeTimerMessages(t, e); len(left) != 0 {
		t.Fatalf("relays left behind: %q", left)
	}
	wantTasksOnce(t, e, id, segmentTasks)
	work(t, e, rig.exec)
	wantSucceeded(t, rig.svc, id)
	assertCommittedOnce(t, e, id, 0, segmentTasks, 1)
}

// Every relay delivered twice at once: the duplicates of a segment race
// for its count, the loser yields, so each adds at most one chunk's
// duplicate messages (dropped at claim) and no task twice.
func TestDuplicateSegmentRelays(t *testing.T) {
	t.Parallel()
	rig := newSweepRig(t, segmentTimings)
	e := rig.e
	id := submitTo(t, rig.svc, "segdup", oneStage("segdup", "work", segmentTasks))
	bodies := takeTimerMessages(t, e)
	fireRigTimers(t, rig, append(bodies, bodies...)...)
	if st := stageOf(t, e, id); !st.Materialized || st.Enqueued != segmentTasks {
		t.Fatalf("after the relays: %+v, want materialized", st)
	}
	got := messagesIn(t, e, e.r.Resources.Queues.Normal)
	if most := segmentTasks + len(bodies)*segmentTimings.ChunkTasks; got < segmentTasks || got > most {
		t.Fatalf("%d task messages, want %d to %d", got, segmentTasks, most)
	}
	if left := takeTimerMessages(t, e); len(left) != 0 {
		t.Fatalf("relays left behind: %q", left)
	}
	wantTasksOnce(t, e, id, segmentTasks)
	work(t, e, rig.exec)
	wantSucceeded(t, rig.svc, id)
	assertCommittedOnce(t, e, id, 0, segmentTasks, 1)
}

// A segment's worker dies in the middle of a chunk (half its tasks
// written, none sent) and its relay is not delivered again: the other
// segments finish, and the sweep, once no chain has counted a chunk for a
// grace period, finishes the dead one; every task exists once.
func TestSweepFinishesADeadSegment(t *testing.T) {
	t.Parallel()
	rig := newSweepRig(t, segmentTimings)
	e := rig.e
	id := submitTo(t, rig.svc, "segdead", oneStage("segdead", "work", segmentTasks))
	bodies := takeTimerMessages(t, e)
	dies := &segmentCrash{Store: e.r.Store, at: 30}
	errs := rig.service(dies, e.r.Queue).FireTimers(context.Background(), bodies)
	failed := 0
	for _, err := range errs {
		if err != nil {
			failed++
		}
	}
	if failed != 1 || !dies.fired.Load() {
		t.Fatalf("%d relays failed (crash fired %v), want segment 3's", failed, dies.fired.Load())
	}
	st, err := e.r.Store.StageGet(context.Background(), id, 0)
	if err != nil {
		t.Fatal(err)
	}
	if st.Materialized || st.SegmentDone(3) || !st.SegmentDone(2) || !st.SegmentDone(4) {
		t.Fatalf("after the crash: %+v, want every segment but 3 done", st)
	}
	if got := messagesIn(t, e, e.r.Resources.Queues.Normal); got != segmentTasks-10 {
		t.Fatalf("%d task messages before the repair, want %d", got, segmentTasks-10)
	}
	rig.clk.Advance(segmentTimings.StartGrace + time.Second)
	if c := mustSweep(t, rig.svc); c.StagesFixed == 0 {
		t.Fatalf("sweep fixed no stage: %+v", c)
	}
	if st := stageOf(t, e, id); !st.Materialized || st.Enqueued != segmentTasks {
		t.Fatalf("after the sweep: %+v, want materialized", st)
	}
	if got := messagesIn(t, e, e.r.Resources.Queues.Normal); got != segmentTasks {
		t.Fatalf("%d task messages, want one per task (%d)", got, segmentTasks)
	}
	wantTasksOnce(t, e, id, segmentTasks)
	work(t, e, rig.exec)
	wantSucceeded(t, rig.svc, id)
	assertCommittedOnce(t, e, id, 0, segmentTasks, 1)
}

// segmentCrash is the real store whose process dies in the chunk write
// that starts at partition at: it writes half the chunk, then fails.
type segmentCrash struct {
	control.Store
	at    int
	fired atomic.Bool
}

func (s *segmentCrash) TaskPutMany(ctx context.Context, tasks []domain.Task, due time.Time) error {
	if tasks[0].Ref.Partition == s.at && s.fired.CompareAndSwap(false, true) {
		if err := s.Store.TaskPutMany(ctx, tasks[:len(tasks)/2], due); err != nil {
			return err
		}
		return errCrash
	}
	return s.Store.TaskPutMany(ctx, tasks, due)
}

// A job cancelled while its stage is being queued in segments: the
// segments its relays carry queue nothing, and no sweep takes them up.
func TestCancelStopsEverySegment(t *testing.T) {
	t.Parallel()
	rig := newSweepRig(t, segmentTimings)
	e := rig.e
	id := submitTo(t, rig.svc, "segcancel", oneStage("segcancel", "work", segmentTasks))
	if _, err := rig.svc.Cancel(context.Background(), "tester", id); err != nil {
		t.Fatalf("cancel: %v", err)
	}
	fireRigTimers(t, rig, takeTimerMessages(t, e)...)
	rig.clk.Advance(segmentTimings.StartGrace + time.Second)
	mustSweep(t, rig.svc)
	st, err := e.r.Store.StageGet(context.Background(), id, 0)
	if err != nil {
		t.Fatal(err)
	}
	if st.State != sm.StageCancelled || st.Materialized {
		t.Fatalf("stage %s materialized %v, want CANCELLED, not materialized", st.State, st.Materialized)
	}
	for k := 2; k < st.SegmentCount(); k++ {
		if lo, _ := st.SegmentRange(k); st.SegmentNext(k) != lo {
			t.Errorf("segment %d reached %d after the cancel, want %d", k, st.SegmentNext(k), lo)
		}
	}
	if got := messagesIn(t, e, e.r.Resources.Queues.Normal); got != 20 {
		t.Fatalf("%d task messages, want the submit's 20", got)
	}
	if left := takeTimerMessages(t, e); len(left) != 0 {
		t.Fatalf("relays left behind: %q", left)
	}
}

// fireRigTimers is fireTimers through the rig's control plane, whose
// chunks are segmentTimings'.
func fireRigTimers(t *testing.T, rig *sweepRig, bodies ...string) {
	t.Helper()
	for i, err := range rig.svc.FireTimers(context.Background(), bodies) {
		if err != nil {
			t.Fatalf("timer message %q: %v", bodies[i], err)
		}
	}
}
