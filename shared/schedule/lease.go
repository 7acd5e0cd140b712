package schedule

import "time"

// Shard leases. Firing is divided among concurrent sweep runs by index
// shard: a run fires a shard's due buckets only while it holds that
// shard's lease, and moves the shard's own watermark. A run that dies
// leaves its lease to expire; the next run takes the shard over and
// resumes from the watermark, which moved only past minutes the holder
// drained. The lease divides work; it is not what makes a firing happen
// once: two runs that both believe they hold a shard (one slow past its
// expiry) still create one job per firing, by the job's idempotency key
// (FiringKey) and the schedule's conditional cursor.

// ShardLease is one index shard's firing state, as stored.
type ShardLease struct {
	Shard int
	// Owner is the run that last took the lease ("" never taken).
	Owner string
	// Expires ends the owner's hold; a released lease expires at once.
	Expires time.Time
	// Watermark: every minute of this shard up to it was drained. Zero
	// before the shard's first advance: the shard then starts from the
	// index-wide watermark (the one firing state before shards had their
	// own), so a deployed stack carries on from where it was.
	Watermark time.Time
}

// TakeableBy says whether run may take (or renew) the lease at now: no
// one holds it, run does, or the holder's lease expired.
func (l ShardLease) TakeableBy(run string, now time.Time) bool {
	return l.Owner == "" || l.Owner == run || !now.Before(l.Expires)
}

// HeldBy says whether run holds the lease at now, the condition of its
// watermark's advance: a run whose lease expired moves nothing, since
// another run may have taken the shard over.
func (l ShardLease) HeldBy(run string, now time.Time) bool {
	return run != "" && l.Owner == run && now.Before(l.Expires)
}

// From is where the shard's firing resumes: its own watermark, or the
// index-wide one when it has none yet.
func (l ShardLease) From(global time.Time) time.Time {
	if l.Watermark.IsZero() {
		return global
	}
	return l.Watermark
}

// AdvanceTo is the watermark a run that drained every minute through
// drained may store at now: never past the minute before now (an entry
// written into the current minute must still be found) and never back.
// ok is false when there is nothing to move.
func (l ShardLease) AdvanceTo(global, drained, now time.Time) (time.Time, bool) {
	limit := now.UTC().Truncate(time.Minute).Add(-time.Minute)
	if drained.After(limit) {
		drained = limit
	}
	return drained, drained.After(l.From(global))
}
