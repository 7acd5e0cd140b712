package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/batchwork/batchwork/examples/diamond"
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

// The handler built from the environment maps every ready queue's name to
// its URL, runs the registered example functions from an SQS event against
// the deployed resources, and reports only the message it must keep.
func TestHandlerRunsTasksFromSQSEvents(t *testing.T) {
	w, res := wired(t)
	h := handler(w)
	ctx := context.Background()
	for _, url := range []string{res.Queues.High, res.Queues.Normal, res.Queues.Low} {
		if name := url[strings.LastIndex(url, "/")+1:]; h.QueueURLs[name] != url {
			t.Errorf("queue %s maps to %q, want %s", name, h.QueueURLs[name], url)
		}
	}
	sub, err := w.Service.Submit(ctx, control.SubmitRequest{Owner: "tester", IdempotencyKey: "k", Spec: diamond.Spec("fn", 1)})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Queue.SendBatch(ctx, res.Queues.Normal, []queue.Send{{Body: "not a task id"}}); err != nil {
		t.Fatal(err)
	}
	var msgs []queue.Message
	for deadline := time.Now().Add(10 * time.Second); len(msgs) < 2 && time.Now().Before(deadline); {
		got, err := w.Queue.Receive(ctx, res.Queues.Normal, 10, time.Second, 30*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		msgs = append(msgs, got...)
	}
	if len(msgs) != 2 {
		t.Fatalf("received %d messages, want stage a's task and the stray", len(msgs))
	}
	name := res.Queues.Normal[strings.LastIndex(res.Queues.Normal, "/")+1:]
	var ev events.SQSEvent
	var stray string
	for _, m := range msgs {
		if m.Body == "not a task id" {
			stray = m.ID
		}
		ev.Records = append(ev.Records, events.SQSMessage{
			MessageId: m.ID, ReceiptHandle: m.Receipt, Body: m.Body, EventSource: "aws:sqs",
			EventSourceARN: "arn:aws:sqs:" + os.Getenv("AWS_REGION") + ":123456789012:" + name,
			Attributes:     map[string]string{"SentTimestamp": strconv.FormatInt(m.SentAt.UnixMilli(), 10)},
		})
	}
	resp, err := h.Handle(ctx, ev)
	if err != nil {
		t.Fatalf("handler returned a top-level error: %v", err)
	}
	var failed []string
	for _, f := range resp.BatchItemFailures {
		failed = append(failed, f.ItemIdentifier)
	}
	if !slices.Equal(failed, []string{stray}) {
		t.Fatalf("batch item failures %v, want only the stray message %s", failed, stray)
	}
	st, err := w.Service.Status(ctx, "tester", sub.JobID)
	if err != nil {
		t.Fatal(err)
	}
	if st.Stages[0].Committed != 1 || st.Stages[0].State != "COMPLETED" {
		t.Fatalf("stage a after the event: %+v, want its task committed and the stage COMPLETED", st.Stages[0])
	}
}
