package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/batchwork/batchwork/integration/emulator"
	"github.com/batchwork/batchwork/shared/awsconf"
	"github.com/batchwork/batchwork/shared/control"
	"github.com/batchwork/batchwork/shared/lambdaenv"
	"github.com/batchwork/batchwork/shared/provision"
	"github.com/batchwork/batchwork/shared/queue"
)

// The boilerplate below (TestMain, the missing-variable test, wired) is the
// same in every functions/*/main_test.go: each main is its own package.

const asMain = "BATCHWORK_TEST_AS_MAIN"

// TestMain runs main itself when the test binary is started as the
// function (TestMissingEnvironment does that), and the tests otherwise.
func TestMain(m *testing.M) {
	if os.Getenv(asMain) == "1" {
		main()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

var required = []string{"BATCHWORK_TABLE", "BATCHWORK_BUCKET", "BATCHWORK_QUEUE_HIGH", "BATCHWORK_QUEUE_NORMAL", "BATCHWORK_QUEUE_LOW", "BATCHWORK_DLQ"}

// Without its configuration the function exits at once with status 1,
// naming every missing variable and no other.
func TestMissingEnvironment(t *testing.T) {
	cases := []struct {
		name    string
		set     []string
		missing []string
	}{
		{"none set", nil, required},
		{"dead-letter queue missing", required[:5], required[5:]},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cmd := exec.Command(os.Args[0], "-test.run=^$")
			cmd.Env = []string{asMain + "=1", "PATH=" + os.Getenv("PATH")}
			for _, k := range tc.set {
				cmd.Env = append(cmd.Env, k+"=x")
			}
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			err := cmd.Run()
			var exit *exec.ExitError
			if !errors.As(err, &exit) || exit.ExitCode() != 1 {
				t.Fatalf("main exited with %v, want status 1; stderr: %s", err, stderr.String())
			}
			msg := stderr.String()
			if !strings.Contains(msg, "missing environment variables") {
				t.Fatalf("stderr %q does not say what is missing", msg)
			}
			for _, k := range required {
				if want := !contains(tc.set, k); strings.Contains(msg, k) != want {
					t.Errorf("stderr %q: naming %s is %v, want %v", msg, k, !want, want)
				}
			}
		})
	}
}

func contains(xs []string, x string) bool {
	for _, v := range xs {
		if v == x {
			return true
		}
	}
	return false
}

// wired starts an emulator, deploys a Batchwork data plane on it, sets the
// environment the stack gives the function, and wires the function from
// that environment as main does (minus the exit on error).
func wired(t *testing.T) (lambdaenv.Wired, provision.Resources) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	emu, err := emulator.Start(ctx)
	if err != nil {
		t.Fatalf("start the emulator: %v", err)
	}
	t.Cleanup(func() { _ = emu.Stop() })
	cfg := emu.AWSConfig()
	var b [3]byte
	_, _ = rand.Read(b[:])
	res, err := provision.Create(ctx, cfg, awsconf.S3Options(cfg), "bw-fn-"+hex.EncodeToString(b[:]), provision.DefaultSettings)
	if err != nil {
		t.Fatalf("deploy: %v", err)
	}
	for k, v := range map[string]string{
		"AWS_ENDPOINT_URL": emu.URL, "AWS_REGION": emu.Region,
		"BATCHWORK_TABLE": res.Table, "BATCHWORK_BUCKET": res.Bucket, "BATCHWORK_DLQ": res.Queues.DLQ,
		"BATCHWORK_QUEUE_HIGH": res.Queues.High, "BATCHWORK_QUEUE_NORMAL": res.Queues.Normal, "BATCHWORK_QUEUE_LOW": res.Queues.Low,
		lambdaenv.EnvQueueTimer: res.Queues.Timer,
	} {
		t.Setenv(k, v)
	}
	c, err := lambdaenv.FromEnv()
	if err != nil {
		t.Fatal(err)
	}
	w, err := lambdaenv.Wire(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	return w, res
}

// The handler built from the environment sweeps the deployed table and
// dead-letter queue: a dead letter naming no live task is dropped.
func TestHandlerSweepsTheDeployment(t *testing.T) {
	w, res := wired(t)
	h := handler(w)
	ctx := context.Background()
	if err := w.Queue.SendBatch(ctx, res.Queues.DLQ, []queue.Send{{Body: "j0123456789abcdef012345/0/0"}}); err != nil {
		t.Fatal(err)
	}
	// EventBridge's scheduled event, as the rule delivers it.
	out, err := h(ctx, json.RawMessage(`{"version":"0","source":"aws.events","detail-type":"Scheduled Event","detail":{}}`))
	c, _ := out.(control.SweepCounts)
	if err != nil {
		t.Fatalf("sweep: %v (counts %+v)", err, c)
	}
	if c.DeadLettered != 1 {
		t.Fatalf("sweep counts %+v, want the one dead letter handled", c)
	}
	left, err := w.Queue.Receive(ctx, res.Queues.DLQ, 10, time.Second, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if len(left) != 0 {
		t.Fatalf("dead-letter queue still holds %v", left)
	}
}

// An SQS event is a batch of timer messages: a firing of a schedule that
// no longer exists is dropped and a body that is no timer message is
// dropped too (neither can ever succeed), so no item is reported failed;
// neither runs a sweep.
func TestHandlerConsumesTimerMessages(t *testing.T) {
	w, _ := wired(t)
	h := handler(w)
	ev := events.SQSEvent{Records: []events.SQSMessage{
		{MessageId: "gone", EventSource: "aws:sqs", Body: `{"owner":"o","firing":"s0123456789abcdef01234@2020-01-01T00:00:00Z","bucket":"2020-01-01T00:00Z#03"}`},
		{MessageId: "junk", EventSource: "aws:sqs", Body: "j0123456789abcdef012345/0/0"},
	}}
	raw, err := json.Marshal(ev)
	if err != nil {
		t.Fatal(err)
	}
	out, err := h(context.Background(), raw)
	if err != nil {
		t.Fatal(err)
	}
	resp, ok := out.(events.SQSEventResponse)
	if !ok {
		t.Fatalf("handler returned %T %+v, want an SQS batch response", out, out)
	}
	if len(resp.BatchItemFailures) != 0 {
		t.Fatalf("batch item failures %+v, want none", resp.BatchItemFailures)
	}
}
