package split

import (
	"context"
	"sync"
)

// Cut lets the owner of a running split give away the unread rest of its
// range (dynamic splitting): the reader is told to stop early at a record
// boundary, and the rest becomes new splits.
//
// Ownership stays the rule of Split: a split owns the records whose first
// byte lies in [Start, End). Giving away [at, End) is setting End to at,
// and a reader stops before the first record that starts at or after its
// End, so the giver and the new splits, which start at at, meet at a
// record boundary exactly as two planned splits do. The one thing to
// settle is that the reader has not yet passed at when End moves; so the
// owner first proposes at (Propose), which holds the reader back at
// at until the owner says whether the cut was made (Resolve), and only a
// cut at or after what the reader has consumed is accepted.
type Cut struct {
	mu       sync.Mutex
	attached bool
	done     bool  // the reader finished or closed
	pos      int64 // the object offset the reader has consumed up to
	end      int64 // the split's end as the reader applies it
	start    int64
	pending  int64         // a proposed cut (0: none)
	resolved chan struct{} // closed by Resolve
}

// NewCut returns a Cut to pass in Options.Cut.
func NewCut() *Cut { return &Cut{} }

// Progress reports the reader's position and its split's current end. ok
// is false when no cut is possible: the reader is not attached (a
// compressed object, or a format that cannot be cut), or it finished.
func (c *Cut) Progress() (start, pos, end int64, ok bool) {
	if c == nil {
		return 0, 0, 0, false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.start, c.pos, c.end, c.attached && !c.done
}

// Propose holds the reader back at offset at, if it has not consumed
// that far yet and at lies inside its range, and reports whether it did.
// The owner must then call Resolve.
func (c *Cut) Propose(at int64) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.attached || c.done || c.pending != 0 || at <= c.pos || at >= c.end {
		return false
	}
	c.pending, c.resolved = at, make(chan struct{})
	return true
}

// Resolve ends a proposal: made, the split now ends at the proposed
// offset; not made, the reader carries on to its old end.
func (c *Cut) Resolve(made bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.pending == 0 {
		return
	}
	if made {
		c.end = c.pending
	}
	c.pending = 0
	close(c.resolved)
}

func (c *Cut) attach(start, pos, end int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.attached, c.start, c.pos, c.end = true, start, pos, end
}

// limit is called by the reader before it starts a new record at pos:
// it records the position and returns the end to apply, waiting while a
// proposed cut at or before pos is unresolved.
func (c *Cut) limit(ctx context.Context, pos int64) (int64, error) {
	for {
		c.mu.Lock()
		c.pos = pos
		if c.pending == 0 || pos < c.pending {
			end := c.end
			c.mu.Unlock()
			return end, nil
		}
		wait := c.resolved
		c.mu.Unlock()
		select {
		case <-wait:
		case <-ctx.Done():
			return 0, ctx.Err()
		}
	}
}

func (c *Cut) finish() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.done = true
}

// Carve cuts the unread rest of s, from its reader's position pos, into
// the giver's share and up to max pieces to give away, each of at least
// min bytes: the giver keeps [s.Start, at) and the pieces cover [at,
// s.End) in order. It returns no pieces when the rest is too small to
// share.
func Carve(s Split, pos int64, pieces int, minPiece int64) (at int64, give []Split) {
	rest := s.End - pos
	n := int64(pieces) + 1 // the giver keeps a share too
	if minPiece > 0 {
		n = min(n, rest/minPiece)
	}
	if n < 2 || pos < s.Start || pos >= s.End {
		return s.End, nil
	}
	share := rest / n
	at = pos + share + rest%n // the giver keeps the remainder
	for k := int64(1); k < n; k++ {
		from := at + (k-1)*share
		give = append(give, Split{Key: s.Key, Start: from, End: from + share, ETag: s.ETag, Version: s.Version, Source: s.Source})
	}
	return at, give
}
