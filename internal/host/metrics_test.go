package host

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/batchwork/batchwork/internal/metrics"
	"github.com/batchwork/batchwork/shared/control"
	"github.com/batchwork/batchwork/shared/domain"
	"github.com/batchwork/batchwork/shared/spec"
)

// The executor host records the ready-to-claimed latency under the
// stage's priority, and still calls the hook it wraps.
func TestClaimLatency(t *testing.T) {
	var buf bytes.Buffer
	rec := metrics.New(&buf, "s")
	called := 0
	hook := claimLatency(rec, func(control.Claim, time.Time) { called++ })
	c := control.Claim{Spec: &spec.Job{Priority: spec.PriorityHigh, Stages: []spec.Stage{{Name: "a"}}},
		Task: domain.Task{Ref: domain.TaskRef{Job: "j1", Stage: 0, Partition: 3}}}
	hook(c, time.Now().Add(-2*time.Second))
	hook(c, time.Time{}) // unknown: not recorded
	if err := rec.Flush(); err != nil {
		t.Fatal(err)
	}
	if called != 2 {
		t.Errorf("wrapped hook called %d times, want 2", called)
	}
	var d map[string]any
	if err := json.Unmarshal(buf.Bytes(), &d); err != nil {
		t.Fatalf("%q: %v", buf.String(), err)
	}
	vs, _ := d[metrics.ReadyToClaimed].([]any)
	if d[metrics.DimPriority] != "high" || len(vs) != 1 || vs[0].(float64) < 2000 || vs[0].(float64) > 60000 {
		t.Errorf("document %v: want one high-priority latency of about 2000 ms", d)
	}
	if strings.Contains(buf.String(), "j1") {
		t.Errorf("the job id reached the metrics: %s", buf.String())
	}
	if claimLatency(nil, nil) != nil {
		t.Error("without a recorder the hook is not left unset")
	}
}

// A Lambda invocation's metrics are written when it returns.
func TestFlushAfterInvocation(t *testing.T) {
	var buf bytes.Buffer
	rec := metrics.New(&buf, "s")
	h := flushAfter(rec, func(context.Context, events.SQSEvent) (events.SQSEventResponse, error) {
		rec.TaskClaimed(spec.PriorityNormal)
		return events.SQSEventResponse{}, nil
	})
	if _, err := h(context.Background(), events.SQSEvent{}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(buf.String(), `"TasksClaimed":1`) {
		t.Errorf("after the invocation: %q", buf.String())
	}
	stop := runMetrics(rec)
	rec.TaskClaimed(spec.PriorityLow)
	stop()
	if !strings.Contains(buf.String(), `"Priority":"low"`) {
		t.Errorf("after stopping the host's flusher: %q", buf.String())
	}
}
