package integration

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/batchwork/batchwork/examples/wordcount"
	"github.com/batchwork/batchwork/internal/executor"
	"github.com/batchwork/batchwork/internal/executor/output"
	"github.com/batchwork/batchwork/internal/iamrec"
	"github.com/batchwork/batchwork/shared/awsconf"
	"github.com/batchwork/batchwork/shared/batchwork"
	"github.com/batchwork/batchwork/shared/blob"
	"github.com/batchwork/batchwork/shared/control"
	"github.com/batchwork/batchwork/shared/domain"
	"github.com/batchwork/batchwork/shared/principal"
	sm "github.com/batchwork/batchwork/statemachine"
)

// workAs is work (util_test.go) with the executor's requests attributed
// to function fn for the IAM check.
func workAs(t *testing.T, e *env, r *executor.Runner, fn string) []handled {
	t.Helper()
	return workIn(t, iamrec.WithFunction(context.Background(), fn), e, r)
}

// s3Client is a plain client of the emulator, for the test's own looks.
func s3Client() *s3.Client {
	cfg := emu.AWSConfig()
	return s3.NewFromConfig(cfg, awsconf.S3Options(cfg))
}

// bigLines is n bytes of numbered 100-byte lines.
func bigLines(n int) []byte {
	var b bytes.Buffer
	for i := 0; b.Len()+100 <= n; i++ {
		fmt.Fprintf(&b, "%08d %s\n", i, strings.Repeat("x", 90))
	}
	return b.Bytes()
}

// A task writes 20 MiB in 64 KiB writes: the partition streams to S3 in
// 8 MiB parts (a multipart upload completed with If-None-Match before the
// commit), the attempt never holds more than one part in memory, and the
// object is exactly what was written. A task that fails after streaming
// aborts its upload: no object and no upload are left.
func TestStreamedOutputToS3(t *testing.T) {
	t.Parallel()
	e := newEnv(t, batchwork.NewRegistry(), envOptions{noRun: true})
	body := bigLines(20 << 20)
	var mu sync.Mutex
	var peak int64
	var parts int
	reg := executor.NewRegistry()
	reg.Register("big", func(ctx context.Context, t *executor.Task) error {
		for b := body; len(b) > 0; {
			n := min(len(b), 64<<10)
			if _, err := t.Out.Write(b[:n]); err != nil {
				return err
			}
			b = b[n:]
		}
		mu.Lock()
		defer mu.Unlock()
		peak = t.Out.BufferedPeak()
		parts = t.Out.UploadedParts() // before the last part, uploaded at publish
		return nil
	})
	reg.Register("fails", func(ctx context.Context, t *executor.Task) error {
		if _, err := t.Out.Write(body[:10<<20]); err != nil {
			return err
		}
		return errors.New("fails after streaming a part")
	})
	svc := e.r.Service
	r := &executor.Runner{CP: svc, Blob: e.r.Blob, Registry: reg, Log: newLogCounter().logger(), HeartbeatEvery: time.Hour}
	ok := submitTo(t, svc, "big", `{"name":"big","stages":[{"name":"s","task":"big","partitions":{"count":1}}]}`)
	failed := submitTo(t, svc, "fails", `{"name":"fails","retry":{"maxAttempts":1},"stages":[{"name":"s","task":"fails","partitions":{"count":1}}]}`)
	workAs(t, e, r, iamrec.FnExecutor)

	if st := jobState(t, svc, ok); st.State != string(sm.JobSucceeded) {
		t.Fatalf("job %s (%s), want SUCCEEDED", st.State, st.Error)
	}
	key := blob.OutputKey(ok, "s", 0, 1, 0)
	cli, ctx := s3Client(), context.Background()
	head, err := cli.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String(e.r.Resources.Bucket), Key: aws.String(key)})
	if err != nil {
		t.Fatal(err)
	}
	// A multipart object's ETag ends with its part count.
	if etag := aws.ToString(head.ETag); !strings.HasSuffix(etag, `-3"`) {
		t.Errorf("object ETag %s, want one of 3 parts (8 MiB, 8 MiB and the rest)", etag)
	}
	got, err := e.r.Blob.Get(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	if sha256.Sum256(got) != sha256.Sum256(body) {
		t.Errorf("object holds %d bytes that differ from the %d written", len(got), len(body))
	}
	mu.Lock()
	if peak > output.DefaultPartSize || parts != 2 {
		t.Errorf("peak buffered %d bytes with %d parts uploaded while running; want at most one part (%d) and 2 parts", peak, parts, output.DefaultPartSize)
	}
	mu.Unlock()
	if m := readManifest(t, e, jobState(t, svc, ok).Manifest); len(m.Outputs) != 1 || m.Outputs[0].Key != key {
		t.Errorf("manifest lists %+v, want the streamed object", m.Outputs)
	}

	if st := jobState(t, svc, failed); st.State != string(sm.JobFailed) || !strings.Contains(st.Error, "fails after streaming a part") {
		t.Fatalf("job %s (%s), want FAILED with the task's error", st.State, st.Error)
	}
	ups, err := cli.ListMultipartUploads(ctx, &s3.ListMultipartUploadsInput{Bucket: aws.String(e.r.Resources.Bucket), Prefix: aws.String(blob.JobPrefix(failed))})
	if err != nil {
		t.Fatal(err)
	}
	if len(ups.Uploads) != 0 {
		t.Errorf("%d uploads left open by the failed attempt, want it aborted", len(ups.Uploads))
	}
	if _, err := e.r.Blob.Get(ctx, blob.OutputKey(failed, "s", 0, 1, 0)); !errors.Is(err, domain.ErrNotFound) {
		t.Errorf("failed attempt's object: %v, want none", err)
	}
}

// publishSpy records the control plane's publishing writes in the order
// they succeed, and fails the first failCopies copies as a network error
// would.
type publishSpy struct {
	*blob.Store
	mu         sync.Mutex
	writes     []string // keys written, in order
	failCopies int
	// onCopy, when set, runs once before the first copy.
	onCopy func()
}

func (p *publishSpy) PutIfAbsentIn(ctx context.Context, bucket, key string, body []byte) error {
	err := p.Store.PutIfAbsentIn(ctx, bucket, key, body)
	if err == nil {
		p.mu.Lock()
		p.writes = append(p.writes, key)
		p.mu.Unlock()
	}
	return err
}

func (p *publishSpy) CopyIfAbsent(ctx context.Context, src, bucket, dst string) error {
	p.mu.Lock()
	if f := p.onCopy; f != nil {
		p.onCopy = nil
		p.mu.Unlock()
		f()
		p.mu.Lock()
	}
	if p.failCopies > 0 {
		p.failCopies--
		p.mu.Unlock()
		return errors.New("injected: connection reset")
	}
	p.mu.Unlock()
	err := p.Store.CopyIfAbsent(ctx, src, bucket, dst)
	if err == nil {
		p.mu.Lock()
		p.writes = append(p.writes, dst)
		p.mu.Unlock()
	}
	return err
}

func (p *publishSpy) written() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.writes)
}

// withOutput sets a JSON spec's output folder.
func withOutput(t *testing.T, spec []byte, output string) []byte {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(spec, &m); err != nil {
		t.Fatal(err)
	}
	m["output"] = output
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// listKeys lists every key under prefix of the data bucket.
func listKeys(t *testing.T, e *env, prefix string) []string {
	t.Helper()
	objs, err := e.r.Blob.List(context.Background(), e.r.Resources.Bucket, prefix)
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, o := range objs {
		keys = append(keys, o.Key)
	}
	return keys
}

// Word count with an output folder: when the job succeeds, its outputs
// are in the folder under their final names, each equal to the committed
// output the job's manifest lists, after the folder's claim and before
// _SUCCESS, which is written last. A second job naming the same folder
// fails with an error naming the folder and the first job, and changes
// nothing in it. A third job reads the published folder as its input and
// sees exactly the published outputs (not the claim or _SUCCESS).
func TestPublishedOutputs(t *testing.T) {
	t.Parallel()
	reg := batchwork.NewRegistry()
	wordcount.Register(reg)
	reg.Register("copy", func(ctx context.Context, t *batchwork.Task) error {
		_, err := io.Copy(t.Out, t.Input)
		return err
	})
	e := newEnv(t, reg, envOptions{noRun: true})
	spy := &publishSpy{Store: e.r.Blob}
	cfg := testTimings
	cfg.Queues = e.r.Resources.Queues
	svc := control.New(cfg, e.r.Store, e.r.Queue, spy, newLogCounter().logger())
	r := &executor.Runner{CP: svc, Blob: e.r.Blob, Registry: executor.PublicRegistry(reg), Log: newLogCounter().logger(), HeartbeatEvery: time.Hour}

	corpus := wordcount.Corpus(5, 40_000)
	e.putInput("tester", "pub/a.txt", corpus[:20_001])
	e.putInput("tester", "pub/b.txt", corpus[20_001:])
	const reducers = 3
	wc := withOutput(t, wordcount.Spec("wc", "inputs:pub/", 8_000, reducers), "outputs:wc/run-1/")
	first := submitTo(t, svc, "wc-1", string(wc))
	workAs(t, e, r, iamrec.FnExecutor)
	st := jobState(t, svc, first)
	if st.State != string(sm.JobSucceeded) {
		t.Fatalf("job %s (%s), want SUCCEEDED", st.State, st.Error)
	}
	folder := blob.OutputsPrefix(principal.Key("tester")) + "wc/run-1/"
	m := readManifest(t, e, st.Manifest)
	if len(m.Outputs) != reducers {
		t.Fatalf("manifest lists %d outputs, want %d", len(m.Outputs), reducers)
	}
	want := []string{folder + blob.ClaimName}
	var published bytes.Buffer
	for _, o := range m.Outputs {
		final := blob.PublishedKey(folder, o.Stage, o.Partition, o.Part)
		want = append(want, final)
		src, err := e.r.Blob.Get(context.Background(), o.Key)
		if err != nil {
			t.Fatal(err)
		}
		got, err := e.r.Blob.Get(context.Background(), final)
		if err != nil {
			t.Fatalf("published output: %v", err)
		}
		if !bytes.Equal(got, src) {
			t.Errorf("%s holds %q, want the committed %s: %q", final, got, o.Key, src)
		}
		published.Write(got)
	}
	want = append(want, folder+blob.SuccessName)
	if got := spy.written(); !slices.Equal(got[:1], want[:1]) || got[len(got)-1] != want[len(want)-1] || !sameSet(got, want) {
		t.Errorf("publishing wrote %v, want the claim first, then %d outputs, then _SUCCESS: %v", got, reducers, want)
	}
	if got := listKeys(t, e, folder); !sameSet(got, want) {
		t.Errorf("folder holds %v, want %v", got, want)
	}
	var claim control.OutputClaim
	raw, _ := e.r.Blob.Get(context.Background(), folder+blob.ClaimName)
	if err := json.Unmarshal(raw, &claim); err != nil || claim.Job != first {
		t.Errorf("claim %s (%v), want it to name job %s", raw, err, first)
	}

	// A second job to the same folder is refused at submit, clearly, and
	// changes nothing (publishing's own refusal, for a job submitted
	// before the claim, is TestNestedOutputFolderIsRefused's).
	before := spy.written()
	_, err := svc.Submit(context.Background(), control.SubmitRequest{Owner: "tester", IdempotencyKey: "wc-2", Spec: wc})
	wantErr := fmt.Sprintf("output folder s3://%s/%s already holds the outputs of job %s", e.r.Resources.Bucket, folder, first)
	var oc *control.OutputClaimedError
	if !errors.As(err, &oc) || !strings.Contains(err.Error(), wantErr) {
		t.Fatalf("second job: %v, want refused with %q", err, wantErr)
	}
	if got := spy.written(); len(got) != len(before) {
		t.Errorf("the second job wrote %v into the folder", got[len(before):])
	}

	// A job reading the published folder (through the api, which plans
	// it) sees the published outputs and nothing else.
	third := e.submitAs("tester", "read", []byte(fmt.Sprintf(
		`{"name":"read","stages":[{"name":"s","task":"copy","partitions":{"input":{"prefix":"s3://%s/%s"}}}]}`, e.r.Resources.Bucket, folder)))
	workAs(t, e, r, iamrec.FnExecutor)
	st3 := jobState(t, svc, third)
	if st3.State != string(sm.JobSucceeded) {
		t.Fatalf("reading job %s (%s), want SUCCEEDED", st3.State, st3.Error)
	}
	var read bytes.Buffer
	m3 := readManifest(t, e, st3.Manifest)
	sort.Slice(m3.Outputs, func(i, j int) bool { return m3.Outputs[i].Partition < m3.Outputs[j].Partition })
	for _, o := range m3.Outputs {
		b, err := e.r.Blob.Get(context.Background(), o.Key)
		if err != nil {
			t.Fatal(err)
		}
		read.Write(b)
	}
	if !bytes.Equal(read.Bytes(), published.Bytes()) {
		t.Errorf("the reading job read %d bytes, want the %d published (markers skipped)", read.Len(), published.Len())
	}
}

func sameSet(a, b []string) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	sort.Strings(a)
	sort.Strings(b)
	return slices.Equal(a, b)
}

// The paths by which the other functions publish, attributed to them for
// the IAM check: the commit function ends a job whose second stage reads
// a published folder and finds its own claim from an earlier try; the
// sweep finishes a publish its committer left half done, copying only the
// rest.
func TestPublishPathsOfEachFunction(t *testing.T) {
	t.Parallel()
	bg := context.Background()
	t.Run("commit", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t, batchwork.NewRegistry(), envOptions{noRun: true})
		svc := e.r.Service
		src := blob.OutputsPrefix(principal.Key("tester")) + "earlier/"
		if err := e.r.Blob.PutIfAbsent(bg, src+"s/part-00000", []byte("one\ntwo\n")); err != nil {
			t.Fatal(err)
		}
		id := submitTo(t, svc, "commit", fmt.Sprintf(`{"name":"c","output":"outputs:c/","stages":[{"name":"a","task":"work","partitions":{"count":1}},
		  {"name":"b","task":"work","after":["a"],"partitions":{"input":{"prefix":"s3://%s/%s"}}}]}`, e.r.Resources.Bucket, src))
		// An earlier try of this job's publishing claimed the folder.
		folder := blob.OutputsPrefix(principal.Key("tester")) + "c/"
		claim, _ := json.Marshal(control.OutputClaim{Job: id})
		if err := e.r.Blob.PutIfAbsentIn(bg, e.r.Resources.Bucket, folder+blob.ClaimName, claim); err != nil {
			t.Fatal(err)
		}
		ctx := iamrec.WithFunction(bg, iamrec.FnCommit)
		for stage := range 2 {
			ref := domain.TaskRef{Job: id, Stage: stage, Partition: 0}
			c, err := svc.RemoteClaim(bg, control.RemoteClaimRequest{Task: ref.String()})
			if err != nil {
				t.Fatalf("claim %s: %v", ref, err)
			}
			if err := e.r.Blob.PutIfAbsent(bg, blob.OutputKey(id, []string{"a", "b"}[stage], 0, c.Attempt, 0), []byte("out\n")); err != nil {
				t.Fatal(err)
			}
			if err := remoteCommit(ctx, svc, control.RemoteCommitRequest{Claim: c, Outputs: 1}); err != nil {
				t.Fatalf("commit %s: %v", ref, err)
			}
		}
		if js := jobState(t, svc, id); js.State != string(sm.JobSucceeded) {
			t.Fatalf("job %s (%s), want SUCCEEDED", js.State, js.Error)
		}
		for _, k := range []string{folder + "b/part-00000", folder + blob.SuccessName} {
			if _, err := e.r.Blob.Get(bg, k); err != nil {
				t.Errorf("%s: %v", k, err)
			}
		}
	})
	t.Run("sweep", func(t *testing.T) {
		t.Parallel()
		reg := batchwork.NewRegistry()
		reg.Register("work", func(ctx context.Context, t *batchwork.Task) error {
			_, err := fmt.Fprintf(t.Out, "partition %d\n", t.Partition)
			return err
		})
		e := newEnv(t, reg, envOptions{noRun: true})
		spy := &publishSpy{Store: e.r.Blob, failCopies: 1}
		cfg := testTimings
		cfg.Queues = e.r.Resources.Queues
		svc := control.New(cfg, e.r.Store, e.r.Queue, spy, newLogCounter().logger())
		r := &executor.Runner{CP: svc, Blob: e.r.Blob, Registry: executor.PublicRegistry(reg), Log: newLogCounter().logger(), HeartbeatEvery: time.Hour}
		id := submitTo(t, svc, "sweep", `{"name":"s","output":"outputs:s/","stages":[{"name":"s","task":"work","partitions":{"count":3}}]}`)
		workAs(t, e, r, iamrec.FnExecutor) // the last commit's publish fails a copy
		if js := jobState(t, svc, id); js.State != string(sm.JobPublishing) {
			t.Fatalf("job %s after a failed copy, want PUBLISHING until the sweep finishes publishing", js.State)
		}
		copied := len(spy.written()) - 1 // less the claim
		ctx := iamrec.WithFunction(bg, iamrec.FnSweep)
		waitFor(t, 30*time.Second, "the sweep to finish publishing", func() bool {
			if _, err := svc.Sweep(ctx); err != nil {
				t.Logf("sweep: %v", err)
			}
			return jobState(t, svc, id).State != string(sm.JobPublishing)
		})
		if js := jobState(t, svc, id); js.State != string(sm.JobSucceeded) {
			t.Fatalf("job %s (%s), want SUCCEEDED", js.State, js.Error)
		}
		folder := blob.OutputsPrefix(principal.Key("tester")) + "s/"
		w := spy.written()
		if n := len(w) - 1 - copied - 1; n != 3-copied { // less the claim and _SUCCESS
			t.Errorf("the sweep copied %d outputs after the first try's %d, want the %d missing: %v", n, copied, 3-copied, w)
		}
		if w[len(w)-1] != folder+blob.SuccessName {
			t.Errorf("last write %s, want _SUCCESS", w[len(w)-1])
		}
		for p := range 3 {
			got, err := e.r.Blob.Get(bg, blob.PublishedKey(folder, "s", p, 0))
			if want := fmt.Sprintf("partition %d\n", p); err != nil || string(got) != want {
				t.Errorf("published partition %d: %q, %v; want %q", p, got, err, want)
			}
		}
	})
}

// A cancel that races a job's publishing, through the real store: the job
// moved RUNNING -> PUBLISHING before its first copy, so the cancel (and
// the deadline) cannot end it; the cancel answers 409 "publishing its
// outputs", and the job ends SUCCEEDED with its folder whole. A folder
// with _SUCCESS always belongs to a SUCCEEDED job.
func TestCancelRacingPublishIsRefused(t *testing.T) {
	t.Parallel()
	reg := batchwork.NewRegistry()
	reg.Register("work", func(ctx context.Context, t *batchwork.Task) error {
		_, err := fmt.Fprintf(t.Out, "partition %d\n", t.Partition)
		return err
	})
	e := newEnv(t, reg, envOptions{noRun: true})
	spy := &publishSpy{Store: e.r.Blob}
	cfg := testTimings
	cfg.Queues = e.r.Resources.Queues
	svc := control.New(cfg, e.r.Store, e.r.Queue, spy, newLogCounter().logger())
	r := &executor.Runner{CP: svc, Blob: e.r.Blob, Registry: executor.PublicRegistry(reg), Log: newLogCounter().logger(), HeartbeatEvery: time.Hour}
	id := submitTo(t, svc, "race", `{"name":"race","output":"outputs:race/","stages":[{"name":"s","task":"work","partitions":{"count":3}}]}`)
	var during control.JobStatus
	var cancelErr, apiErr error
	var apiStatus int
	var apiBody string
	spy.mu.Lock()
	spy.onCopy = func() {
		during = jobState(t, svc, id)
		_, cancelErr = svc.Cancel(context.Background(), "tester", id)
		resp := e.call("tester", "POST", "/jobs/"+id+"/cancel", nil)
		apiStatus, apiBody = resp.Status, string(resp.Body)
		if err := e.r.Store.JobEnd(context.Background(), id, sm.JobCancel, "cancelled", "", time.Now()); !errors.Is(err, sm.ErrInvalidTransition) {
			apiErr = fmt.Errorf("store cancel of a PUBLISHING job: %v, want refused", err)
		}
		if err := e.r.Store.JobEnd(context.Background(), id, sm.JobFail, control.DeadlineReason, "", time.Now()); !errors.Is(err, sm.ErrInvalidTransition) {
			apiErr = errors.Join(apiErr, fmt.Errorf("store deadline fail of a PUBLISHING job: %v, want refused", err))
		}
	}
	spy.mu.Unlock()
	workAs(t, e, r, iamrec.FnExecutor)
	if during.State != string(sm.JobPublishing) {
		t.Errorf("job %s while its outputs were copied, want PUBLISHING", during.State)
	}
	var ended *control.JobEndedError
	if !errors.As(cancelErr, &ended) || ended.State != sm.JobPublishing || !strings.Contains(cancelErr.Error(), "publishing its outputs") {
		t.Errorf("Cancel during publishing: %v, want a JobEndedError saying it is publishing its outputs", cancelErr)
	}
	if apiStatus != 409 || !strings.Contains(apiBody, "job_publishing") {
		t.Errorf("POST cancel during publishing: %d %s, want 409 job_publishing", apiStatus, apiBody)
	}
	if apiErr != nil {
		t.Error(apiErr)
	}
	js := jobState(t, svc, id)
	folder := blob.OutputsPrefix(principal.Key("tester")) + "race/"
	_, err := e.r.Blob.Get(context.Background(), folder+blob.SuccessName)
	if js.State != string(sm.JobSucceeded) || err != nil {
		t.Fatalf("job %s (%s), _SUCCESS %v: want SUCCEEDED with its folder's _SUCCESS written", js.State, js.Error, err)
	}
}

// A folder whose publishing has not finished (a claim, some outputs, no
// _SUCCESS) is not read as a complete input: planning it, through the
// api, fails the job with an error naming the folder. Once its _SUCCESS
// is there it reads.
func TestIncompletePublishedFolderIsRefusedAsInput(t *testing.T) {
	t.Parallel()
	reg := batchwork.NewRegistry()
	reg.Register("copy", func(ctx context.Context, t *batchwork.Task) error {
		_, err := io.Copy(t.Out, t.Input)
		return err
	})
	e := newEnv(t, reg, envOptions{noRun: true})
	cfg := testTimings
	cfg.Queues = e.r.Resources.Queues
	svc := control.New(cfg, e.r.Store, e.r.Queue, e.r.Blob, newLogCounter().logger())
	bg := context.Background()
	folder := blob.OutputsPrefix(principal.Key("tester")) + "partial/"
	for k, v := range map[string]string{folder + blob.ClaimName: `{"job":"jA"}`, folder + "s/part-00000": "a\n"} {
		if err := e.r.Blob.PutIfAbsent(bg, k, []byte(v)); err != nil {
			t.Fatal(err)
		}
	}
	read := func(key string) control.JobStatus {
		id := e.submitAs("tester", key, []byte(fmt.Sprintf(
			`{"name":"read","stages":[{"name":"s","task":"copy","partitions":{"input":{"prefix":"s3://%s/%s"}}}]}`, e.r.Resources.Bucket, folder)))
		ctx := iamrec.WithFunction(bg, iamrec.FnSweep)
		var js control.JobStatus
		waitFor(t, 30*time.Second, "the read job to be planned", func() bool {
			js = jobState(t, svc, id)
			if js.State == string(sm.JobRunning) && (len(js.Stages) == 0 || js.Stages[0].Total == 0) {
				if _, err := svc.Sweep(ctx); err != nil {
					t.Logf("sweep: %v", err)
				}
				return false
			}
			return true
		})
		return js
	}
	js := read("partial")
	if js.State != string(sm.JobFailed) || !strings.Contains(js.Error, folder) || !strings.Contains(js.Error, "publishing has not finished") {
		t.Fatalf("job reading a partly published folder: %s (%s), want FAILED naming %s", js.State, js.Error, folder)
	}
	if err := e.r.Blob.PutIfAbsent(bg, folder+blob.SuccessName, []byte(`{}`)); err != nil {
		t.Fatal(err)
	}
	if js := read("whole"); js.State == string(sm.JobFailed) {
		t.Fatalf("job reading a published folder: %s (%s), want it planned", js.State, js.Error)
	}
}
