package readside

import (
	"time"

	"github.com/batchwork/batchwork/shared/domain"
	sm "github.com/batchwork/batchwork/statemachine"
)

// CopyCounts are a stage's speculative copies as status shows them:
// launched (claimed), won (committed before their holder) and running.
// Launched and won are exact (counted by the writes that launch and
// commit a copy); running is what the sweep counted at its last look at
// the stage (every CheckEvery or less often, speculationlook.go), and 0
// once the stage is not RUNNING.
type CopyCounts struct {
	Launched int `json:"launched"`
	Won      int `json:"won"`
	Running  int `json:"running"`
}

// copyCounts is st's copies, nil when it never had one.
func copyCounts(st domain.StageStats) *CopyCounts {
	c := &CopyCounts{Launched: st.CopiesLaunched, Won: st.Counters.CopiesWon}
	if st.State == sm.StageRunning {
		c.Running = st.CopiesRunning
	}
	if *c == (CopyCounts{}) {
		return nil
	}
	return c
}

// CopyInfo is a task's speculative copy as the API shows it.
type CopyInfo struct {
	// Attempt is the copy's attempt and HolderAttempt the attempt it ran
	// beside (0 when the copy was requested but not claimed yet).
	Attempt       int        `json:"attempt,omitempty"`
	HolderAttempt int        `json:"holderAttempt,omitempty"`
	Requested     time.Time  `json:"requested"`
	Started       *time.Time `json:"started,omitempty"`
	// Live: the copy's claim runs beside the holder's.
	Live bool `json:"live"`
}

// copyAttempts corrects a copied task's attempt list: two attempts may run
// at once, and the committed one need not be the last (the holder can win
// over its copy). ends are the task's recorded attempt ends by attempt.
func copyAttempts(info *TaskInfo, t domain.Task, ends map[[2]int]domain.AttemptEnd) {
	c := t.Copy
	if c == nil {
		return
	}
	// A task cancelled (or redriven) under a live copy keeps the copy's
	// claim fields until its next claim; only a CLAIMED task's is live.
	ci := &CopyInfo{Requested: c.Requested, Live: c.Live() && t.State == sm.TaskClaimed, HolderAttempt: c.HolderAttempt}
	if !c.Started.IsZero() {
		ci.Started = opt(c.Started)
		ci.Attempt = c.HolderAttempt + 1 // the copy took the next attempt
	}
	info.Copy = ci
	if c.Started.IsZero() {
		return
	}
	for i := range info.Attempts {
		ai := &info.Attempts[i]
		e, ended := ends[[2]int{t.Ref.Partition, ai.Attempt}]
		switch {
		case t.State == sm.TaskSucceeded && ai.Attempt == t.CommittedAttempt:
			ai.Outcome, ai.At, ai.Error = OutcomeCommitted, opt(t.Updated), ""
		case t.State == sm.TaskSucceeded && ai.Outcome == OutcomeCommitted:
			// The last attempt lost to an earlier one.
			ai.Outcome, ai.At, ai.Error = OutcomeUnknown, nil, ""
			if ended {
				ai.Outcome, ai.At, ai.Error = string(e.Kind), opt(e.At), e.Err
			}
		case t.State == sm.TaskClaimed && c.Live() && ai.Attempt == c.HolderAttempt:
			ai.Outcome, ai.Executor, ai.Started = OutcomeRunning, t.Executor, opt(t.Claimed)
		case t.State == sm.TaskClaimed && c.Live() && ai.Attempt == c.Attempt:
			ai.Outcome, ai.Executor, ai.Started = OutcomeRunning, c.Executor, opt(c.Started)
		case t.State == sm.TaskClaimed && !c.Live() && c.HolderAttempt > 0 && ai.Attempt == c.HolderAttempt:
			// The copy failed or expired; its holder runs on.
			ai.Outcome, ai.Executor, ai.Started = OutcomeRunning, t.Executor, opt(t.Claimed)
		case t.State == sm.TaskClaimed && ai.Outcome == OutcomeRunning && ended:
			ai.Outcome, ai.At, ai.Error = string(e.Kind), opt(e.At), e.Err
		}
	}
}
