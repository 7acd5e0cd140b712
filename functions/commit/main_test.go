package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/batchwork/batchwork/integration/emulator"
	"github.com/batchwork/batchwork/shared/awsconf"
	"github.com/batchwork/batchwork/shared/batch"
	"github.com/batchwork/batchwork/shared/blob"
	"github.com/batchwork/batchwork/shared/control"
	"github.com/batchwork/batchwork/shared/lambdaenv"
	"github.com/batchwork/batchwork/shared/provision"
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

// The handler built from the environment commits a remote executor's
// attempt against the deployed table and bucket: a wrong token is fenced,
// the holder's commit succeeds and completes the one-task job.
func TestHandlerCommitsRemoteAttempts(t *testing.T) {
	w, _ := wired(t)
	h := handler(w)
	ctx := context.Background()
	sub, err := w.Service.Submit(ctx, control.SubmitRequest{Owner: "tester", IdempotencyKey: "k",
		Spec: []byte(`{"name":"fn","stages":[{"name":"s","task":"x","partitions":{"count":1}}]}`)})
	if err != nil {
		t.Fatal(err)
	}
	c, err := w.Service.RemoteClaim(ctx, control.RemoteClaimRequest{Task: sub.JobID + "/0/0"})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Blob.PutIfAbsent(ctx, blob.OutputKey(sub.JobID, "s", 0, c.Attempt, 0), []byte("out\n")); err != nil {
		t.Fatal(err)
	}
	stale := c
	stale.Token = "0123456789abcdef0123456789abcdef"
	if err := h(ctx, control.RemoteCommitRequest{Claim: stale, Outputs: 1}); !errors.Is(err, batch.ErrStaleClaim) {
		t.Fatalf("commit with a wrong token: %v, want ErrStaleClaim", err)
	}
	if err := h(ctx, control.RemoteCommitRequest{Claim: c, Outputs: 1}); err != nil {
		t.Fatalf("commit: %v", err)
	}
	st, err := w.Service.Status(ctx, "tester", sub.JobID)
	if err != nil {
		t.Fatal(err)
	}
	if st.State != "SUCCEEDED" {
		t.Fatalf("job %s after its one task committed, want SUCCEEDED", st.State)
	}
}
