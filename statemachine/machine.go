// Package statemachine holds the job, stage and task lifecycles as data:
// states, events, the allowed transitions and the guards that must hold for
// each. It is the one place where transition rules live. Stores turn a
// transition's source states and guards into conditional writes, so the rule
// and the write cannot drift apart. The package is pure Go: no AWS, no clock.
package statemachine

import (
	"errors"
	"fmt"
	"slices"
	"strings"
)

// ErrInvalidTransition reports an event that is not allowed in a state.
var ErrInvalidTransition = errors.New("invalid transition")

// Event names something that happens to a job, stage or task.
type Event string

// Guard names a condition, beyond the source state, that must hold for a
// transition. Each guard is documented where it is declared; stores map every
// guard to a condition expression and test that none is missing.
type Guard string

// Transition moves a record from any of From to To when Event happens and
// all Guards hold.
type Transition[S ~string] struct {
	Event  Event
	From   []S
	To     S
	Guards []Guard
}

// Machine is one lifecycle.
type Machine[S ~string] struct {
	Name        string
	States      []S
	Initial     []S
	Terminal    []S
	Transitions []Transition[S]
}

// Events lists the machine's events in table order, without repeats.
func (m Machine[S]) Events() []Event {
	var evs []Event
	for _, t := range m.Transitions {
		if !slices.Contains(evs, t.Event) {
			evs = append(evs, t.Event)
		}
	}
	return evs
}

// Lookup returns the transition for event ev taken from state from.
func (m Machine[S]) Lookup(from S, ev Event) (Transition[S], error) {
	for _, t := range m.Transitions {
		if t.Event == ev && slices.Contains(t.From, from) {
			return t, nil
		}
	}
	return Transition[S]{}, fmt.Errorf("%s %s on %q: %w", m.Name, from, ev, ErrInvalidTransition)
}

// Transition returns the single transition for ev. Each event of a machine
// has exactly one destination (checked by the tests), which is what lets a
// store build one conditional write per event.
func (m Machine[S]) Transition(ev Event) Transition[S] {
	for _, t := range m.Transitions {
		if t.Event == ev {
			return t
		}
	}
	panic(fmt.Sprintf("statemachine: %s has no event %q", m.Name, ev))
}

// IsTerminal reports whether no event leaves s, but an owner's redrive
// (IsRedrive).
func (m Machine[S]) IsTerminal(s S) bool { return slices.Contains(m.Terminal, s) }

// Mermaid renders the machine as a Mermaid state diagram.
func (m Machine[S]) Mermaid() string {
	var b strings.Builder
	b.WriteString("stateDiagram-v2\n")
	for _, s := range m.Initial {
		fmt.Fprintf(&b, "    [*] --> %s\n", s)
	}
	for _, t := range m.Transitions {
		label := string(t.Event)
		if len(t.Guards) > 0 {
			gs := make([]string, len(t.Guards))
			for i, g := range t.Guards {
				gs[i] = string(g)
			}
			label += " [" + strings.Join(gs, ", ") + "]"
		}
		for _, f := range t.From {
			fmt.Fprintf(&b, "    %s --> %s: %s\n", f, t.To, label)
		}
	}
	for _, s := range m.Terminal {
		fmt.Fprintf(&b, "    %s --> [*]\n", s)
	}
	return b.String()
}
