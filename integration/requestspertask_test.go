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
// is the held one, and renewals pass over messages hidden past the next),
// so the messages of a job of short tasks are hardly ever hidden again
// (only one whose claim came, or task ran, past a quarter second from
// its receipt: the 2 s receive visibility less the renewals' 1.75 s
// slack, as on a loaded machine). Each claimed message once had a hide of its
// own (batched with others claimed within 100 ms): every message, once.
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
	inj.Add(faults.Rule{Service: "SQS", Operation: "ChangeMessageVisibility*", Kind: faults.Throttle, Match: func(op string, in any) bool {
		n := 1
		if b, ok := in.(*sqs.ChangeMessageVisibilityBatchInput); ok {
			n = len(b.Entries)
		}
		mu.Lock()
		changed += n
		mu.Unlock()
		return false
	}})
	e := newEnv(t, reg, envOptions{install: rec.Install, faults: inj})
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
	t.Logf("%d visibility requests changing %d messages, %d receives, %d delete batches for %d tasks", vis, changed,
		snap.Ops["SQS.ReceiveMessage"].Requests, snap.Ops["SQS.DeleteMessageBatch"].Requests, tasks)
	if changed > tasks/2 {
		t.Fatalf("visibility changed %d times for %d no-op tasks; want at most %d: a claim hides no message", changed, tasks, tasks/2)
	}
}
