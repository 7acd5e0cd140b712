package executor

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/batchwork/batchwork/shared/spec"
)

// Finished messages are deleted only once their tasks' batched counts are
// written: when the counts fail, the messages stay (they come back, and
// the refused claims they make count the tasks).
func TestDeleterKeepsMessagesWhoseCountsFailed(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name        string
		countsOK    bool
		n           int // messages handed to the deleter
		wantDeleted int
	}{
		{"counts written, a full batch", true, 10, 10},
		{"counts written, a partial batch at close", true, 3, 3},
		{"counts failed, a full batch", false, 10, 0},
		{"counts failed, a partial batch at close", false, 3, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			q := newMemQueue()
			flushes := 0
			d := newDeleter(q, discard(), func() bool { flushes++; return tc.countsOK })
			for i := range tc.n {
				d.add("q", string(rune('a'+i)))
			}
			d.close()
			_, deleted := q.state()
			if len(deleted) != tc.wantDeleted {
				t.Fatalf("deleted %v, want %d messages", deleted, tc.wantDeleted)
			}
			if flushes == 0 {
				t.Fatal("the counts were not flushed before the deletes")
			}
			if tc.countsOK && !slices.Contains(deleted, "a") {
				t.Fatalf("deleted %v, want message a among them", deleted)
			}
		})
	}
}

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
			h := &LambdaHandler{
				Runner:    &Runner{CP: cp, Blob: &memBlob{}, Registry: reg, Log: discard(), HeartbeatEvery: time.Hour},
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
