package integration

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/batchwork/batchwork/internal/loadmodel"
	"github.com/batchwork/batchwork/shared/batchwork"
	"github.com/batchwork/batchwork/shared/control"
	"github.com/batchwork/batchwork/shared/dynamo"
)

// A no-op task's message is hidden by its receive and deleted after its
// commit: no ChangeMessageVisibility at its claim (the receive visibility
// is the held one, and renewals pass over messages hidden past the next),
// so a job of short tasks makes almost none (a renewal only of a message
// whose task ran past half a second from its receipt, as under a loaded
// machine). Each claimed message once cost a hide, shared by the
// messages claimed within 100 ms: 0.1 to 1 request per task.
func TestShortTasksCostNoVisibilityChange(t *testing.T) {
	t.Parallel()
	var rec loadmodel.Recorder
	reg := batchwork.NewRegistry()
	reg.Register("noop", func(ctx context.Context, tk *batchwork.Task) error { return nil })
	e := newEnv(t, reg, envOptions{install: rec.Install})
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
	t.Logf("%d visibility changes, %d receives, %d delete batches for %d tasks", vis,
		snap.Ops["SQS.ReceiveMessage"].Requests, snap.Ops["SQS.DeleteMessageBatch"].Requests, tasks)
	if vis > tasks/20 {
		t.Fatalf("%d visibility changes for %d no-op tasks; want at most %d (0.05 a task)", vis, tasks, tasks/20)
	}
}
