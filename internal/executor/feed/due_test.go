package feed

import (
	"testing"
	"time"

	"github.com/batchwork/batchwork/shared/tuning"
)

// A renewal passes over a held message whose visibility outlasts the
// next renewal's reach (renewSlack) and renews the rest, so a short task's
// message, received with tuning.ReceiveVisibility, is hidden only by its
// receive: it stays passed over for the receive's first quarter second.
func TestRenewalPassesOverMessagesHiddenPastTheNext(t *testing.T) {
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	cases := []struct {
		name        string
		hiddenUntil time.Time
		want        bool
	}{
		{"unknown visibility (a Lambda batch's message)", time.Time{}, true},
		{"just received", now.Add(tuning.ReceiveVisibility), false},
		{"a quarter second after its receive", now.Add(tuning.ReceiveVisibility - 250*time.Millisecond + time.Millisecond), false},
		{"within the slack", now.Add(renewSlack - time.Millisecond), true},
		{"lapsed", now.Add(-time.Second), true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := due(hold{claimed: true, hiddenUntil: c.hiddenUntil}, now); got != c.want {
				t.Fatalf("due = %v, want %v (hidden until %v, slack %v)", got, c.want, c.hiddenUntil.Sub(now), renewSlack)
			}
		})
	}
}
