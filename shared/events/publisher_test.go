package events

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge"
	ebtypes "github.com/aws/aws-sdk-go-v2/service/eventbridge/types"
)

// memOutbox is an in-memory Outbox.
type memOutbox struct {
	evs     map[string]Event
	deleted []string
}

func (o *memOutbox) OutboxEvent(_ context.Context, id string) (Event, bool, error) {
	ev, ok := o.evs[id]
	return ev, ok, nil
}

func (o *memOutbox) OutboxDelete(_ context.Context, id string) error {
	delete(o.evs, id)
	o.deleted = append(o.deleted, id)
	return nil
}

func (o *memOutbox) OutboxDelivered(_ context.Context, id, to string) error {
	if ev, ok := o.evs[id]; ok && !slices.Contains(ev.Delivered, to) {
		ev.Delivered = append(slices.Clone(ev.Delivered), to)
		o.evs[id] = ev
	}
	return nil
}

// fakeBus records PutEvents calls and refuses the entries whose detail
// type is in refuse, or the whole call with err.
type fakeBus struct {
	calls  [][]ebtypes.PutEventsRequestEntry
	refuse map[string]bool
	err    error
}

func (b *fakeBus) PutEvents(_ context.Context, in *eventbridge.PutEventsInput, _ ...func(*eventbridge.Options)) (*eventbridge.PutEventsOutput, error) {
	b.calls = append(b.calls, in.Entries)
	if b.err != nil {
		return nil, b.err
	}
	out := &eventbridge.PutEventsOutput{}
	for i, e := range in.Entries {
		if b.refuse[aws.ToString(e.DetailType)] {
			out.FailedEntryCount++
			out.Entries = append(out.Entries, ebtypes.PutEventsResultEntry{ErrorCode: aws.String("InternalFailure"), ErrorMessage: aws.String("try again")})
			continue
		}
		out.Entries = append(out.Entries, ebtypes.PutEventsResultEntry{EventId: aws.String(fmt.Sprint(i))})
	}
	return out, nil
}

func outboxOf(n int, detailType func(i int) string) *memOutbox {
	o := &memOutbox{evs: map[string]Event{}}
	at := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
	for i := range n {
		id := SubmittedID(fmt.Sprintf("j%02d", i))
		o.evs[id] = New(id, detailType(i), at, Detail{Owner: "alice", JobID: fmt.Sprintf("j%02d", i)})
	}
	return o
}

func ids(o *memOutbox) []string {
	var out []string
	for id := range o.evs {
		out = append(out, id)
	}
	sort.Strings(out)
	return out
}

func TestPublish(t *testing.T) {
	always := func(int) string { return JobSubmitted }
	cases := []struct {
		name        string
		n           int
		detailType  func(int) string
		refuse      map[string]bool
		busErr      error
		extraIDs    []string
		wantPut     int
		wantCalls   []int // entries per PutEvents
		wantLeft    int   // records left in the outbox
		wantErr     error
		wantErrText string
	}{
		{name: "one", n: 1, detailType: always, wantPut: 1, wantCalls: []int{1}},
		{name: "batches of ten", n: 23, detailType: always, wantPut: 23, wantCalls: []int{10, 10, 3}},
		{name: "published already", n: 2, detailType: always, extraIDs: []string{"gone.submitted"}, wantPut: 2, wantCalls: []int{2}},
		{name: "partial failure keeps the refused entries", n: 12, refuse: map[string]bool{JobFailed: true},
			detailType: func(i int) string { return []string{JobSubmitted, JobFailed, StageCompleted}[i%3] },
			wantPut:    8, wantCalls: []int{10, 2}, wantLeft: 4, wantErr: ErrEntryFailed, wantErrText: "InternalFailure"},
		{name: "put error keeps every record", n: 3, detailType: always, busErr: errors.New("network down"),
			wantPut: 0, wantCalls: []int{3}, wantLeft: 3, wantErrText: "network down"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			o := outboxOf(c.n, c.detailType)
			bus := &fakeBus{refuse: c.refuse, err: c.busErr}
			p := NewPublisher(bus, "bw-bus", o)
			put, err := p.Publish(t.Context(), append(ids(o), c.extraIDs...)...)
			if put != c.wantPut {
				t.Errorf("put %d, want %d", put, c.wantPut)
			}
			var calls []int
			for _, call := range bus.calls {
				calls = append(calls, len(call))
				for _, e := range call {
					if aws.ToString(e.EventBusName) != "bw-bus" || aws.ToString(e.Source) != Source {
						t.Errorf("entry on bus %q from %q, want bw-bus and %q", aws.ToString(e.EventBusName), aws.ToString(e.Source), Source)
					}
					var d Detail
					if err := json.Unmarshal([]byte(aws.ToString(e.Detail)), &d); err != nil || d.EventID == "" || d.Owner != "alice" {
						t.Errorf("detail %s (%v): want an eventId and the owner", aws.ToString(e.Detail), err)
					}
				}
			}
			if !slices.Equal(calls, c.wantCalls) {
				t.Errorf("PutEvents entries per call %v, want %v", calls, c.wantCalls)
			}
			if len(o.evs) != c.wantLeft {
				t.Errorf("%d records left, want %d: %v", len(o.evs), c.wantLeft, ids(o))
			}
			if c.refuse != nil {
				for id, ev := range o.evs {
					if !c.refuse[ev.DetailType] {
						t.Errorf("record %s (%s) left although accepted", id, ev.DetailType)
					}
				}
			}
			switch {
			case c.wantErr == nil && c.wantErrText == "" && err != nil:
				t.Errorf("error %v, want none", err)
			case c.wantErr != nil && !errors.Is(err, c.wantErr):
				t.Errorf("error %v, want %v", err, c.wantErr)
			case c.wantErrText != "" && (err == nil || !strings.Contains(err.Error(), c.wantErrText)):
				t.Errorf("error %v, want one saying %q", err, c.wantErrText)
			}
		})
	}
}

func TestStableIDs(t *testing.T) {
	for _, c := range []struct{ got, want string }{
		{SubmittedID("j1"), "j1.submitted"},
		{EndedID("j1"), "j1.ended"},
		{StageCompletedID("j1", 2), "j1.stage.2.completed"},
		{JobEndedID("j1", 0), "j1.ended"},
		{JobEndedID("j1", 2), "j1.ended.r2"},
		{TaskFailedID("j1", 2, 17, 3), "j1.task.2.17.a3.failed"},
	} {
		if c.got != c.want {
			t.Errorf("id %q, want %q", c.got, c.want)
		}
	}
	for state, want := range map[string]string{"SUCCEEDED": JobSucceeded, "FAILED": JobFailed, "CANCELLED": JobCancelled} {
		if got := JobEndedType(state); got != want {
			t.Errorf("JobEndedType(%s) = %q, want %q", state, got, want)
		}
	}
}
