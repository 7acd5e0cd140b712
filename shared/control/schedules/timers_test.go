package schedules

import (
	"errors"
	"testing"
	"time"
)

func TestTimerDelay(t *testing.T) {
	now := time.Date(2026, 3, 1, 12, 0, 0, 300_000_000, time.UTC)
	cases := []struct {
		name string
		at   time.Time
		want time.Duration
	}{
		{"the lead taken off and rounded down; the consumer waits out the rest", now.Add(timerLead + 4*time.Second + 900*time.Millisecond), 4 * time.Second},
		{"within the lead", now.Add(timerLead - 100*time.Millisecond), 0},
		{"under a second beyond the lead", now.Add(timerLead + 700*time.Millisecond), 0},
		{"due already", now.Add(-time.Second), 0},
		{"capped at SQS's limit", now.Add(time.Hour), 15 * time.Minute},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := timerDelay(c.at, now); got != c.want {
				t.Fatalf("timerDelay = %v, want %v", got, c.want)
			}
		})
	}
}

func TestParseTimer(t *testing.T) {
	good := `{"owner":"o","firing":"s0123456789abcdef01234@2026-03-01T12:00:00Z","bucket":"2026-03-01T12:00Z#03"}`
	if _, id, at, b, err := parseTimer(good); err != nil || id != "s0123456789abcdef01234" || !at.Equal(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)) || b.Shard != 3 {
		t.Fatalf("parseTimer(good) = %q %v %+v %v", id, at, b, err)
	}
	for _, body := range []string{
		"j0123456789abcdef012345/0/0", // a task message
		`{"owner":"o","firing":"no-time","bucket":"2026-03-01T12:00Z#03"}`,
		`{"owner":"o","firing":"s1@2026-03-01T12:00:00Z","bucket":"2026-03-01T12:00Z#99"}`,
		`{"firing":"s1@2026-03-01T12:00:00Z","bucket":"2026-03-01T12:00Z#03"}`,
	} {
		if _, _, _, _, err := parseTimer(body); !errors.Is(err, ErrNotTimer) {
			t.Errorf("parseTimer(%s) = %v, want ErrNotTimer", body, err)
		}
		if IsTimerMessage(body) {
			t.Errorf("IsTimerMessage(%s) = true", body)
		}
	}
}
