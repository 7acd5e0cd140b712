package schedule

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestShardOf(t *testing.T) {
	t.Parallel()
	// Golden values: the shard of a schedule must never change, or its
	// index entries would be looked for in the wrong bucket after an
	// upgrade.
	golden := map[string]int{"s1": 9, "nightly-etl": 0, "sched_0001": 2, "": 5}
	for id, want := range golden {
		if got := ShardOf(id); got != want {
			t.Errorf("ShardOf(%q) = %d, want %d", id, got, want)
		}
	}
	// Many ids spread over every shard, none with more than twice its
	// share.
	counts := make([]int, ShardCount)
	const n = 16_000
	for i := range n {
		counts[ShardOf(fmt.Sprintf("s%06x", i))]++
	}
	for s, c := range counts {
		if c == 0 || c > 2*n/ShardCount {
			t.Errorf("shard %d holds %d of %d ids: %v", s, c, n, counts)
		}
	}
}

func TestBucketOf(t *testing.T) {
	t.Parallel()
	ny, err := time.LoadLocation("America/New_York")
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name      string
		scheduled time.Time
		wantKey   string
	}{
		{"whole minute", time.Date(2024, 3, 10, 7, 0, 0, 0, time.UTC), "2024-03-10T07:00Z#09"},
		{"seconds truncate to the minute", time.Date(2024, 3, 10, 7, 0, 59, 999, time.UTC), "2024-03-10T07:00Z#09"},
		{"a local time buckets by its UTC minute", time.Date(2024, 3, 10, 3, 0, 0, 0, ny), "2024-03-10T07:00Z#09"},
		{"both copies of a repeated hour have their own bucket", time.Date(2024, 11, 3, 1, 30, 0, 0, ny).Add(time.Hour), "2024-11-03T06:30Z#09"},
		{"half-hour zone", time.Date(2024, 6, 1, 9, 0, 0, 0, time.FixedZone("IST", 5*3600+1800)), "2024-06-01T03:30Z#09"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			b := BucketOf("s1", tt.scheduled)
			if got := b.Key(); got != tt.wantKey {
				t.Errorf("BucketOf(s1, %s).Key() = %q, want %q", tt.scheduled, got, tt.wantKey)
			}
			back, err := ParseBucketKey(b.Key())
			if err != nil {
				t.Fatalf("ParseBucketKey: %v", err)
			}
			if diff := cmp.Diff(b, back); diff != "" {
				t.Errorf("round trip (-want +got):\n%s", diff)
			}
		})
	}
}

func TestParseBucketKeyRejects(t *testing.T) {
	t.Parallel()
	for _, key := range []string{
		"",
		"2024-03-10T07:00Z",
		"2024-03-10T07:00Z#16",
		"2024-03-10T07:00Z#-1",
		"2024-03-10T07:00Z#3",
		"2024-03-10T07:00Z#003",
		"2024-03-10T07:00:00Z#03",
		"2024-03-10T07:00+01:00#03",
		"2024-3-10T07:00Z#03",
		"2024-03-10T07:60Z#03",
	} {
		if b, err := ParseBucketKey(key); err == nil {
			t.Errorf("ParseBucketKey(%q) = %+v, want an error", key, b)
		}
	}
}

func TestDueBuckets(t *testing.T) {
	t.Parallel()
	m := func(hhmm string) time.Time {
		t, _ := time.Parse(time.RFC3339, "2024-06-01T"+hhmm+":00Z")
		return t
	}
	tests := []struct {
		name          string
		after         time.Time
		through       time.Time
		limit         int
		wantMinutes   []time.Time
		wantWatermark time.Time
	}{
		{"one minute", m("10:00"), m("10:01"), 10, []time.Time{m("10:01")}, m("10:01")},
		{"several minutes", m("10:00"), m("10:03"), 10, []time.Time{m("10:01"), m("10:02"), m("10:03")}, m("10:03")},
		{"unaligned times truncate", m("10:00").Add(42 * time.Second), m("10:02").Add(59 * time.Second), 10, []time.Time{m("10:01"), m("10:02")}, m("10:02")},
		{"nothing new in the same minute", m("10:00"), m("10:00").Add(59 * time.Second), 10, nil, m("10:00")},
		{"through before after", m("10:05"), m("10:00"), 10, nil, m("10:05")},
		{"limit bounds a long downtime", m("10:00"), m("10:00").AddDate(1, 0, 0), 2, []time.Time{m("10:01"), m("10:02")}, m("10:02")},
		{"limit below one means one", m("10:00"), m("11:00"), 0, []time.Time{m("10:01")}, m("10:01")},
		{"across midnight and a year", time.Date(2024, 12, 31, 23, 59, 0, 0, time.UTC), time.Date(2025, 1, 1, 0, 1, 0, 0, time.UTC), 10,
			[]time.Time{time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(2025, 1, 1, 0, 1, 0, 0, time.UTC)}, time.Date(2025, 1, 1, 0, 1, 0, 0, time.UTC)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, watermark := DueBuckets(tt.after, tt.through, tt.limit)
			var want []Bucket
			for _, minute := range tt.wantMinutes {
				for s := range ShardCount {
					want = append(want, Bucket{Minute: minute, Shard: s})
				}
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("buckets (-want +got):\n%s", diff)
			}
			if !watermark.Equal(tt.wantWatermark) {
				t.Errorf("watermark = %s, want %s", watermark, tt.wantWatermark)
			}
		})
	}
}

// TestDueBucketsCoverEveryFiring: a sweep that walks the watermark forward
// claims, exactly once, the bucket of every firing of every schedule.
func TestDueBucketsCoverEveryFiring(t *testing.T) {
	t.Parallel()
	start := time.Date(2024, 3, 10, 5, 0, 0, 0, time.UTC)
	ids := []string{"a", "b", "c", "d", "e"}
	exprs := []string{"*/7 * * * *", "30 2 * * *", "0 * * * *", "rate(13 minutes)", "*/5 1-3 * * *"}
	want := make(map[string]int)
	for i, id := range ids {
		tz := "America/New_York"
		if strings.HasPrefix(exprs[i], "rate") {
			tz = ""
		}
		tab := mustTimetable(t, exprs[i], tz, start.Format(time.RFC3339))
		for f, ok := tab.atOrAfter(start); ok && f.Before(start.Add(6*time.Hour)); f, ok = tab.Next(f) {
			want[BucketOf(id, f).Key()]++
		}
	}
	claimed := make(map[string]int)
	watermark := start.Add(-time.Minute)
	for now := start; now.Before(start.Add(6 * time.Hour)); now = now.Add(17 * time.Second) {
		var due []Bucket
		due, watermark = DueBuckets(watermark, now, 3)
		for _, b := range due {
			claimed[b.Key()]++
		}
	}
	for key, n := range want {
		if claimed[key] != 1 {
			t.Errorf("bucket %s holds %d firings but was claimed %d times", key, n, claimed[key])
		}
	}
	for key, n := range claimed {
		if n != 1 {
			t.Errorf("bucket %s claimed %d times", key, n)
		}
	}
}

func TestFiringKey(t *testing.T) {
	t.Parallel()
	ny, err := time.LoadLocation("America/New_York")
	if err != nil {
		t.Fatal(err)
	}
	utc := time.Date(2024, 11, 3, 5, 30, 0, 0, time.UTC)
	tests := []struct {
		name string
		at   time.Time
		want string
	}{
		{"UTC", utc, "s1@2024-11-03T05:30:00Z"},
		{"same instant in another zone", utc.In(ny), "s1@2024-11-03T05:30:00Z"},
		{"the repeated 01:30 is a different key", utc.Add(time.Hour).In(ny), "s1@2024-11-03T06:30:00Z"},
		{"sub-second times stay distinct", utc.Add(time.Millisecond), "s1@2024-11-03T05:30:00.001Z"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := FiringKey("s1", tt.at)
			if got != tt.want {
				t.Errorf("FiringKey = %q, want %q", got, tt.want)
			}
			id, at, err := ParseFiringKey(got)
			if err != nil || id != "s1" || !at.Equal(tt.at) {
				t.Errorf("ParseFiringKey(%q) = %q, %s, %v", got, id, at, err)
			}
		})
	}
	// The longest id with the longest time stays a valid control-plane
	// idempotency key: at most 128 bytes and no '#'.
	long := FiringKey(strings.Repeat("s", MaxIDLen), time.Date(9999, 12, 31, 23, 59, 59, 999999999, time.UTC))
	if len(long) > 128 || strings.ContainsAny(long, "#\x00") {
		t.Errorf("FiringKey of the longest id = %q (%d bytes)", long, len(long))
	}
	for _, bad := range []string{"", "s1", "@2024-11-03T05:30:00Z", "s1@yesterday"} {
		if _, _, err := ParseFiringKey(bad); err == nil {
			t.Errorf("ParseFiringKey(%q) succeeded", bad)
		}
	}
}

func TestDelaySeconds(t *testing.T) {
	t.Parallel()
	now := time.Date(2024, 6, 1, 12, 0, 0, 0, time.UTC)
	tests := []struct {
		name      string
		scheduled time.Time
		want      int32
	}{
		{"in the past", now.Add(-time.Second), 0},
		{"now", now, 0},
		{"a fraction rounds up, never early", now.Add(37*time.Second + 400*time.Millisecond), 38},
		{"whole seconds stay", now.Add(37 * time.Second), 37},
		{"a nanosecond is a second", now.Add(time.Nanosecond), 1},
		{"SQS maximum", now.Add(MaxDelay), 900},
		{"beyond the maximum clamps", now.Add(time.Hour), 900},
	}
	for _, tt := range tests {
		if got := DelaySeconds(tt.scheduled, now); got != tt.want {
			t.Errorf("%s: DelaySeconds = %d, want %d", tt.name, got, tt.want)
		}
	}
}
