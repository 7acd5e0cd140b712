package schedule

import (
	"fmt"
	"hash/fnv"
	"strconv"
	"strings"
	"time"
)

// The upcoming-firings index. Each schedule has one entry, for its next
// firing, in the bucket of that firing's minute (UTC) and of the
// schedule's shard. The shard spreads a busy minute (a thousand schedules
// at 00:00) over ShardCount partitions and over as many sweep workers; the
// minute lets a sweep claim exactly what is due instead of scanning every
// schedule.

// ShardCount is the fixed number of shards per minute. Changing it moves
// every schedule to another bucket, so it is a constant, not a setting.
const ShardCount = 16

// Bucket is one minute of one shard of the index.
type Bucket struct {
	Minute time.Time // whole UTC minute
	Shard  int       // 0 ≤ Shard < ShardCount
}

// ShardOf is the shard of a schedule: a stable hash of its id, so a
// schedule stays in the same shard for every firing.
func ShardOf(scheduleID string) int {
	h := fnv.New32a()
	h.Write([]byte(scheduleID))
	return int(h.Sum32() % ShardCount)
}

// BucketOf is the bucket of a firing: its scheduled minute in UTC and the
// schedule's shard.
func BucketOf(scheduleID string, scheduled time.Time) Bucket {
	return Bucket{Minute: scheduled.UTC().Truncate(time.Minute), Shard: ShardOf(scheduleID)}
}

// bucketMinute formats the minute; it sorts lexically in time order.
const bucketMinute = "2006-01-02T15:04Z"

// Key is the bucket's index key, "2024-03-10T07:00Z#07": the minute, then
// the shard, so keys sort by minute and then shard.
func (b Bucket) Key() string {
	return b.Minute.UTC().Format(bucketMinute) + "#" + fmt.Sprintf("%02d", b.Shard)
}

// ParseBucketKey parses Bucket.Key's form.
func ParseBucketKey(key string) (Bucket, error) {
	m, sh, ok := strings.Cut(key, "#")
	if !ok || len(sh) != 2 {
		return Bucket{}, fmt.Errorf("bucket key %q: want <minute>#<shard>", key)
	}
	minute, err := time.Parse(bucketMinute, m)
	if err != nil {
		return Bucket{}, fmt.Errorf("bucket key %q: minute: %w", key, err)
	}
	shard, err := strconv.Atoi(sh)
	if err != nil || shard < 0 || shard >= ShardCount {
		return Bucket{}, fmt.Errorf("bucket key %q: shard must be 00 to %02d", key, ShardCount-1)
	}
	b := Bucket{Minute: minute.UTC(), Shard: shard}
	if b.Key() != key {
		return Bucket{}, fmt.Errorf("bucket key %q is not in canonical form %q", key, b.Key())
	}
	return b, nil
}

// DueBuckets lists the buckets of the minutes after `after` and up to and
// including `through` (both truncated to the minute), minute by minute and
// shard by shard, for at most maxMinutes minutes (at least one). It also
// returns the last minute listed, the sweep's new watermark; it equals
// after's minute when nothing is listed. A sweep that was down for long
// walks forward maxMinutes per run instead of listing millions of buckets.
func DueBuckets(after, through time.Time, maxMinutes int) ([]Bucket, time.Time) {
	maxMinutes = max(maxMinutes, 1)
	last := after.UTC().Truncate(time.Minute)
	to := through.UTC().Truncate(time.Minute)
	var out []Bucket
	for m, n := last.Add(time.Minute), 0; !m.After(to) && n < maxMinutes; m, n = m.Add(time.Minute), n+1 {
		for s := range ShardCount {
			out = append(out, Bucket{Minute: m, Shard: s})
		}
		last = m
	}
	return out, last
}

// FiringKey is the idempotency key of the job a firing creates:
// "<schedule id>@<scheduled time, UTC, RFC 3339>". It depends only on the
// schedule and the instant, not on the zone the time is expressed in, so
// every sweep derives the same key and a time never fires twice. Schedule
// ids contain no '@' or '#', and an id of MaxIDLen keeps the key within
// the control plane's 128 bytes.
func FiringKey(scheduleID string, scheduled time.Time) string {
	return scheduleID + "@" + scheduled.UTC().Format(time.RFC3339Nano)
}

// ParseFiringKey parses FiringKey's form.
func ParseFiringKey(key string) (scheduleID string, scheduled time.Time, err error) {
	id, ts, ok := strings.Cut(key, "@")
	if !ok || id == "" {
		return "", time.Time{}, fmt.Errorf("firing key %q: want <schedule id>@<time>", key)
	}
	t, err := time.Parse(time.RFC3339Nano, ts)
	if err != nil {
		return "", time.Time{}, fmt.Errorf("firing key %q: %w", key, err)
	}
	return id, t.UTC(), nil
}

// MaxDelay is SQS's longest DelaySeconds.
const MaxDelay = 15 * time.Minute

// DelaySeconds is the SQS delay that hands a firing over at its scheduled
// time: the time left, rounded up so the job is never created early, and
// clamped to [0, MaxDelay].
func DelaySeconds(scheduled, now time.Time) int32 {
	d := scheduled.Sub(now)
	if d <= 0 {
		return 0
	}
	d = min(d, MaxDelay)
	return int32((d + time.Second - 1) / time.Second)
}
