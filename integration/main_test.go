// Package integration runs Batchwork against a real AWS API emulator (moto
// server by default; see internal/emulator). Every test creates its own
// table, queues and bucket, so tests run in parallel.
package integration

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/batchwork/batchwork/internal/emulator"
	"github.com/batchwork/batchwork/internal/emulator/localstack"
	"github.com/batchwork/batchwork/internal/faults"
	"github.com/batchwork/batchwork/internal/testtier"
	"github.com/batchwork/batchwork/shared/batchwork"
	"github.com/batchwork/batchwork/shared/control"
	"github.com/batchwork/batchwork/shared/lineage"
	"github.com/batchwork/batchwork/shared/runner"
	sm "github.com/batchwork/batchwork/statemachine"
)

var emu *emulator.Emulator

func TestMain(m *testing.M) {
	if testtier.Short() {
		os.Exit(testtier.RunNone(m, "the AWS emulator"))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	var err error
	emu, err = emulator.StartWith(ctx, emulator.Options{Localstack: localstack.Start})
	cancel()
	if err != nil {
		// Never skip: an integration run without an emulator is a failure.
		fmt.Fprintln(os.Stderr, "integration: cannot start the AWS emulator:", err)
		os.Exit(1)
	}
	code := m.Run()
	// After every test: the roles against what the code did (iam_test.go).
	if !iamMain(os.Stdout, testing.Verbose(), code == 0) {
		code = 1
	}
	// Every object write against the bucket policy (writeonce_test.go).
	if !writeOnceMain(os.Stdout, testing.Verbose(), code == 0) {
		code = 1
	}
	_ = emu.Stop()
	os.Exit(code)
}

// testSweepEvery is how often an env's runner sweeps. A run reads a small
// due index with one Scan, a large one with a Query per shard besides (64,
// about 1.5 ms of DynamoDB Local's CPU each): when every run walked the
// shards, a sweep every half second kept most of a core busy per idle
// env, and one every 2 s still a twentieth.
const testSweepEvery = 2 * time.Second

// env is one test's Batchwork installation on the emulator.
type env struct {
	t   *testing.T
	r   *runner.Runner
	reg *batchwork.Registry
	cfg aws.Config
	// cliVars are environment variables of the test's own for cliRun
	// (BATCHWORK_TRACE_URL), beside the endpoint, owner and token.
	cliVars map[string]string
}

type envOptions struct {
	slots int
	// transport wraps the AWS HTTP transport (fault injection).
	transport func(http.RoundTripper) http.RoundTripper
	noRun     bool // do not start executors and the sweep
	// controlOnly runs the runner without executors (API, sweep, timers).
	controlOnly bool
	// faults, when set, injects AWS faults into every request of the env
	// (its runner, executors and sweep, and services built over it).
	faults *faults.Injector
	// control replaces the test timings below.
	control *control.Config
	// inputBuckets are buckets besides the data bucket that specs may
	// read inputs from (control.Config.InputBuckets); the IAM check counts
	// reads of them as reads of the inputs area (see noteIAMInputBucket).
	inputBuckets []string
	// execDir is the executor's programs directory for exec stages.
	execDir string
	// logFile, when set, receives the runner's JSON log lines, which
	// GET /jobs/{id}/logs reads (runner.Options.LogFile).
	logFile string
	// lineage, when set, is where the runner sends OpenLineage run events
	// (runner.Options.Lineage); unset: none, whatever the environment says.
	lineage *lineage.Config
	// install, when set, adds middleware of the test's to the env's AWS
	// configuration (a request recorder).
	install func(*aws.Config)
}

var nonName = regexp.MustCompile(`[^a-z0-9]+`)

func newEnv(t *testing.T, reg *batchwork.Registry, o envOptions) *env {
	t.Helper()
	cfg := emu.AWSConfig()
	iamRec.Install(&cfg)
	writeRec.Install(&cfg)
	if o.transport != nil {
		cfg.HTTPClient = &http.Client{Transport: o.transport(http.DefaultTransport.(*http.Transport).Clone())}
	}
	if o.install != nil {
		o.install(&cfg)
	}
	if o.faults != nil {
		o.faults.Install(&cfg)
		t.Cleanup(func() { t.Logf("faults injected:\n%s", o.faults) })
	}
	var b [3]byte
	_, _ = rand.Read(b[:])
	name := nonName.ReplaceAllString(strings.ToLower(t.Name()), "-")
	prefix := fmt.Sprintf("bw-%.30s-%s", strings.Trim(name, "-"), hex.EncodeToString(b[:]))
	log := slog.New(slog.NewJSONHandler(io.Discard, nil))
	if testing.Verbose() {
		log = slog.New(slog.NewJSONHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	}
	if o.logFile != "" {
		f, err := os.OpenFile(o.logFile, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { f.Close() })
		log = slog.New(slog.NewJSONHandler(f, nil))
	}
	cc := control.Config{StartGrace: time.Second, CheckEvery: time.Second, StuckAfter: 5 * time.Second}
	if o.control != nil {
		cc = *o.control
	}
	cc.InputBuckets = append(cc.InputBuckets, o.inputBuckets...)
	for _, b := range o.inputBuckets {
		noteIAMInputBucket(b)
	}
	ctx, cancel := context.WithCancel(context.Background())
	// runner.New waits for the data-plane stack: one the emulator never
	// finishes fails this test here, naming it, rather than the whole run
	// at its timeout.
	stuck := time.AfterFunc(2*time.Minute, cancel)
	r, err := runner.New(ctx, runner.Options{
		AWS: cfg, Prefix: prefix, Slots: max(o.slots, 4), ControlOnly: o.controlOnly, Registry: reg, Log: log,
		SweepEvery: testSweepEvery, PollWait: 2 * time.Second,
		Control: cc, ExecDir: o.execDir, LogFile: o.logFile, Lineage: cmp.Or(o.lineage, &lineage.Config{}),
	})
	if !stuck.Stop() {
		err = errors.Join(err, fmt.Errorf("runner %s: not up within 2 minutes", prefix))
	}
	if err != nil {
		cancel()
		t.Fatalf("runner: %v", err)
	}
	noteIAMResources(r.Resources)
	done := make(chan struct{})
	if o.noRun {
		go func() { defer close(done); r.ServeAPI(ctx) }()
	} else {
		go func() { defer close(done); _ = r.Run(ctx) }()
	}
	t.Cleanup(func() { cancel(); <-done })
	return &env{t: t, r: r, reg: reg, cfg: cfg}
}

// waitJob polls the job's status until it ends or the deadline passes.
func (e *env) waitJob(id string, within time.Duration) control.JobStatus {
	e.t.Helper()
	deadline := time.Now().Add(within)
	for {
		st, err := e.r.Service.Status(context.Background(), "tester", id)
		if err != nil {
			e.t.Fatalf("status %s: %v", id, err)
		}
		if st.State != string(sm.JobRunning) && st.State != string(sm.JobPublishing) {
			return st
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("job %s still RUNNING after %s: %+v", id, within, st)
		}
		time.Sleep(50 * time.Millisecond) // polling an external system, not synchronising goroutines
	}
}

func (e *env) submit(key string, specBody []byte) string {
	e.t.Helper()
	res, err := e.r.Service.Submit(context.Background(), control.SubmitRequest{Owner: "tester", IdempotencyKey: key, Spec: specBody})
	if err != nil {
		e.t.Fatalf("submit: %v", err)
	}
	return res.JobID
}
