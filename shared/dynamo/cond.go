package dynamo

import (
	"fmt"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	sm "github.com/batchwork/batchwork/statemachine"
)

// guardExprs maps each lifecycle guard to the condition that enforces it on
// the record. An empty string marks a guard that the caller checks before
// the write (by reading consistently, or against S3); TestGuardsMapped
// fails when a guard is added to the tables without an entry here.
var guardExprs = map[sm.Guard]string{
	sm.GuardDue:               "(attribute_not_exists(nb) OR nb <= :now)",
	sm.GuardLeaseExpired:      "lease < :expired",
	sm.GuardTokenMatches:      "tok = :tok",
	sm.GuardAttemptsLeft:      "att < mx",
	sm.GuardNoAttemptsLeft:    "att >= mx",
	sm.GuardOutputsExist:      "",
	sm.GuardUpstreamCompleted: "",
	sm.GuardAllTasksCommitted: "",
	// On the job item, not the stage: TransitionStage adds a ConditionCheck
	// on the job to the stage's write (jobRunningCheck).
	sm.GuardJobRunning: "",
	// On the executor's liveness record: TakeoverTask adds a
	// ConditionCheck on it to the task's write.
	sm.GuardHolderDead:         "",
	sm.GuardAllStagesCompleted: "",
	sm.GuardNoOutput:           "",
	sm.GuardOutputsPublished:   "",
	// On the stage record: tfl counts the failed tasks it tolerated;
	// the caller binds :allowed (tolerate.go).
	sm.GuardFailuresTolerated: "(attribute_not_exists(" + aTolerated + ") OR " + aTolerated + " < :allowed)",
	// Redrive (redrive.go).
	sm.GuardNotTolerated:      "attribute_not_exists(" + aTaskTolerated + ")",
	sm.GuardStageStarted:      "attribute_exists(" + aStarted + ")",
	sm.GuardStageNeverStarted: "attribute_not_exists(" + aStarted + ")",
	// RedriveJob adds it: attribute_not_exists(rdv) for a job's first
	// redrive, rdv = :rdv after.
	sm.GuardRedriveCount: "",
}

// cond builds condition expressions from lifecycle transitions, collecting
// the state values they mention.
type cond struct {
	values map[string]types.AttributeValue
}

func newCond() *cond { return &cond{values: map[string]types.AttributeValue{}} }

// transition renders "#st IN (...) AND guard AND guard" for tr. Guards use
// the placeholders :now and :tok, which the caller binds.
func transition[S ~string](c *cond, tr sm.Transition[S]) string {
	from := make([]string, len(tr.From))
	for i, s := range tr.From {
		ph := ":s_" + string(s)
		c.values[ph] = sv(string(s))
		from[i] = ph
	}
	parts := []string{"#st IN (" + strings.Join(from, ", ") + ")"}
	for _, g := range tr.Guards {
		e, ok := guardExprs[g]
		if !ok {
			panic(fmt.Sprintf("dynamo: guard %q has no condition", g))
		}
		if e != "" {
			parts = append(parts, e)
		}
	}
	return strings.Join(parts, " AND ")
}

// bindLeaseExpired binds :expired for sm.GuardLeaseExpired: a lease counts
// as expired only sm.LeaseSkew after its time, so a caller whose clock
// runs ahead of the holder's does not fence a live holder early.
func bindLeaseExpired(c *cond, now time.Time) {
	c.values[":expired"] = ms(now.Add(-sm.LeaseSkew))
}

// to binds the destination state of tr as :to.
func to[S ~string](c *cond, tr sm.Transition[S]) {
	c.values[":to"] = sv(string(tr.To))
}

var stNames = map[string]string{"#st": aState}
