package testdouble

import (
	"context"
	"fmt"
	"hash/fnv"
	"sort"
	"strings"
	"time"

	"github.com/batchwork/batchwork/shared/domain"
	"github.com/batchwork/batchwork/shared/dynamo"
)

// dueShard spreads the index over dynamo.DueShards as the adapter's
// gpk does, so the sweep's per-shard loop is exercised.
func dueShard(it dynamo.DueItem) int {
	h := fnv.New32a()
	fmt.Fprintf(h, "%s|%s|%d|%s", it.Kind, it.Job, it.Stage, it.Task)
	return int(h.Sum32() % dynamo.DueShards)
}

func ownerMap(m dynamo.SlotMap) bool { return strings.HasPrefix(m.String(), "owner ") }

// DueItems returns up to limit records of one shard due at now, earliest
// first.
func (f *indexRecords) DueList(_ context.Context, shard int, now time.Time, limit int) ([]dynamo.DueItem, error) {
	return call(f.state, "DueList", func() ([]dynamo.DueItem, error) {
		es, _ := f.dueEntries(now, func(it dynamo.DueItem) bool { return dueShard(it) == shard })
		out := make([]dynamo.DueItem, 0, min(len(es), limit))
		for _, e := range es[:min(len(es), limit)] {
			out = append(out, e.it)
		}
		return out, nil
	})
}

// DueScan returns every record due at now when the index holds fewer
// than limit entries (due or not), as the adapter's one Scan does; else
// nothing, and whole false.
func (f *indexRecords) DueScan(_ context.Context, now time.Time, limit int) ([]dynamo.DueItem, bool, error) {
	var whole bool
	items, err := call(f.state, "DueScan", func() ([]dynamo.DueItem, error) {
		es, entries := f.dueEntries(now, func(dynamo.DueItem) bool { return true })
		if entries >= limit {
			return nil, nil
		}
		whole = true
		out := make([]dynamo.DueItem, 0, len(es))
		for _, e := range es {
			out = append(out, e.it)
		}
		return out, nil
	})
	if err != nil || !whole {
		return items, false, err
	}
	// The adapter's whole read can answer its records and an error
	// beside them (a key it cannot parse, a ready marker whose tasks it
	// cannot read): a fault on "DueScanRecords" models that.
	_, err = call(f.state, "DueScanRecords", func() (struct{}, error) { return struct{}{}, nil })
	return items, true, err
}

// dueEntry is a record in the index and when it is due.
type dueEntry struct {
	it  dynamo.DueItem
	due time.Time
}

// dueEntries returns the index's records that in selects and that are
// due at now, earliest first, and how many records in selects the index
// holds, due or not.
func (f *indexRecords) dueEntries(now time.Time, in func(dynamo.DueItem) bool) ([]dueEntry, int) {
	var es []dueEntry
	entries := 0
	add := func(it dynamo.DueItem, due time.Time) {
		if due.IsZero() || !in(it) {
			return
		}
		entries++
		if !due.After(now) {
			es = append(es, dueEntry{it, due})
		}
	}
	for id, j := range f.jobs {
		add(dynamo.DueItem{Kind: dynamo.DueJob, Job: id}, j.due)
	}
	for k, s := range f.stages {
		add(dynamo.DueItem{Kind: dynamo.DueStage, Job: k.job, Stage: k.idx}, s.due)
	}
	for ref, t := range f.tasks {
		add(dynamo.DueItem{Kind: dynamo.DueTask, Job: ref.Job, Stage: ref.Stage, Task: ref}, t.due)
	}
	sort.Slice(es, func(a, b int) bool {
		if !es[a].due.Equal(es[b].due) {
			return es[a].due.Before(es[b].due)
		}
		return fmt.Sprint(es[a].it) < fmt.Sprint(es[b].it)
	})
	return es, entries
}

// SetDue puts a record in the index at due, or takes it out (zero). A
// record that does not exist is left alone.
func (f *indexRecords) DueSet(_ context.Context, it dynamo.DueItem, due time.Time) error {
	return do(f.state, "DueSet", func() error {
		due = msTime(due)
		switch it.Kind {
		case dynamo.DueJob:
			if j, ok := f.jobs[it.Job]; ok {
				j.due = due
			}
		case dynamo.DueStage:
			if s, ok := f.stages[stageKey{it.Job, it.Stage}]; ok {
				s.due = due
			}
		default:
			if t, ok := f.tasks[it.Task]; ok {
				t.due = due
			}
		}
		return nil
	})
}

// AcquireSlot takes a slot for ref if the map has room: SlotTaken, or
// SlotHeld with the held stamp, or SlotsFull. An owner's map is created by
// its first acquire; a job's exists from the job's creation.
func (f *indexRecords) SlotAcquire(_ context.Context, m dynamo.SlotMap, ref domain.TaskRef, limit int, at time.Time) (dynamo.SlotOutcome, time.Time, error) {
	type res struct {
		out  dynamo.SlotOutcome
		held time.Time
	}
	r, err := call(f.state, "SlotAcquire", func() (res, error) {
		sl, ok := f.slots[m]
		if !ok {
			if !ownerMap(m) {
				return res{}, fmt.Errorf("acquire %s slot for %s: read slots: %w", m, ref, domain.ErrNotFound)
			}
			f.slots[m] = map[domain.TaskRef]time.Time{ref: msTime(at)}
			return res{out: dynamo.SlotTaken}, nil
		}
		if held, ok := sl[ref]; ok {
			return res{out: dynamo.SlotHeld, held: held}, nil
		}
		if len(sl) >= limit {
			return res{out: dynamo.SlotsFull}, nil
		}
		sl[ref] = msTime(at)
		return res{out: dynamo.SlotTaken}, nil
	})
	return r.out, r.held, err
}

// RestampSlot moves ref's slot from stamp from to stamp to; false if it no
// longer has stamp from.
func (f *indexRecords) SlotRestamp(_ context.Context, m dynamo.SlotMap, ref domain.TaskRef, from, to time.Time) (bool, error) {
	return call(f.state, "SlotRestamp", func() (bool, error) {
		sl := f.slots[m]
		if held, ok := sl[ref]; !ok || !held.Equal(msTime(from)) {
			return false, nil
		}
		sl[ref] = msTime(to)
		return true, nil
	})
}

// ReleaseSlot frees ref's slot (only the one stamped at, if at is set).
// Releasing a free slot is a no-op.
func (f *indexRecords) SlotRelease(_ context.Context, m dynamo.SlotMap, ref domain.TaskRef, at time.Time) error {
	return do(f.state, "SlotRelease", func() error {
		sl := f.slots[m]
		if held, ok := sl[ref]; ok && (at.IsZero() || held.Equal(msTime(at))) {
			delete(sl, ref)
		}
		return nil
	})
}

func (f *indexRecords) SlotHolders(_ context.Context, m dynamo.SlotMap) (map[domain.TaskRef]time.Time, error) {
	return call(f.state, "SlotHolders", func() (map[domain.TaskRef]time.Time, error) {
		sl, ok := f.slots[m]
		if !ok {
			return nil, fmt.Errorf("read slots of %s: %w", m, domain.ErrNotFound)
		}
		out := make(map[domain.TaskRef]time.Time, len(sl))
		for r, at := range sl {
			out[r] = at
		}
		return out, nil
	})
}

// DueRemoveDone has nothing to do: this index keeps no ready markers, so
// DueList keeps none to remove.
func (f *indexRecords) DueRemoveDone(context.Context) error {
	return do(f.state, "DueRemoveDone", func() error { return nil })
}
