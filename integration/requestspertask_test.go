package integration

import (
	"context"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/batchwork/batchwork/internal/faults"
	"github.com/batchwork/batchwork/internal/loadmodel"
	"github.com/batchwork/batchwork/shared/batchwork"
	"github.com/batchwork/batchwork/shared/control"
	"github.com/batchwork/batchwork/shared/dynamo"
)

// A no-op task's message is hidden by its receive and deleted after its
// commit: no ChangeMessageVisibility at its claim (the receive visibility
// is the held one, and renewals pass over messages hidden past the next).
// Deployed, the receive hides a message 2 s and renewals leave alone the
// messages claimed within the first quarter second of it, so a message
// claimed later (on a loaded machine, behind a busy slot) is hidden once
// more. That quarter second is a pace, not a rule, so the test's executor
// receives with a visibility no task here can outlive: every hide
// counted is one the claim or the commit made, so there must be none, on
// a machine of any speed. (That renewals pass over a message still well
// inside its receive's 2 s is feed's unit tests' to show.) (When each claimed message had a hide of its
// own, batched with others claimed within 100 ms, this job made 90 or
// more.)
func TestShortTasksCostNoVisibilityChange(t *testing.T) {
	t.Parallel()
	var rec loadmodel.Recorder
	reg := batchwork.NewRegistry()
	reg.Register("noop", func(ctx context.Context, tk *batchwork.Task) error { return nil })
	// The injector's rule injects nothing: it counts the messages whose
	// visibility each request changes.
	inj := faults.New(1)
	var mu sync.Mutex
	changed := 0
	// A change to 0 gives a message back (one received ahead that
	// waited a second for a slot, feed/ahead.go): not a hide, and a
	// matter of the machine's pace.
	inj.Add(faults.Rule{Service: "SQS", Operation: "ChangeMessageVisibility*", Kind: faults.Throttle, Match: func(op string, in any) bool {
		n := 0
		switch in := in.(type) {
		case *sqs.ChangeMessageVisibilityBatchInput:
			for _, e := range in.Entries {
				if e.VisibilityTimeout > 0 {
					n++
				}
			}
		case *sqs.ChangeMessageVisibilityInput:
			if in.VisibilityTimeout > 0 {
				n++
			}
		}
		mu.Lock()
		changed += n
		mu.Unlock()
		return false
	}})
	e := newEnv(t, reg, envOptions{install: rec.Install, faults: inj, controlOnly: true})
	p := e.r.Poller()
	p.Visibility = receiveVisibility
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = p.Run(ctx) }()
	t.Cleanup(func() { stop(); <-done })
	rec.Reset()
	const tasks = 200
	id := e.submit("vis-1", []byte(`{"name":"vis","stages":[{"name":"fan","task":"noop","partitions":{"count":200}}]}`))
	watcher := control.New(control.Config{Queues: e.r.Resources.Queues},
		dynamo.New(dynamodb.NewFromConfig(emu.AWSConfig()), e.r.Resources.Table), nil, nil, slog.New(slog.NewJSONHandler(io.Discard, nil)))
	var st control.JobStatus
	for deadline := time.Now().Add(2 * time.Minute); ; {
		var err error
		if st, err = watcher.Status(context.Background(), "tester", id); err != nil {
			t.Fatal(err)
		}
		if st.State != "RUNNING" || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond) // polling an external system, not synchronising goroutines
	}
	if st.State != "SUCCEEDED" {
		t.Fatalf("job %s: %s", st.State, st.Error)
	}
	snap := rec.Snapshot()
	vis := snap.Ops["SQS.ChangeMessageVisibilityBatch"].Requests + snap.Ops["SQS.ChangeMessageVisibility"].Requests
	mu.Lock()
	defer mu.Unlock()
	t.Logf("%d visibility requests hiding %d messages, %d receives, %d delete batches for %d tasks", vis, changed,
		snap.Ops["SQS.ReceiveMessage"].Requests, snap.Ops["SQS.DeleteMessageBatch"].Requests, tasks)
	if changed > 0 {
		t.Fatalf("%d messages hidden again for %d no-op tasks, none of which outlived its receive's visibility; want none: a claim hides no message", changed, tasks)
	}
}

// receiveVisibility is the short-tasks test's receive visibility: longer
// than its job can run (the test gives it two minutes), so no message
// nears its end while held.
const receiveVisibility = 3 * time.Minute
