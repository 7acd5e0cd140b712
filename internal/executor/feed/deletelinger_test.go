package feed

import (
	"testing"
	"time"

	"github.com/batchwork/batchwork/shared/tuning"
)

// A finished task's message waits for up to two delete rounds (its own,
// and one more when it is in a part batch) and then the round's own
// requests (its count writes, then its deletes), so all that must fit
// within the visibility a held message has left when it leaves the held
// set: at least renewSlack less the gap between renewals (a beat, and a
// renewal's wait for it, renewAfterBeat). A message that lapses first
// comes back to another executor, whose claim is refused: a wasted
// receive and claim, and a count of the task its committer may not have
// written yet. Within that, the longer the round, the more tasks each
// count write covers (one write per counter shard per round, and a
// round's tasks fall on about two of them). CountLinger bounds only
// counts that no round takes, so it is longer than a round.
func TestDeleteRoundsFitTheHeldVisibility(t *testing.T) {
	t.Parallel()
	// roundTime allows a round's requests: a count write per counter shard
	// and a delete per ten messages, a few short requests, given as long
	// as a bounded hide under the renewal lock.
	const roundTime = lockedHide
	left := renewSlack - tuning.ExecutorBeat - renewAfterBeat
	if wait := 2*deleteLinger + roundTime; wait >= left {
		t.Fatalf("two delete rounds of %v and a round's requests (%v) take %v: a held message has %v left", deleteLinger, roundTime, wait, left)
	}
	if tuning.CountLinger <= deleteLinger {
		t.Fatalf("CountLinger %v is not longer than a delete round (%v): counts would go without their round's batch", tuning.CountLinger, deleteLinger)
	}
	if deleteLinger < 300*time.Millisecond {
		t.Fatalf("delete rounds of %v: each round costs a count write per counter shard it touches, so shorter rounds cost more requests per task", deleteLinger)
	}
}
