package integration

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge"
	ebtypes "github.com/aws/aws-sdk-go-v2/service/eventbridge/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/batchwork/batchwork/internal/faults"
	"github.com/batchwork/batchwork/internal/iamrec"
	"github.com/batchwork/batchwork/shared/batchwork"
	"github.com/batchwork/batchwork/shared/dynamo"
	"github.com/batchwork/batchwork/shared/events"
	sm "github.com/batchwork/batchwork/statemachine"
)

// Batchwork's events (shared/events) reach a consumer through a rule on
// the installation's bus, here one with an SQS target, as a user's rule
// would route them to SNS or Lambda.

// eventQueue creates a queue and a rule on the env's bus that sends it
// every Batchwork event, and returns the queue's URL.
func eventQueue(t *testing.T, e *env) string {
	t.Helper()
	ctx := context.Background()
	bus := e.r.Resources.EventBus
	if bus == "" {
		t.Fatal("the env has no event bus: the data plane did not deploy one")
	}
	sq := sqs.NewFromConfig(e.cfg)
	var b [4]byte
	_, _ = rand.Read(b[:])
	name := "bw-events-" + hex.EncodeToString(b[:])
	q, err := sq.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(name)})
	if err != nil {
		t.Fatal(err)
	}
	attrs, err := sq.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: q.QueueUrl, AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameQueueArn}})
	if err != nil {
		t.Fatal(err)
	}
	eb := eventbridge.NewFromConfig(e.cfg)
	if _, err := eb.PutRule(ctx, &eventbridge.PutRuleInput{
		Name: aws.String("all-batchwork"), EventBusName: aws.String(bus),
		EventPattern: aws.String(`{"source":["batchwork"]}`),
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := eb.PutTargets(ctx, &eventbridge.PutTargetsInput{
		Rule: aws.String("all-batchwork"), EventBusName: aws.String(bus),
		Targets: []ebtypes.Target{{Id: aws.String("queue"), Arn: aws.String(attrs.Attributes[string(sqstypes.QueueAttributeNameQueueArn)])}},
	}); err != nil {
		t.Fatal(err)
	}
	return aws.ToString(q.QueueUrl)
}

// delivered is one event as the rule's target received it.
type delivered struct {
	DetailType string        `json:"detail-type"`
	Source     string        `json:"source"`
	Detail     events.Detail `json:"detail"`
}

// readEvents receives the queue's events until want(events) holds or
// within passes, and returns them.
func readEvents(t *testing.T, e *env, url string, within time.Duration, want func([]delivered) bool) []delivered {
	t.Helper()
	sq := sqs.NewFromConfig(e.cfg)
	var got []delivered
	deadline := time.Now().Add(within)
	for !want(got) && time.Now().Before(deadline) {
		out, err := sq.ReceiveMessage(context.Background(), &sqs.ReceiveMessageInput{
			QueueUrl: &url, MaxNumberOfMessages: 10, WaitTimeSeconds: 1,
		})
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range out.Messages {
			var d delivered
			if err := json.Unmarshal([]byte(aws.ToString(m.Body)), &d); err != nil {
				t.Fatalf("event %s: %v", aws.ToString(m.Body), err)
			}
			got = append(got, d)
			if _, err := sq.DeleteMessage(context.Background(), &sqs.DeleteMessageInput{QueueUrl: &url, ReceiptHandle: m.ReceiptHandle}); err != nil {
				t.Fatal(err)
			}
		}
	}
	return got
}

// dedupe drops repeated deliveries of one event (at least once: a
// documented duplicate has the same eventId and the same detail), and
// fails on two different events with one id.
func dedupe(t *testing.T, evs []delivered) []delivered {
	t.Helper()
	seen := map[string]delivered{}
	var out []delivered
	for _, ev := range evs {
		if prev, ok := seen[ev.Detail.EventID]; ok {
			a, _ := json.Marshal(prev)
			b, _ := json.Marshal(ev)
			if string(a) != string(b) {
				t.Errorf("event id %s delivered with different contents:\n%s\n%s", ev.Detail.EventID, a, b)
			}
			continue
		}
		seen[ev.Detail.EventID] = ev
		out = append(out, ev)
	}
	return out
}

// summary is what the test checks of a job's events: detail types with
// their distinguishing fields, sorted (EventBridge does not order).
func summary(evs []delivered, job string) []string {
	var out []string
	for _, ev := range evs {
		d := ev.Detail
		if d.JobID != job {
			continue
		}
		s := ev.DetailType
		if d.State != "" {
			s += " " + d.State
		}
		if d.Stage != "" {
			s += " stage=" + d.Stage
		}
		if d.Partition != nil {
			s += fmt.Sprintf(" partition=%d attempts=%d", *d.Partition, d.Attempts)
		}
		if c := d.Counts; c != nil {
			s += fmt.Sprintf(" counts=%d/%d/%d/%d", c.Stages, c.StagesCompleted, c.Tasks, c.TasksCommitted)
		}
		if d.Error != "" {
			s += " error=" + d.Error
		}
		out = append(out, s)
	}
	slices.Sort(out)
	return out
}

func TestEventsThroughARule(t *testing.T) {
	t.Parallel()
	reg := batchwork.NewRegistry()
	reg.Register("work", func(ctx context.Context, t *batchwork.Task) error {
		_, err := fmt.Fprintln(t.Out, "ok")
		return err
	})
	reg.Register("boom", func(ctx context.Context, t *batchwork.Task) error {
		return errors.New("bad record")
	})
	reg.Register("hang", func(ctx context.Context, t *batchwork.Task) error {
		<-ctx.Done()
		return ctx.Err()
	})
	e := newEnv(t, reg, envOptions{})
	url := eventQueue(t, e)

	ok := e.submit("ok", []byte(`{"name":"ok","stages":[{"name":"a","task":"work","partitions":{"count":2}},
	  {"name":"b","task":"work","after":["a"],"partitions":{"count":1}}]}`))
	bad := e.submit("bad", []byte(`{"name":"bad","stages":[{"name":"s","task":"boom","partitions":{"count":1},"retry":{"maxAttempts":1}}]}`))
	hung := e.submit("hung", []byte(`{"name":"hung","stages":[{"name":"s","task":"hang","partitions":{"count":1}}]}`))
	if st, err := e.r.Service.Cancel(context.Background(), "tester", hung); err != nil || st.State != string(sm.JobCancelled) {
		t.Fatalf("cancel: %+v, %v", st, err)
	}
	if st := e.waitJob(ok, time.Minute); st.State != string(sm.JobSucceeded) {
		t.Fatalf("job ok %s: %s", st.State, st.Error)
	}
	if st := e.waitJob(bad, time.Minute); st.State != string(sm.JobFailed) {
		t.Fatalf("job bad %s", st.State)
	}
	const want = 4 + 3 + 2
	evs := readEvents(t, e, url, 30*time.Second, func(evs []delivered) bool { return len(dedupe(t, evs)) >= want })
	// Anything late would come now: wait a little for extras.
	evs = append(evs, readEvents(t, e, url, 2*time.Second, func([]delivered) bool { return false })...)
	uniq := dedupe(t, evs)
	if len(uniq) != want {
		t.Errorf("%d distinct events (%d deliveries), want %d", len(uniq), len(evs), want)
	}
	for _, ev := range uniq {
		if ev.Source != events.Source || ev.Detail.Owner != "tester" || ev.Detail.Time == "" {
			t.Errorf("event %+v: want source %s, owner tester and a time", ev, events.Source)
		}
	}
	const failed = `stage "s" task 0 failed after 1 attempts: bad record`
	for _, c := range []struct {
		job  string
		want []string
	}{
		{ok, []string{
			"Batchwork Job Submitted RUNNING counts=2/0/0/0",
			"Batchwork Job Succeeded SUCCEEDED counts=2/2/3/3",
			"Batchwork Stage Completed stage=a counts=0/0/2/2",
			"Batchwork Stage Completed stage=b counts=0/0/1/1",
		}},
		{bad, []string{
			"Batchwork Job Failed FAILED counts=1/0/1/0 error=" + failed,
			"Batchwork Job Submitted RUNNING counts=1/0/0/0",
			"Batchwork Task Failed stage=s partition=0 attempts=1 error=bad record",
		}},
		{hung, []string{
			"Batchwork Job Cancelled CANCELLED counts=1/0/1/0 error=cancelled by its owner",
			"Batchwork Job Submitted RUNNING counts=1/0/0/0",
		}},
	} {
		if got := summary(uniq, c.job); !slices.Equal(got, c.want) {
			t.Errorf("events of job %s:\n  %s\nwant:\n  %s", c.job, strings.Join(got, "\n  "), strings.Join(c.want, "\n  "))
		}
	}
	// Every event was published by the process that made its change or
	// by the sweep, and its outbox record deleted.
	for _, ev := range uniq {
		if _, found, err := e.r.Store.OutboxEvent(context.Background(), ev.Detail.EventID); err != nil || found {
			t.Errorf("outbox record of %s: found=%v, %v; want it deleted", ev.Detail.EventID, found, err)
		}
	}
}

// An event whose publish failed is not lost: the sweep publishes it later.
func TestEventPublishFailureIsDeliveredBySweep(t *testing.T) {
	t.Parallel()
	inj := faults.New(1, faults.Rule{Service: "EventBridge", Operation: "PutEvents", Kind: faults.ServerError, Rate: 1})
	inj.SetEnabled(false)
	reg := batchwork.NewRegistry()
	reg.Register("work", func(ctx context.Context, t *batchwork.Task) error { return nil })
	e := newEnv(t, reg, envOptions{noRun: true, faults: inj})
	url := eventQueue(t, e)
	clk, logs := newTestClock(), newLogCounter()
	svc := newService(e, testTimings, e.r.Store, e.r.Queue, clk, logs.logger())
	if svc.Events == nil {
		t.Fatal("the service has no event publisher")
	}

	inj.SetEnabled(true)
	id := submitTo(t, svc, "later", `{"name":"later","stages":[{"name":"s","task":"work","partitions":{"count":1}}]}`)
	if _, found, err := e.r.Store.OutboxEvent(context.Background(), events.SubmittedID(id)); err != nil || !found {
		t.Fatalf("outbox record after a failed publish: found=%v, %v; want it kept", found, err)
	}
	if c := mustSweep(t, svc); c.Events != 0 {
		t.Fatalf("a sweep within the grace published %d events", c.Events)
	}
	clk.Advance(dynamo.OutboxGrace + time.Second)
	if _, err := svc.Sweep(context.Background()); err == nil {
		t.Fatal("a sweep with the bus failing reported no error")
	}
	if evs := readEvents(t, e, url, time.Second, func([]delivered) bool { return false }); len(evs) != 0 {
		t.Fatalf("%d events delivered while every put failed", len(evs))
	}

	inj.SetEnabled(false)
	// A refused event waits a minute before the sweep tries it again, so
	// that refused events never crowd the sweep index's shards.
	clk.Advance(time.Minute)
	// As the sweep function: its role's events:PutEvents on the bus and
	// DeleteItem of the outbox record (iam_test.go).
	if c, err := svc.Sweep(iamrec.WithFunction(context.Background(), iamrec.FnSweep)); err != nil || c.Events != 1 {
		t.Fatalf("sweep: %+v, %v; want 1 event published", c, err)
	}
	evs := readEvents(t, e, url, 10*time.Second, func(evs []delivered) bool { return len(evs) >= 1 })
	evs = append(evs, readEvents(t, e, url, time.Second, func([]delivered) bool { return false })...)
	if got := summary(evs, id); !slices.Equal(got, []string{"Batchwork Job Submitted RUNNING counts=1/0/0/0"}) {
		t.Errorf("events %v, want the submission once", got)
	}
	if _, found, err := e.r.Store.OutboxEvent(context.Background(), events.SubmittedID(id)); err != nil || found {
		t.Errorf("outbox record after the sweep published it: found=%v, %v", found, err)
	}
	if c := mustSweep(t, svc); c.Events != 0 {
		t.Errorf("a later sweep published %d events again", c.Events)
	}
}
