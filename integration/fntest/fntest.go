// Package fntest is the shared harness of the functions/*/main_test.go
// files: each Lambda main is its own package, so the harness lives here
// rather than under functions/, where every directory is built as a Lambda.
package fntest

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/batchwork/batchwork/internal/emulator"
	"github.com/batchwork/batchwork/internal/emulator/localstack"
	"github.com/batchwork/batchwork/internal/testtier"
	"github.com/batchwork/batchwork/shared/awsconf"
	"github.com/batchwork/batchwork/shared/lambdaenv"
	"github.com/batchwork/batchwork/shared/provision"
)

const asMain = "BATCHWORK_TEST_AS_MAIN"

// Main runs main itself when the test binary is started as the function
// (MissingEnvironment does that), and the tests otherwise. Call it from
// TestMain.
func Main(m *testing.M, main func()) {
	if os.Getenv(asMain) == "1" {
		main()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// MissingEnvironment checks that, without its configuration, the function
// exits at once with status 1, naming every missing variable and no other.
func MissingEnvironment(t *testing.T) {
	required := lambdaenv.EnvNames
	cases := []struct {
		name    string
		set     []string
		missing []string
	}{
		{"none set", nil, required},
		{"one missing", required[:len(required)-1], required[len(required)-1:]},
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
				if want := slices.Contains(tc.missing, k); strings.Contains(msg, k) != want {
					t.Errorf("stderr %q: naming %s is %v, want %v", msg, k, !want, want)
				}
			}
		})
	}
}

// ListTasks checks that the executor main, run with BATCHWORK_LIST_TASKS=1
// and no other configuration, prints want (its registered task names,
// sorted) as a JSON array and exits 0: the construct runs it so at synth
// time.
func ListTasks(t *testing.T, want []string) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = []string{asMain + "=1", "BATCHWORK_LIST_TASKS=1", "PATH=" + os.Getenv("PATH")}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("main with BATCHWORK_LIST_TASKS=1: %v; stderr: %s", err, stderr.String())
	}
	var got []string
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("stdout %q is not a JSON array of names: %v", out, err)
	}
	if !slices.Equal(got, want) {
		t.Fatalf("listed tasks %q, want %q", got, want)
	}
}

// Wire starts an emulator, deploys a Batchwork data plane on it, sets the
// environment the stack gives the functions, and wires them from that
// environment as the mains do (minus the exit on error).
func Wire(t *testing.T) (lambdaenv.Wired, provision.Resources) {
	t.Helper()
	testtier.SkipUnderShort(t, "the AWS emulator")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	emu, err := emulator.StartWith(ctx, emulator.Options{Localstack: localstack.Start})
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
	// Both endpoint variables, as the emulator prints them: the table is on
	// DynamoURL (DynamoDB Local by default), the rest on URL.
	for k, v := range map[string]string{
		"AWS_ENDPOINT_URL": emu.URL, "AWS_ENDPOINT_URL_DYNAMODB": emu.DynamoURL, "AWS_REGION": emu.Region,
		lambdaenv.EnvTable: res.Table, lambdaenv.EnvBucket: res.Bucket, lambdaenv.EnvDLQ: res.Queues.DLQ,
		lambdaenv.EnvQueueHigh: res.Queues.High, lambdaenv.EnvQueueNormal: res.Queues.Normal, lambdaenv.EnvQueueLow: res.Queues.Low,
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
