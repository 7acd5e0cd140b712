package integration

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge"

	"github.com/batchwork/batchwork/internal/faults"
	"github.com/batchwork/batchwork/shared/batchwork"
	"github.com/batchwork/batchwork/shared/control"
	sm "github.com/batchwork/batchwork/statemachine"
)

// marksRedrive says whether a DynamoDB request marks a FAILED task as
// one a redrive is to put back (its redrive-pending attribute set).
func marksRedrive(in any) bool {
	var exprs []*string
	switch in := in.(type) {
	case *dynamodb.UpdateItemInput:
		exprs = append(exprs, in.UpdateExpression)
	case *dynamodb.TransactWriteItemsInput:
		for _, it := range in.TransactItems {
			if it.Update != nil {
				exprs = append(exprs, it.Update.UpdateExpression)
			}
		}
	}
	for _, e := range exprs {
		if strings.HasPrefix(aws.ToString(e), "SET rdp = ") {
			return true
		}
	}
	return false
}

// taskFailedAgainEvent finds the job in the detail of the event of its
// first task's second failed attempt (events.TaskFailedID).
var taskFailedAgainEvent = regexp.MustCompile(`"eventId":"([^"]+)\.task\.0\.0\.a2\.failed"`)

// Two requests redrive the same FAILED job at once: both read it FAILED
// and list its failed task, and the first redrives it while the second
// is slow. The task runs again and fails again in the redriven
// generation; the second request, going on with what it listed, must not
// make that new failure look like the ended generation's, or nothing
// ends the job. Here the second request is held after its listing until
// the first's redrive has run and the task has failed again, and the
// process failing it is held until the second request is done.
func TestConcurrentRedriveDoesNotHideNewFailure(t *testing.T) {
	t.Parallel()
	reg := batchwork.NewRegistry()
	reg.Register("pf", func(_ context.Context, tk *batchwork.Task) error {
		return batchwork.Permanent(fmt.Errorf("bad data at attempt %d", tk.Attempt))
	})
	inj := faults.New(1)
	e := newEnv(t, reg, envOptions{faults: inj})
	ctx := context.Background()
	var (
		heldB, heldFailer atomic.Bool
		errA, errB        error
		hookErr           error
		bListed           = make(chan struct{}) // B listed the task and is about to mark it
		releaseB          = make(chan struct{}) // the task failed again in generation 1
		bDone             = make(chan struct{})
		failerDone        = make(chan struct{})
	)
	// B's first mark: it waits until the task has failed again.
	inj.Add(faults.Rule{Service: "DynamoDB", Kind: faults.Throttle, Match: func(_ string, in any) bool {
		if !marksRedrive(in) || !heldB.CompareAndSwap(false, true) {
			return false
		}
		close(bListed)
		select {
		case <-releaseB:
		case <-time.After(time.Minute):
			hookErr = errors.New("the task did not fail again within a minute")
		}
		return false
	}})
	// The process failing the task in generation 1, after writing it
	// FAILED and before it decides about the job: it waits until B is
	// done.
	inj.Add(faults.Rule{Service: "EventBridge", Operation: "PutEvents", Kind: faults.Throttle, Match: func(_ string, in any) bool {
		pe, ok := in.(*eventbridge.PutEventsInput)
		if !ok {
			return false
		}
		found := false
		for _, en := range pe.Entries {
			found = found || taskFailedAgainEvent.MatchString(aws.ToString(en.Detail))
		}
		if !found || !heldFailer.CompareAndSwap(false, true) {
			return false
		}
		defer close(failerDone)
		close(releaseB)
		select {
		case <-bDone:
		case <-time.After(time.Minute):
			hookErr = errors.New("the second redrive request did not finish within a minute")
		}
		return false
	}})
	id := e.submit("concurrent-redrive", []byte(`{"name":"concurrent","stages":[{"name":"s","task":"pf","partitions":{"count":1}}]}`))
	if st := e.waitJob(id, time.Minute); st.State != string(sm.JobFailed) {
		t.Fatalf("job %s (%s), want FAILED", st.State, st.Error)
	}
	zero := 0
	go func() {
		defer close(bDone)
		_, errB = e.r.Service.Redrive(ctx, control.RedriveRequest{Owner: "tester", ID: id, Redrives: &zero})
	}()
	select {
	case <-bListed:
	case <-time.After(time.Minute):
		t.Fatal("the second redrive request did not list the failed task within a minute")
	}
	_, errA = e.r.Service.Redrive(ctx, control.RedriveRequest{Owner: "tester", ID: id, Redrives: &zero})
	if errA != nil {
		t.Fatalf("first redrive: %v", errA)
	}
	select {
	case <-failerDone:
	case <-time.After(time.Minute):
		t.Fatal("the redriven task did not fail again within a minute")
	}
	<-bDone
	if hookErr != nil {
		t.Fatal(hookErr)
	}
	var re *control.RedriveError
	if errB != nil && !errors.As(errB, &re) {
		t.Fatalf("second redrive: %v", errB)
	}
	st := e.waitJob(id, 30*time.Second)
	if want := "bad data at attempt 2"; st.State != string(sm.JobFailed) || st.Redrives != 1 || !strings.Contains(st.Error, want) {
		t.Fatalf("redriven job %s (%s) with %d redrives; want FAILED after 1 redrive with %q: the second request's mark hid the new generation's failure",
			st.State, st.Error, st.Redrives, want)
	}
}
