package dynamo

import (
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/batchwork/batchwork/shared/domain"
	"github.com/batchwork/batchwork/shared/spec"
	"github.com/batchwork/batchwork/shared/split"
	sm "github.com/batchwork/batchwork/statemachine"
)

func sampleTask(keyLen int) domain.Task {
	return domain.Task{
		Ref:         domain.TaskRef{Job: "j1a1fd8fa5144ffa078bd8", Stage: 63, Partition: 99999},
		MaxAttempts: 100,
		Input:       &split.Split{Key: strings.Repeat("k", keyLen), Start: 1 << 40, End: 1 << 41, Source: spec.MaxInputs - 1},
	}
}

// Every guard used by a lifecycle must have an entry in guardExprs, so a
// rule added to the tables cannot silently be left out of the conditional
// writes.
func TestGuardsMapped(t *testing.T) {
	t.Parallel()
	var guards []sm.Guard
	for _, tr := range sm.Tasks.Transitions {
		guards = append(guards, tr.Guards...)
	}
	for _, tr := range sm.Stages.Transitions {
		guards = append(guards, tr.Guards...)
	}
	for _, tr := range sm.Jobs.Transitions {
		guards = append(guards, tr.Guards...)
	}
	for _, g := range guards {
		if _, ok := guardExprs[g]; !ok {
			t.Errorf("guard %q has no condition in guardExprs", g)
		}
	}
}

func TestTransitionCondition(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		ev   sm.Event
		want string
	}{
		{"claim", sm.TaskClaim, "#st IN (:s_READY) AND (attribute_not_exists(nb) OR nb <= :now)"},
		{"reclaim", sm.TaskReclaim, "#st IN (:s_CLAIMED) AND lease < :expired AND att < mx AND attribute_not_exists(xtok)"},
		{"commit", sm.TaskCommit, "#st IN (:s_CLAIMED) AND (tok = :tok OR xtok = :tok)"},
		{"cancel", sm.TaskCancel, "#st IN (:s_READY, :s_CLAIMED)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c := newCond()
			got := transition(c, sm.Tasks.Transition(tt.ev))
			if got != tt.want {
				t.Fatalf("condition = %q, want %q", got, tt.want)
			}
			for _, s := range sm.Tasks.Transition(tt.ev).From {
				if _, ok := c.values[":s_"+string(s)]; !ok || !strings.Contains(got, ":s_"+string(s)) {
					t.Errorf("source state %s not bound", s)
				}
			}
		})
	}
}

// The task record must stay within one write unit (1 KB) even with the
// longest input key and error the control plane allows.
func TestTaskItemUnder1KB(t *testing.T) {
	t.Parallel()
	// Kept in step with control.MaxInputKey (MaxInputKeyBytes) and control.MaxErrorLen
	// (256 bytes and an ellipsis).
	task := sampleTask(MaxInputKeyBytes)
	if n := TaskItemSize(task, 259); n > 1024 {
		t.Fatalf("task item is %d bytes, want at most 1024", n)
	}
}

// TestTransitionRenderedOnce checks the cached conditions: every
// transition of every lifecycle renders, from the cache, what it renders
// fresh, with the same values bound; and a transition that shares a
// cached one's event, destination and sizes gets its own condition.
func TestTransitionRenderedOnce(t *testing.T) {
	t.Parallel()
	check := func(name string, got, want *cond, gotExpr, wantExpr string) {
		t.Helper()
		if gotExpr != wantExpr {
			t.Errorf("%s: cached condition %q, fresh %q", name, gotExpr, wantExpr)
		}
		if len(got.values) != len(want.values) {
			t.Errorf("%s: cached values %v, fresh %v", name, got.values, want.values)
		}
		for k, v := range want.values {
			if g, ok := got.values[k].(*types.AttributeValueMemberS); !ok || g.Value != v.(*types.AttributeValueMemberS).Value {
				t.Errorf("%s: %s = %v, want %v", name, k, got.values[k], v)
			}
		}
	}
	for _, tr := range sm.Tasks.Transitions {
		for range 2 { // the first fills the cache, the second reads it
			got, want := newCond(), newCond()
			check(string(tr.Event), got, want, transition(got, tr), freshTransition(want, tr))
		}
	}
	for _, tr := range sm.Stages.Transitions {
		got, want := newCond(), newCond()
		check(string(tr.Event), got, want, transition(got, tr), freshTransition(want, tr))
	}
	for _, tr := range sm.Jobs.Transitions {
		got, want := newCond(), newCond()
		check(string(tr.Event), got, want, transition(got, tr), freshTransition(want, tr))
	}
	claim := sm.Tasks.Transition(sm.TaskClaim)
	transition(newCond(), claim)
	other := claim
	other.From = []sm.TaskState{sm.TaskSucceeded}
	got, want := newCond(), newCond()
	check("claim's key, other source", got, want, transition(got, other), freshTransition(want, other))
	if _, ok := got.values[":s_"+string(sm.TaskReady)]; ok {
		t.Error("the other transition bound the cached one's source state")
	}
}

// freshTransition renders tr without the cache.
func freshTransition[S ~string](c *cond, tr sm.Transition[S]) string {
	r := render(tr)
	for i, ph := range r.phs {
		c.values[ph] = r.vals[i]
	}
	return r.expr
}
