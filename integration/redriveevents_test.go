package integration

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge"

	"github.com/batchwork/batchwork/internal/faults"
	"github.com/batchwork/batchwork/shared/batchwork"
	"github.com/batchwork/batchwork/shared/control"
	"github.com/batchwork/batchwork/shared/events"
	sm "github.com/batchwork/batchwork/statemachine"
)

// A redriven job ends again, and its tasks fail again: each ending and
// each failure is an event of its own, with an id of its own, so that a
// consumer that dedupes on eventId (as EventBridge consumers must) sees
// them all. A publication that is retried (here PutEvents whose answer
// is lost, so the SDK puts the entry again) stays one event.
func TestRedriveEndsAgainUnderNewEventIDs(t *testing.T) {
	t.Parallel()
	var broken atomic.Bool
	broken.Store(true)
	reg := batchwork.NewRegistry()
	reg.Register("flaky", func(ctx context.Context, tk *batchwork.Task) error {
		if broken.Load() {
			return errors.New("still broken")
		}
		_, err := tk.Out.Write([]byte("ok\n"))
		return err
	})
	inj := faults.New(5)
	e := newEnv(t, reg, envOptions{faults: inj})
	url := eventQueue(t, e)
	ctx := context.Background()

	// The first ending's publication is retried: its PutEvents applies
	// and its answer is lost.
	id := "" // set below, before the job can end
	var idSet atomic.Bool
	inj.Once(faults.Rule{Service: "EventBridge", Operation: "PutEvents", Kind: faults.Lost, Match: func(_ string, in any) bool {
		pe, ok := in.(*eventbridge.PutEventsInput)
		if !ok || !idSet.Load() {
			return false
		}
		for _, en := range pe.Entries {
			if strings.Contains(aws.ToString(en.Detail), `"eventId":"`+events.EndedID(id)+`"`) {
				return true
			}
		}
		return false
	}})
	inj.SetEnabled(false)
	spec := `{"name":"again","stages":[{"name":"s","task":"flaky","partitions":{"count":1},"retry":{"maxAttempts":1}}]}`
	res, err := e.r.Service.Submit(ctx, control.SubmitRequest{Owner: "tester", IdempotencyKey: "again", Spec: []byte(spec)})
	if err != nil {
		t.Fatal(err)
	}
	id = res.JobID
	idSet.Store(true)
	inj.SetEnabled(true)
	if st := e.waitJob(id, time.Minute); st.State != string(sm.JobFailed) {
		t.Fatalf("job %s, want FAILED", st.State)
	}
	// Redriven while still broken: it fails again (attempt 2).
	if _, err := e.r.Service.Redrive(ctx, control.RedriveRequest{Owner: "tester", ID: id}); err != nil {
		t.Fatalf("first redrive: %v", err)
	}
	if st := e.waitJob(id, time.Minute); st.State != string(sm.JobFailed) || st.Redrives != 1 {
		t.Fatalf("after the first redrive: %s after %d redrives, want FAILED after 1", st.State, st.Redrives)
	}
	broken.Store(false) // the fix
	if _, err := e.r.Service.Redrive(ctx, control.RedriveRequest{Owner: "tester", ID: id}); err != nil {
		t.Fatalf("second redrive: %v", err)
	}
	if st := e.waitJob(id, time.Minute); st.State != string(sm.JobSucceeded) {
		t.Fatalf("after the second redrive: %s (%s), want SUCCEEDED", st.State, st.Error)
	}
	inj.SetEnabled(false)
	if inj.Total() != 1 {
		t.Errorf("%d faults injected, want the first ending's lost PutEvents", inj.Total())
	}

	const want = 7
	evs := readEvents(t, e, url, 30*time.Second, func(evs []delivered) bool { return len(dedupe(t, evs)) >= want })
	evs = append(evs, readEvents(t, e, url, 2*time.Second, func([]delivered) bool { return false })...)
	uniq := dedupe(t, evs) // fails on one id with two contents
	const failed = `stage "s" task 0 failed after %d attempts: still broken`
	wantSummary := []string{
		"Batchwork Job Failed FAILED counts=1/0/1/0 error=" + strings.Replace(failed, "%d", "1", 1),
		"Batchwork Job Failed FAILED counts=1/0/1/0 error=" + strings.Replace(failed, "%d", "2", 1),
		"Batchwork Job Submitted RUNNING counts=1/0/0/0",
		"Batchwork Job Succeeded SUCCEEDED counts=1/1/1/1",
		"Batchwork Stage Completed stage=s counts=0/0/1/1",
		"Batchwork Task Failed stage=s partition=0 attempts=1 error=still broken",
		"Batchwork Task Failed stage=s partition=0 attempts=2 error=still broken",
	}
	if got := summary(uniq, id); !slices.Equal(got, wantSummary) {
		t.Errorf("events of the redriven job:\n  %s\nwant:\n  %s", strings.Join(got, "\n  "), strings.Join(wantSummary, "\n  "))
	}
	ids := map[string]bool{}
	for _, ev := range uniq {
		ids[ev.Detail.EventID] = true
	}
	for _, want := range []string{events.EndedID(id), events.JobEndedID(id, 1), events.JobEndedID(id, 2),
		events.TaskFailedID(id, 0, 0, 1), events.TaskFailedID(id, 0, 0, 2)} {
		if !ids[want] {
			t.Errorf("no event %s among %v", want, ids)
		}
	}
	// The retried publication was delivered (at least) twice, as one event.
	n := 0
	for _, ev := range evs {
		if ev.Detail.EventID == events.EndedID(id) {
			n++
		}
	}
	if n < 2 {
		t.Errorf("the first ending was delivered %d times; want the lost PutEvents' retry to deliver it again", n)
	}
	for eid := range ids {
		if _, found, err := e.r.Store.OutboxEvent(ctx, eid); err != nil || found {
			t.Errorf("outbox record of %s: found=%v, %v; want it deleted", eid, found, err)
		}
	}
}
