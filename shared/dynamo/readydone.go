package dynamo

import (
	"context"
	"errors"
	"strconv"
	"sync"

	"github.com/batchwork/batchwork/shared/domain"
	sm "github.com/batchwork/batchwork/statemachine"
)

// A ready marker of a COMPLETED stage has nothing left to watch: the
// stage completed because every counter reached zero, so every task of
// the chunk committed (or failed within the allowance) and was counted,
// and COMPLETED is never left (a redrive reopens only FAILED and
// CANCELLED stages). Its look takes it out of the index without reading
// its chunk or its counters: no reads, and a share of one write
// (readydonebatch.go) instead of four reads and a write.
// A sweep run looks at all of a finished stage's markers at once (they
// fall due together, StuckAfter after their chunks), so the store
// remembers the stages it saw COMPLETED and reads each stage once.

// completedCap bounds the stages remembered; past it the memory starts
// again (a forgotten stage is read again, nothing more).
const completedCap = 4096

type completedStages struct {
	mu   sync.Mutex
	seen map[string]bool
}

func completedKey(job string, stage int) string { return job + "#" + strconv.Itoa(stage) }

func (c *completedStages) has(job string, stage int) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.seen[completedKey(job, stage)]
}

func (c *completedStages) add(job string, stage int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.seen == nil || len(c.seen) >= completedCap {
		c.seen = map[string]bool{}
	}
	c.seen[completedKey(job, stage)] = true
}

// markerStage reads a marker's stage for its look: completed says the
// stage is COMPLETED (remembered, or read); otherwise st is the stage as
// read, nil when it is gone (the job's records are being deleted).
func (s *Store) markerStage(ctx context.Context, m readyMarker) (st *domain.Stage, completed bool, err error) {
	if s.completed.has(m.job, m.stage) {
		return nil, true, nil
	}
	got, err := s.StageGet(ctx, m.job, m.stage)
	if errors.Is(err, domain.ErrNotFound) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	if got.State == sm.StageCompleted {
		s.completed.add(m.job, m.stage)
		return nil, true, nil
	}
	return &got, false, nil
}
