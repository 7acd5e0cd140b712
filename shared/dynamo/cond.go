package dynamo

import (
	"fmt"
	"slices"
	"strings"
	"sync"
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
	r := renderedOf(tr)
	for i, ph := range r.phs {
		c.values[ph] = r.vals[i]
	}
	return r.expr
}

// rendered is a transition's condition, rendered once per process (every
// claim and commit renders one or two): its text and the values of the
// state placeholders it binds, shared by every request (nothing writes to
// an input's attribute values once it is built).
type rendered struct {
	from   []string // what it was rendered from, to tell apart two
	guards []sm.Guard
	expr   string
	phs    []string
	vals   []types.AttributeValue
}

// renderKey picks a transition's rendering; its From and Guards are then
// compared, so a transition that shares the key is rendered anew, never
// given another's condition.
type renderKey struct {
	event        sm.Event
	to           string
	from, guards int
}

var renderings sync.Map // renderKey -> *rendered

func renderedOf[S ~string](tr sm.Transition[S]) *rendered {
	k := renderKey{tr.Event, string(tr.To), len(tr.From), len(tr.Guards)}
	if v, ok := renderings.Load(k); ok {
		if r := v.(*rendered); renders(r, tr) {
			return r
		}
		return render(tr)
	}
	r := render(tr)
	renderings.LoadOrStore(k, r)
	return r
}

func renders[S ~string](r *rendered, tr sm.Transition[S]) bool {
	if !slices.Equal(r.guards, tr.Guards) || len(r.from) != len(tr.From) {
		return false
	}
	for i, s := range tr.From {
		if r.from[i] != string(s) {
			return false
		}
	}
	return true
}

func render[S ~string](tr sm.Transition[S]) *rendered {
	r := &rendered{guards: slices.Clone(tr.Guards)}
	from := make([]string, len(tr.From))
	for i, s := range tr.From {
		ph := ":s_" + string(s)
		r.from = append(r.from, string(s))
		r.phs = append(r.phs, ph)
		r.vals = append(r.vals, sv(string(s)))
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
	r.expr = strings.Join(parts, " AND ")
	return r
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

// commitNames are a commit's names (its state and its records' counts),
// shared as stNames is.
var commitNames = map[string]string{"#st": aState, "#rin": aRecIn, "#rout": aRecOut}
