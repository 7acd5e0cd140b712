package feed

import (
	"testing"
	"time"

	"github.com/batchwork/batchwork/shared/tuning"
)

// A finished task's message waits for up to two delete rounds (its own,
// and one more when it is in a part batch), so the rounds must fit within
// the visibility a held message has left at any time: at least
// renewSlack less the gap between renewals (a beat). Within that, the
// longer the round, the more tasks each count write covers (one write per
// counter shard per round, and a round's tasks fall on about two of
// them): 400 ms rounds make about a quarter fewer count writes than
// 200 ms ones did. CountLinger bounds only counts that no round takes, so
// it is longer than a round.
func TestDeleteRoundsFitTheHeldVisibility(t *testing.T) {
	t.Parallel()
	left := renewSlack - tuning.ExecutorBeat
	if 2*deleteLinger >= left {
		t.Fatalf("two delete rounds of %v outlast the %v a held message has left", deleteLinger, left)
	}
	if tuning.CountLinger <= deleteLinger {
		t.Fatalf("CountLinger %v is not longer than a delete round (%v): counts would go without their round's batch", tuning.CountLinger, deleteLinger)
	}
	if deleteLinger < 400*time.Millisecond {
		t.Fatalf("delete rounds of %v: each round costs a count write per counter shard it touches; 400 ms is what keeps a bench no-op task at or under 2.5 requests", deleteLinger)
	}
}
