package tasks

import (
	"testing"
	"time"

	"github.com/batchwork/batchwork/shared/domain"
	"github.com/batchwork/batchwork/shared/lru"
)

// A speculating stage's tasks are listed only when a look can find a
// straggler or must tend copies under way.
func TestSpeculationLookDue(t *testing.T) {
	t0 := time.Unix(1_000_000, 0)
	st := domain.Stage{Index: 0, Total: 10}
	const median, mult = 10 * time.Second, 1.5
	for _, c := range []struct {
		name      string
		last      *specLook
		committed int
		at        time.Duration // after t0
		want      bool
	}{
		{name: "first look", at: 0, committed: 8, want: true},
		{name: "every task committed", at: 0, committed: 10, want: false},
		{name: "copies under way", last: &specLook{earliest: t0, busy: true}, committed: 8, at: time.Second, want: true},
		{name: "earliest claim not a straggler yet", last: &specLook{earliest: t0}, committed: 8, at: 15 * time.Second, want: false},
		{name: "earliest claim a straggler now", last: &specLook{earliest: t0}, committed: 8, at: 15*time.Second + time.Millisecond, want: true},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := &Copies{looks: lru.New[string, specLook](4)}
			if c.last != nil {
				s.noteSpeculationLook("j", st, *c.last)
			}
			if got := s.speculationLookDue("j", st, c.committed, median, mult, t0.Add(c.at)); got != c.want {
				t.Errorf("look due %v, want %v", got, c.want)
			}
		})
	}
}
