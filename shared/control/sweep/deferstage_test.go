package sweep

import (
	"context"
	"testing"
	"time"

	"github.com/batchwork/batchwork/shared/dynamo"
)

// dueStore records the due times the sweep sets; the rest of the store
// is never called by deferStage.
type dueStore struct {
	Store
	due map[dynamo.DueItem]time.Time
}

func (d *dueStore) DueSet(_ context.Context, it dynamo.DueItem, at time.Time) error {
	d.due[it] = at
	return nil
}

// The wait before a stage's next look grows with the time its step has
// been pending, between StartGrace and SweepBackoffMax.
func TestDeferStage(t *testing.T) {
	t.Parallel()
	const grace = time.Second
	cases := []struct {
		name  string
		since time.Duration // before now; 0: not known
		want  time.Duration
	}{
		{"not known", 0, grace},
		{"just started", time.Millisecond, grace},
		{"pending a minute", time.Minute, time.Minute},
		{"pending a day", 24 * time.Hour, SweepBackoffMax},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			store := &dueStore{due: map[dynamo.DueItem]time.Time{}}
			s := &Sweeper{cfg: Config{StartGrace: grace}, store: store}
			it := dynamo.DueItem{Kind: dynamo.DueStage, Job: "j", Stage: 0}
			now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
			var since time.Time
			if c.since > 0 {
				since = now.Add(-c.since)
			}
			if err := s.deferStage(context.Background(), it, now, since); err != nil {
				t.Fatal(err)
			}
			if got := store.due[it]; !got.Equal(now.Add(c.want)) {
				t.Errorf("due %v, want now+%v", got.Sub(now), c.want)
			}
		})
	}
}
