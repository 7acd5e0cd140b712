package executor

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/batchwork/batchwork/internal/executor/feed"
	"github.com/batchwork/batchwork/shared/spec"
)

// flushingCP is a control plane that batches counts; its flush fails when
// told to.
type flushingCP struct {
	*fakeCP
	fail    bool
	flushes int
}

func (f *flushingCP) FlushCounts(context.Context) error {
	f.flushes++
	if f.fail {
		return errors.New("ProvisionedThroughputExceededException")
	}
	return nil
}

// A Lambda batch's messages are deleted by the event source when the
// invocation returns: its counts are flushed first, and when they fail,
// every message of the batch is reported back, kept for its claim to count.
func TestLambdaFlushesCountsBeforeItsMessagesGo(t *testing.T) {
	t.Parallel()
	for _, fail := range []bool{false, true} {
		t.Run(fmt.Sprintf("flush fails %v", fail), func(t *testing.T) {
			t.Parallel()
			reg := NewRegistry()
			reg.Register("work", func(context.Context, *Task) error { return nil })
			cp := &flushingCP{fakeCP: &fakeCP{spec: &spec.Job{Stages: []spec.Stage{{Name: "s", Task: "work"}}}, lease: time.Minute}, fail: fail}
			h := &feed.LambdaHandler{
				Handler:   &Runner{CP: cp, Blob: &memBlob{}, Registry: reg, Log: discard(), HeartbeatEvery: time.Hour},
				CP:        cp,
				Log:       discard(),
				Queue:     newMemQueue(),
				QueueURLs: map[string]string{"ready": "https://sqs/ready"},
			}
			resp, err := h.Handle(context.Background(), lambdaEvent([]lambdaMsg{{"ja/0/0", 1}, {"ja/0/1", 1}}))
			if err != nil {
				t.Fatal(err)
			}
			if _, commits, _ := cp.snapshot(); len(commits) != 2 || cp.flushes != 1 {
				t.Fatalf("%d commits, %d flushes; want 2 and 1", len(commits), cp.flushes)
			}
			want := 0
			if fail {
				want = 2
			}
			if len(resp.BatchItemFailures) != want {
				t.Fatalf("batch item failures %v, want %d", resp.BatchItemFailures, want)
			}
		})
	}
}
