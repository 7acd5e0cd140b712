package feed

import (
	"context"
	"time"
)

// receiveLinger bounds how long a backlogged receiver waits for more free
// slots before it receives, so that one ReceiveMessage brings several
// messages instead of one per slot as each frees. Under a backlog
// messages wait in the queue anyway; a slot waits at most this long for
// batch-mates. An idle receiver never waits (its long poll holds one
// slot), so a lone message is not delayed.
const receiveLinger = 100 * time.Millisecond

// gatherSlots adds to the n slots receiver i holds, up to limit, those
// that free within receiveLinger.
func gatherSlots(ctx context.Context, arb *arbiter, i, n, limit int) int {
	if n >= limit {
		return n
	}
	lctx, cancel := context.WithTimeout(ctx, receiveLinger)
	defer cancel()
	for n < limit {
		m, err := arb.acquire(lctx, i, limit-n)
		if err != nil {
			break
		}
		n += m
	}
	return n
}
