package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/batchwork/batchwork/integration/emulator"
	"github.com/batchwork/batchwork/shared/awsconf"
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

// The handler built from the environment serves API Gateway requests
// against the deployed resources, with the IAM principal as the owner.
func TestHandlerServesAPIGatewayRequests(t *testing.T) {
	w, _ := wired(t)
	h := handler(w)
	ctx := context.Background()
	req := func(method, path, principal, body string, headers map[string]string) events.APIGatewayV2HTTPResponse {
		t.Helper()
		ev := events.APIGatewayV2HTTPRequest{RawPath: path, Body: body, Headers: headers}
		ev.RequestContext.HTTP.Method = method
		if principal != "" {
			ev.RequestContext.Authorizer = &events.APIGatewayV2HTTPRequestContextAuthorizerDescription{
				IAM: &events.APIGatewayV2HTTPRequestContextAuthorizerIAMDescription{UserARN: principal},
			}
		}
		resp, err := h(ctx, ev)
		if err != nil {
			t.Fatalf("%s %s: %v", method, path, err)
		}
		return resp
	}
	const alice, bob = "arn:aws:iam::123456789012:user/alice", "arn:aws:iam::123456789012:user/bob"
	spec := `{"name":"fn","stages":[{"name":"s","task":"diamond.step","partitions":{"count":2}}]}`

	resp := req(http.MethodPost, "/jobs", alice, spec, map[string]string{"Idempotency-Key": "k1"})
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("submit: %d %s, want 201", resp.StatusCode, resp.Body)
	}
	var sub struct {
		JobID string `json:"jobId"`
	}
	if err := json.Unmarshal([]byte(resp.Body), &sub); err != nil || sub.JobID == "" {
		t.Fatalf("submit response %q: %v", resp.Body, err)
	}

	resp = req(http.MethodGet, "/jobs/"+sub.JobID, alice, "", nil)
	var st struct {
		State  string `json:"state"`
		Stages []struct {
			Total int `json:"total"`
		} `json:"stages"`
	}
	if resp.StatusCode != http.StatusOK || json.Unmarshal([]byte(resp.Body), &st) != nil || st.State != "RUNNING" || len(st.Stages) != 1 || st.Stages[0].Total != 2 {
		t.Fatalf("status as the owner: %d %s, want 200, RUNNING with 2 tasks", resp.StatusCode, resp.Body)
	}
	// Another principal does not see the job, whatever owner header it sends.
	resp = req(http.MethodGet, "/jobs/"+sub.JobID, bob, "", map[string]string{"X-Batchwork-Owner": alice})
	if resp.StatusCode != http.StatusNotFound {
		t.Errorf("status as another principal: %d %s, want 404", resp.StatusCode, resp.Body)
	}
	resp = req(http.MethodGet, "/jobs/"+sub.JobID, "", "", map[string]string{"X-Batchwork-Owner": alice})
	if resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("status without a principal: %d %s, want 401", resp.StatusCode, resp.Body)
	}
}
