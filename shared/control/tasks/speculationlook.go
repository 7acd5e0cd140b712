package tasks

import (
	"context"
	"strconv"
	"time"

	"github.com/batchwork/batchwork/shared/domain"
	sm "github.com/batchwork/batchwork/statemachine"
)

// The cost of speculation's looks. Finding stragglers and counting the
// copies that run (for maxCopies) takes one listing of the stage's tasks:
// Total task items, about Total/8 read units (consistent Query reads of
// items under 1 KB, 4 KB per unit), and nothing cheaper finds them, since
// a task item's state is not indexed per stage. The sweep visits a
// running stage every CheckEvery for its completion check; a listing
// that often would cost a 100,000-task stage some 12,500 read units every
// few seconds once its quantile is reached, for as long as its tail runs.
// So a stage's tasks are listed only when a look can change something:
//
//   - never before the quantile, nor once every task committed (the
//     stage's duration counters say so: at most 32 reads);
//   - at every sweep while copies are under way (requested, or running
//     beside their holder: a dead one is dropped, a lost message resent,
//     a freed place refilled) or stragglers wait for a place under
//     maxCopies;
//   - otherwise only once the earliest claim that was running uncopied
//     at the last look has become a straggler by the median now. A task
//     claimed after that look was claimed later, so it becomes one later:
//     no straggler is found later than with a look per sweep.
//
// So a stage's long tail costs one listing per straggler found (and one
// per sweep while its copies run, at most maxCopies of them), not one per
// sweep. A look's cost is still linear in Total. The last look is this
// process's memory: a sweep in a new process looks once at once, which
// costs one listing and breaks nothing.

// specLook is what a look at a speculating stage left for the next one.
type specLook struct {
	// earliest is the earliest claim of a running task that may become a
	// straggler (the look's time when none runs).
	earliest time.Time
	// busy: copies were under way or stragglers waited for a place.
	busy bool
}

// speculationLookDue says whether the sweep lists a speculating stage's
// tasks now (committed counts its commits so far).
func (s *Copies) speculationLookDue(job string, st domain.Stage, committed int, median time.Duration, multiplier float64, now time.Time) bool {
	if committed >= st.Total {
		return false
	}
	if s.looks == nil {
		return true
	}
	last, ok := s.looks.Get(specLookKey(job, st.Index))
	return !ok || last.busy || sm.IsStraggler(now.Sub(last.earliest), median, multiplier)
}

// noteSpeculationLook keeps what a look found for the next one.
func (s *Copies) noteSpeculationLook(job string, st domain.Stage, l specLook) {
	if s.looks != nil {
		s.looks.Put(specLookKey(job, st.Index), l)
	}
}

func specLookKey(job string, stage int) string { return job + "/" + strconv.Itoa(stage) }

// noteCopiesRunning records, for status, the copies of a stage that run
// after this look (those it found and those it launches), when the count
// changed. Best effort: status, never state.
func (s *Copies) noteCopiesRunning(ctx context.Context, st domain.Stage, n int) {
	if n == st.CopiesRunning {
		return
	}
	if err := s.store.StageSetCopiesRunning(ctx, st.Job, st.Index, n); err != nil {
		s.log.Warn("record running copies", "job_id", st.Job, "stage", st.Index, "err", err)
	}
}
