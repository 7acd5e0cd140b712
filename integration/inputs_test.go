package integration

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/batchwork/batchwork/cmd/batchwork/cli"
	"github.com/batchwork/batchwork/examples/wordcount"
	"github.com/batchwork/batchwork/shared/awsconf"
	"github.com/batchwork/batchwork/shared/batchwork"
	"github.com/batchwork/batchwork/shared/blob"
	"github.com/batchwork/batchwork/shared/control"
	"github.com/batchwork/batchwork/shared/principal"
	sm "github.com/batchwork/batchwork/statemachine"
)

// inputsURI is owner's inputs area in the env's data bucket.
func (e *env) inputsURI(owner string) string {
	return "s3://" + e.r.Resources.Bucket + "/" + blob.InputsPrefix(principal.Key(owner))
}

// putInput uploads body as name in owner's inputs area, as the owner
// would, and returns its s3:// URI.
func (e *env) putInput(owner, name string, body []byte) string {
	e.t.Helper()
	key := blob.InputsPrefix(principal.Key(owner)) + name
	if err := e.r.Blob.PutIfAbsent(context.Background(), key, body); err != nil {
		e.t.Fatal(err)
	}
	return "s3://" + e.r.Resources.Bucket + "/" + key
}

// inputBucket creates a bucket of its own with objects (key -> body) in
// it, as an operator's bucket of shared data, and returns its name.
func inputBucket(t *testing.T, objects map[string]string) string {
	t.Helper()
	cfg := emu.AWSConfig()
	cli := s3.NewFromConfig(cfg, awsconf.S3Options(cfg))
	var b [4]byte
	_, _ = rand.Read(b[:])
	name := "bw-inputs-" + hex.EncodeToString(b[:])
	ctx := context.Background()
	if _, err := cli.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String(name)}); err != nil {
		t.Fatal(err)
	}
	for k, v := range objects {
		if _, err := cli.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(name), Key: aws.String(k), Body: strings.NewReader(v)}); err != nil {
			t.Fatal(err)
		}
	}
	return name
}

// jobWordCounts reads a succeeded word-count job's counts.
func jobWordCounts(t *testing.T, e *env, st control.JobStatus) map[string]int {
	t.Helper()
	if st.State != string(sm.JobSucceeded) {
		t.Fatalf("job %s %s (%s), want SUCCEEDED", st.ID, st.State, st.Error)
	}
	got := map[string]int{}
	for _, o := range readManifest(t, e, st.Manifest).Outputs {
		addWordCounts(t, e, got, o.Key)
	}
	return got
}

// No owner can read another owner's data through an input prefix: the
// installation's job area (every job's attempts) is refused, even a
// prefix within one of the submitter's own jobs, whose area holds failed
// and fenced attempts' outputs next to the committed ones; a job's
// outputs are read from the folder it published them to (its "output"),
// which only its owner may read.
func TestInputPrefixCannotReachOtherOwnersJobs(t *testing.T) {
	t.Parallel()
	reg := batchwork.NewRegistry()
	wordcount.Register(reg)
	e := newEnv(t, reg, envOptions{})
	bucket := e.r.Resources.Bucket
	in := e.putInput("alice", "a.txt", []byte("secret words of alice\n"))
	alices := e.submitAs("alice", "wc", withOutput(t, wordcount.Spec("wc", in, 1<<20, 1), "outputs:wc/"))
	published := blob.OutputsPrefix(principal.Key("alice")) + "wc/"
	if st := e.waitJobAs("alice", alices, time.Minute); st.State != string(sm.JobSucceeded) {
		t.Fatalf("alice's job %s (%s)", st.State, st.Error)
	}
	const field = "stages[0].partitions.input.prefix"
	for _, tc := range []struct {
		name, owner, prefix string
		ok                  bool
	}{
		{"the whole job area", "bob", "jobs/", false},
		{"the whole bucket", "bob", "", false},
		{"another owner's job", "bob", "jobs/" + alices + "/", false},
		{"another owner's outputs", "bob", "jobs/" + alices + "/out/", false},
		{"part of a job id", "bob", "jobs/" + alices[:4], false},
		{"a job that does not exist", "bob", "jobs/j00000000000000000000/", false},
		{"one's own job's area", "alice", "jobs/" + alices + "/out/", false},
		{"another owner's published folder", "bob", published, false},
		{"one's own published folder", "alice", published, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			body := wordcount.Spec("steal", fmt.Sprintf("s3://%s/%s", bucket, tc.prefix), 1<<20, 1)
			resp := e.call(tc.owner, http.MethodPost, "/jobs", body, "Idempotency-Key", "k-"+tc.name)
			switch {
			case tc.ok && resp.Status != http.StatusCreated:
				t.Fatalf("%s: %d %s, want 201", tc.prefix, resp.Status, resp.Body)
			case !tc.ok && (resp.Status != http.StatusBadRequest || resp.apiErr(t).Field != field):
				t.Fatalf("%s: %d %s, want 400 on %s", tc.prefix, resp.Status, resp.Body, field)
			}
		})
	}
}

// Inputs come from the submitter's own inputs area (named in full or as
// inputs:<path>, recorded resolved), the submitter's own outputs area (its
// published folders), or a bucket the operator allows: another owner's inputs area, any other prefix of
// the data bucket and any other bucket are refused at submit (jobs and
// schedules alike) with a 400 on the prefix's field, and nothing is
// written. GET /whoami tells each caller its inputs area.
func TestInputsAreOwnerScoped(t *testing.T) {
	t.Parallel()
	allowed := inputBucket(t, map[string]string{"data/shared.txt": "shared words for everyone\n"})
	other := inputBucket(t, map[string]string{"data/private.txt": "words of another account\n"})
	reg := batchwork.NewRegistry()
	wordcount.Register(reg)
	e := newEnv(t, reg, envOptions{inputBuckets: []string{allowed}})
	bucket := e.r.Resources.Bucket
	e.putInput("alice", "corpus/a.txt", []byte("secret words of alice\n"))
	if err := e.r.Blob.PutIfAbsent(context.Background(), "uploads/x.txt", []byte("words outside every area\n")); err != nil {
		t.Fatal(err)
	}

	for _, owner := range []string{"alice", "bob"} {
		var id control.Identity
		e.callJSON(owner, http.MethodGet, "/whoami", nil, http.StatusOK, &id)
		if id.Owner != owner || id.OwnerKey != principal.Key(owner) || id.Inputs != e.inputsURI(owner) ||
			strings.Join(id.InputBuckets, ",") != allowed || id.Endpoint == "" {
			t.Errorf("whoami as %s: %+v, want inputs %s, input buckets [%s] and the emulator's endpoint", owner, id, e.inputsURI(owner), allowed)
		}
	}

	const field = "stages[0].partitions.input.prefix"
	refused := []struct{ name, prefix, msg string }{
		{"another owner's inputs area", e.inputsURI("alice") + "corpus/", "outside your inputs area"},
		{"every owner's inputs", "s3://" + bucket + "/inputs/", "outside your inputs area"},
		{"another prefix of the data bucket", "s3://" + bucket + "/uploads/", "outside your inputs area"},
		{"a bucket not allowed", "s3://" + other + "/data/", fmt.Sprintf("bucket %q is not one this installation reads inputs from", other)},
	}
	for _, tc := range refused {
		t.Run(tc.name, func(t *testing.T) {
			key := "k-" + strings.ReplaceAll(tc.name, " ", "-")
			resp := e.call("bob", http.MethodPost, "/jobs", wordcount.Spec("steal", tc.prefix, 1<<20, 1), "Idempotency-Key", key)
			if ae := resp.apiErr(t); resp.Status != http.StatusBadRequest || ae.Field != field || !strings.Contains(ae.Message, tc.msg) {
				t.Fatalf("submit: %d %s, want 400 on %s saying %q", resp.Status, resp.Body, field, tc.msg)
			}
			sched := fmt.Sprintf(`{"name":"steal","expression":"@hourly","spec":%s}`, wordcount.Spec("steal", tc.prefix, 1<<20, 1))
			resp = e.call("bob", http.MethodPost, "/schedules", []byte(sched), "Content-Type", "application/json")
			if ae := resp.apiErr(t); resp.Status != http.StatusBadRequest || !strings.HasSuffix(ae.Field, field) {
				t.Fatalf("create schedule: %d %s, want 400 on %s", resp.Status, resp.Body, field)
			}
			// Nothing was written: bob has no such job and no schedule, and
			// the idempotency key is still free.
			var jobs control.JobList
			e.callJSON("bob", http.MethodGet, "/jobs?name=steal", nil, http.StatusOK, &jobs)
			var scheds control.ScheduleList
			e.callJSON("bob", http.MethodGet, "/schedules", nil, http.StatusOK, &scheds)
			if len(jobs.Jobs) != 0 || len(scheds.Schedules) != 0 {
				t.Fatalf("bob has %d such jobs and %d schedules after refusals, want none", len(jobs.Jobs), len(scheds.Schedules))
			}
			valid := []byte(`{"name":"ok","stages":[{"name":"s","task":"wordcount.map","partitions":{"count":1}}]}`)
			var res control.SubmitResult
			e.callJSON("bob", http.MethodPost, "/jobs", valid, http.StatusCreated, &res, "Idempotency-Key", key) // 201: the key was unused
			var cancelled control.JobStatus
			e.callJSON("bob", http.MethodPost, "/jobs/"+res.JobID+"/cancel", nil, http.StatusOK, &cancelled)
		})
	}

	t.Run("one's own inputs by shorthand", func(t *testing.T) {
		id := e.submitAs("alice", "own", wordcount.Spec("own", "inputs:corpus/", 1<<20, 1))
		j, err := e.r.Store.JobGet(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		if got, want := j.Spec.Stages[0].Partitions.Input.Prefix, e.inputsURI("alice")+"corpus/"; got != want {
			t.Fatalf("recorded prefix %q, want %q", got, want)
		}
		got := jobWordCounts(t, e, e.waitJobAs("alice", id, time.Minute))
		if want := map[string]int{"secret": 1, "words": 1, "of": 1, "alice": 1}; fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("counts %v, want %v", got, want)
		}
	})
	t.Run("a bucket the operator allows", func(t *testing.T) {
		id := e.submitAs("bob", "shared", wordcount.Spec("shared", "s3://"+allowed+"/data/", 1<<20, 1))
		got := jobWordCounts(t, e, e.waitJobAs("bob", id, time.Minute))
		if want := map[string]int{"shared": 1, "words": 1, "for": 1, "everyone": 1}; fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("counts %v, want %v", got, want)
		}
	})
}

// The CLI tells a user where their inputs go, uploads a directory or a
// file there with the user's own credentials (through the local runner's
// emulator), and a spec naming inputs:<path> reads it.
func TestCLIUploadsIntoTheCallersInputsArea(t *testing.T) {
	t.Parallel()
	reg := batchwork.NewRegistry()
	wordcount.Register(reg)
	e := newEnv(t, reg, envOptions{})
	ctx := context.Background()
	dir := t.TempDir()
	corpus := filepath.Join(dir, "corpus")
	for name, body := range map[string]string{"a.txt": "one two\n", "sub/b.txt": "two three\n"} {
		p := filepath.Join(corpus, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	run := func(args ...string) string {
		t.Helper()
		var out, errOut syncBuffer
		if code := e.cliRun(ctx, "carol", &out, &errOut, args...); code != cli.ExitOK {
			t.Fatalf("batchwork %s: exit %d: %s", strings.Join(args, " "), code, errOut.String())
		}
		return out.String()
	}

	var id control.Identity
	if err := json.Unmarshal([]byte(run("whoami", "-o", "json")), &id); err != nil || id.Inputs != e.inputsURI("carol") {
		t.Fatalf("whoami: %+v, %v; want inputs %s", id, err, e.inputsURI("carol"))
	}
	if out := run("whoami"); !strings.Contains(out, e.inputsURI("carol")) || !strings.Contains(out, "inputs:<path>") {
		t.Fatalf("whoami:\n%s", out)
	}
	if out := run("upload", corpus, "wc/"); !strings.Contains(out, "2 files") || !strings.Contains(out, "inputs:wc/") {
		t.Fatalf("upload of a directory:\n%s", out)
	}
	if out := run("upload", filepath.Join(corpus, "a.txt"), "single/one.txt"); !strings.Contains(out, "inputs:single/one.txt") {
		t.Fatalf("upload of a file:\n%s", out)
	}
	area := blob.InputsPrefix(principal.Key("carol"))
	for key, want := range map[string]string{area + "wc/a.txt": "one two\n", area + "wc/sub/b.txt": "two three\n", area + "single/one.txt": "one two\n"} {
		if got, err := e.r.Blob.Get(ctx, key); err != nil || string(got) != want {
			t.Errorf("%s: %q, %v; want %q", key, got, err, want)
		}
	}
	specFile := filepath.Join(dir, "wc.json")
	if err := os.WriteFile(specFile, wordcount.Spec("wc", "inputs:wc/", 1<<20, 1), 0o644); err != nil {
		t.Fatal(err)
	}
	var sub control.SubmitResult
	if err := json.Unmarshal([]byte(run("submit", specFile, "-o", "json")), &sub); err != nil {
		t.Fatal(err)
	}
	st := e.waitJobAs("carol", sub.JobID, time.Minute)
	if got, want := jobWordCounts(t, e, st), map[string]int{"one": 1, "two": 2, "three": 1}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("counts %v, want %v", got, want)
	}
}
