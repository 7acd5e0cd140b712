package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/batchwork/batchwork/examples/diamond"
	"github.com/batchwork/batchwork/examples/wordcount"
	"github.com/batchwork/batchwork/shared/awsconf"
	"github.com/batchwork/batchwork/shared/batchwork"
	"github.com/batchwork/batchwork/shared/blob"
	"github.com/batchwork/batchwork/shared/control"
	"github.com/batchwork/batchwork/shared/domain"
	"github.com/batchwork/batchwork/shared/localauth"
	"github.com/batchwork/batchwork/shared/tuning"
	sm "github.com/batchwork/batchwork/statemachine"
)

func readManifest(t *testing.T, e *env, key string) domain.Manifest {
	t.Helper()
	raw, err := e.r.Blob.Get(context.Background(), key)
	if err != nil {
		t.Fatalf("read manifest: %v", err)
	}
	var m domain.Manifest
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatalf("decode manifest: %v", err)
	}
	return m
}

// referenceCounts counts words without any Batchwork code.
func referenceCounts(text string) map[string]int {
	counts := map[string]int{}
	for _, w := range regexp.MustCompile(`\p{L}+`).FindAllString(text, -1) {
		counts[strings.ToLower(w)]++
	}
	return counts
}

func TestWordCount(t *testing.T) {
	t.Parallel()
	reg := batchwork.NewRegistry()
	wordcount.Register(reg)
	e := newEnv(t, reg, envOptions{})
	corpus := wordcount.Corpus(7, 120_000)
	// Three files, cut mid-line, so splits cross file and line boundaries.
	cuts := []int{0, 40_001, 90_003, len(corpus)}
	for i := 0; i < 3; i++ {
		e.putInput("tester", fmt.Sprintf("input/part-%d.txt", i), corpus[cuts[i]:cuts[i+1]])
	}
	id := e.submit("wc-1", wordcount.Spec("wc", e.inputsURI("tester")+"input/", 8_000, 4))
	st := e.waitJob(id, 2*time.Minute)
	if st.State != string(sm.JobSucceeded) {
		t.Fatalf("job %s: %+v", st.State, st)
	}
	m := readManifest(t, e, st.Manifest)
	got := map[string]int{}
	for _, o := range m.Outputs {
		addWordCounts(t, e, got, o.Key)
	}
	// Pieces of one line may sit in two files; count each file on its own
	// as the job does (a file boundary ends a line).
	want := map[string]int{}
	for i := 0; i < 3; i++ {
		for w, n := range referenceCounts(string(corpus[cuts[i]:cuts[i+1]])) {
			want[w] += n
		}
	}
	if len(got) != len(want) {
		t.Errorf("distinct words: got %d, want %d", len(got), len(want))
	}
	for w, n := range want {
		if got[w] != n {
			t.Errorf("count of %q: got %d, want %d", w, got[w], n)
		}
	}
	if len(m.Outputs) != 4 {
		t.Errorf("manifest lists %d outputs, want 4 (one per reducer)", len(m.Outputs))
	}
}

// addWordCounts adds a word-count reduce output's "word\tcount" lines to
// got; a word already there was counted by another reducer too.
func addWordCounts(t *testing.T, e *env, got map[string]int, key string) {
	t.Helper()
	raw, err := e.r.Blob.Get(context.Background(), key)
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(strings.TrimSpace(string(raw)), "\n") {
		if line == "" {
			continue
		}
		w, n, _ := strings.Cut(line, "\t")
		if _, dup := got[w]; dup {
			t.Errorf("word %q in two reduce outputs", w)
		}
		got[w], _ = strconv.Atoi(n)
	}
}

func TestDiamondRunsInDependencyOrder(t *testing.T) {
	t.Parallel()
	reg := batchwork.NewRegistry()
	var e *env
	var mu sync.Mutex
	var violations []string
	ready := make(chan struct{})
	diamond.Register(reg, func(ctx context.Context, t *batchwork.Task) error {
		<-ready
		if t.Stage != "d" {
			return nil
		}
		// D runs only after both B and C have committed: read their state.
		stages, err := e.r.Store.StageList(ctx, t.Job)
		if err != nil {
			return err
		}
		for _, st := range stages {
			if (st.Name == "b" || st.Name == "c") && st.State != sm.StageCompleted {
				mu.Lock()
				violations = append(violations, fmt.Sprintf("d/%d ran while %s was %s", t.Partition, st.Name, st.State))
				mu.Unlock()
			}
		}
		return nil
	})
	e = newEnv(t, reg, envOptions{})
	close(ready)
	id := e.submit("diamond", diamond.Spec("diamond", 3))
	st := e.waitJob(id, time.Minute)
	if st.State != string(sm.JobSucceeded) {
		t.Fatalf("job %s: %+v", st.State, st)
	}
	if len(violations) > 0 {
		t.Fatalf("dependency order violated: %v", violations)
	}
	ends := map[string]time.Time{}
	for _, s := range st.Stages {
		if s.Committed != 3 || s.Total != 3 {
			t.Errorf("stage %s committed %d/%d, want 3/3", s.Name, s.Committed, s.Total)
		}
		ends[s.Name] = *s.Ended
		if s.Name == "d" && (s.Started.Before(ends["b"]) || s.Started.Before(ends["c"])) {
			t.Errorf("d started %s before b (%s) or c (%s) completed", s.Started, ends["b"], ends["c"])
		}
	}
	m := readManifest(t, e, st.Manifest)
	if len(m.Outputs) != 3 || m.Outputs[0].Stage != "d" {
		t.Errorf("manifest should list d's 3 outputs, got %+v", m.Outputs)
	}
}

func TestIdempotentSubmit(t *testing.T) {
	t.Parallel()
	reg := batchwork.NewRegistry()
	diamond.Register(reg, nil)
	e := newEnv(t, reg, envOptions{noRun: true})
	ctx := context.Background()
	body := diamond.Spec("idem", 1)
	req := control.SubmitRequest{Owner: "tester", IdempotencyKey: "req-42", Spec: body}
	first, err := e.r.Service.Submit(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	second, err := e.r.Service.Submit(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	if !first.Created || second.Created || first.JobID != second.JobID {
		t.Fatalf("same key gave %+v then %+v; want one job", first, second)
	}
	// The same key with another spec is a conflict, and writes nothing.
	req.Spec = diamond.Spec("other", 1)
	if _, err := e.r.Service.Submit(ctx, req); !errors.Is(err, domain.ErrIdempotencyConflict) {
		t.Fatalf("reused key with another spec: got %v, want ErrIdempotencyConflict", err)
	}
	// Exactly one job's root stage was materialized: one message queued.
	msgs, err := e.r.Queue.Receive(ctx, e.r.Resources.Queues.Normal, 10, time.Second, 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if len(msgs) != 1 || !strings.HasPrefix(msgs[0].Body, first.JobID+"/") {
		t.Fatalf("queued messages %+v; want one for job %s", msgs, first.JobID)
	}
}

// claimOne claims a task through the control plane, as an executor would.
func mustClaim(t *testing.T, svc *control.Service, ref domain.TaskRef) control.Claim {
	t.Helper()
	c, err := svc.Claim(context.Background(), ref)
	if err != nil {
		t.Fatalf("claim %s: %v", ref, err)
	}
	return c
}

func putOutput(t *testing.T, e *env, c control.Claim, body string) {
	t.Helper()
	r := c.Task.Ref
	if err := e.r.Blob.PutIfAbsent(context.Background(), blob.OutputKey(r.Job, c.StageName(), r.Partition, c.Task.Attempt, 0), []byte(body)); err != nil {
		t.Fatal(err)
	}
}

func TestDuplicateDeliveryCommitsOnce(t *testing.T) {
	t.Parallel()
	e := newEnv(t, batchwork.NewRegistry(), envOptions{noRun: true})
	ctx := context.Background()
	id := e.submit("dup", []byte(`{"name":"dup","stages":[{"name":"s","task":"x","partitions":{"count":1}}]}`))
	ref := domain.TaskRef{Job: id, Stage: 0, Partition: 0}
	c := mustClaim(t, e.r.Service, ref)
	// The second delivery of the same task is rejected with a typed outcome.
	_, err := e.r.Service.Claim(ctx, ref)
	var held *domain.ClaimHeldError
	if !errors.As(err, &held) {
		t.Fatalf("second claim: got %v, want ClaimHeldError", err)
	}
	putOutput(t, e, c, "out\n")
	if err := e.r.Service.Commit(ctx, c, control.CommitResult{Outputs: 1}); err != nil {
		t.Fatalf("commit: %v", err)
	}
	// A repeated commit (a retry) succeeds without counting twice.
	if err := e.r.Service.Commit(ctx, c, control.CommitResult{Outputs: 1}); err != nil {
		t.Fatalf("repeated commit: %v", err)
	}
	if _, err := e.r.Service.Claim(ctx, ref); !errors.Is(err, domain.ErrAlreadyDone) {
		t.Fatalf("claim after commit: got %v, want ErrAlreadyDone", err)
	}
	st, err := e.r.Store.StageGet(ctx, id, 0)
	if err != nil {
		t.Fatal(err)
	}
	p, err := e.r.Store.StageProgress(ctx, st)
	if err != nil {
		t.Fatal(err)
	}
	if p.Committed != 1 || p.Left != 0 {
		t.Fatalf("progress %+v: want exactly one commit", p)
	}
	js, err := e.r.Service.Status(ctx, "tester", id)
	if err != nil {
		t.Fatal(err)
	}
	if js.State != string(sm.JobSucceeded) {
		t.Fatalf("job %s, want SUCCEEDED", js.State)
	}
}

func TestCrashedExecutorIsFenced(t *testing.T) {
	t.Parallel()
	reg := batchwork.NewRegistry()
	reg.Register("work", func(ctx context.Context, t *batchwork.Task) error {
		_, err := fmt.Fprintf(t.Out, "attempt %d\n", t.Attempt)
		return err
	})
	e := newEnv(t, reg, envOptions{noRun: true})
	ctx := context.Background()
	id := e.submit("crash", []byte(`{"name":"crash","lease":"2s","stages":[{"name":"s","task":"work","partitions":{"count":1}}]}`))
	ref := domain.TaskRef{Job: id, Stage: 0, Partition: 0}
	// The first executor receives the message, claims, writes its output,
	// then dies: no heartbeat, no commit, its message hidden for the lease.
	msgs, err := e.r.Queue.Receive(ctx, e.r.Resources.Queues.Normal, 1, 2*time.Second, 2*time.Second)
	if err != nil || len(msgs) != 1 {
		t.Fatalf("receive: %v %v", msgs, err)
	}
	stale := mustClaim(t, e.r.Service, ref)
	putOutput(t, e, stale, "stale\n")
	// A second executor picks the message up when the lease runs out.
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); _ = e.r.Poller().Run(runCtx) }()
	t.Cleanup(func() { stop(); <-done })
	st := e.waitJob(id, time.Minute)
	if st.State != string(sm.JobSucceeded) {
		t.Fatalf("job %s: %+v", st.State, st)
	}
	// The dead executor's late commit is fenced.
	if err := e.r.Service.Commit(ctx, stale, control.CommitResult{Outputs: 1}); !errors.Is(err, domain.ErrStaleClaim) && !errors.Is(err, domain.ErrAlreadyDone) {
		t.Fatalf("late commit: got %v, want a stale claim", err)
	}
	task, err := e.r.Store.TaskGet(ctx, ref)
	if err != nil {
		t.Fatal(err)
	}
	if task.CommittedAttempt != 2 {
		t.Fatalf("committed attempt %d, want 2", task.CommittedAttempt)
	}
	m := readManifest(t, e, st.Manifest)
	for _, o := range m.Outputs {
		if o.Attempt == stale.Task.Attempt {
			t.Fatalf("manifest lists the fenced attempt's output %s", o.Key)
		}
	}
	if len(m.Outputs) != 1 {
		t.Fatalf("manifest outputs %+v, want 1", m.Outputs)
	}
	// The fenced attempt's output is tagged for the bucket's lifecycle rule
	// to expire; the committed one is left alone.
	staleKey := blob.OutputKey(id, "s", 0, stale.Task.Attempt, 0)
	for key, want := range map[string]string{staleKey: tuning.UncommittedTagValue, m.Outputs[0].Key: ""} {
		if got := objectTags(t, e, key)[tuning.UncommittedTagKey]; got != want {
			t.Errorf("%s: tag %s=%q, want %q", key, tuning.UncommittedTagKey, got, want)
		}
	}
}

func objectTags(t *testing.T, e *env, key string) map[string]string {
	t.Helper()
	out, err := s3.NewFromConfig(e.cfg, awsconf.S3Options(e.cfg)).GetObjectTagging(context.Background(), &s3.GetObjectTaggingInput{
		Bucket: &e.r.Resources.Bucket, Key: &key,
	})
	if err != nil {
		t.Fatalf("tags of %s: %v", key, err)
	}
	tags := map[string]string{}
	for _, tg := range out.TagSet {
		tags[*tg.Key] = *tg.Value
	}
	return tags
}

func TestFailingTaskRetriesThenFailsJob(t *testing.T) {
	t.Parallel()
	reg := batchwork.NewRegistry()
	var mu sync.Mutex
	var attempts []time.Time
	reg.Register("boom", func(ctx context.Context, t *batchwork.Task) error {
		mu.Lock()
		attempts = append(attempts, time.Now())
		mu.Unlock()
		return errors.New("disk on fire")
	})
	reg.Register("ok", func(ctx context.Context, t *batchwork.Task) error { return nil })
	var claims []time.Time
	e := newEnv(t, reg, envOptions{noRun: true})
	e.r.Executor.OnClaim = func(c control.Claim, _ time.Time) {
		mu.Lock()
		defer mu.Unlock()
		claims = append(claims, time.Now())
	}
	runCtx, stop := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = e.r.Poller().Run(runCtx) }()
	t.Cleanup(func() { stop(); <-done })
	id := e.submit("fail", []byte(`{"name":"fail","stages":[
	  {"name":"bad","task":"boom","partitions":{"count":1},"retry":{"maxAttempts":3,"backoff":"300ms"}},
	  {"name":"after","task":"ok","after":["bad"],"partitions":{"count":5}}]}`))
	st := e.waitJob(id, time.Minute)
	if st.State != string(sm.JobFailed) || !strings.Contains(st.Error, "disk on fire") || !strings.Contains(st.Error, `"bad"`) {
		t.Fatalf("job %s with error %q; want FAILED naming the stage and the error", st.State, st.Error)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(attempts) != 3 {
		t.Fatalf("%d attempts, want 3", len(attempts))
	}
	for i := 1; i < len(attempts); i++ {
		if gap, min := attempts[i].Sub(attempts[i-1]), 300*time.Millisecond<<(i-1); gap < min {
			t.Errorf("backoff before attempt %d was %s, want at least %s", i+1, gap, min)
		}
	}
	// The failer ends the job, then cancels its other stages (the sweep
	// finishes that if the failer dies), so the stage may lag the job.
	waitFor(t, 10*time.Second, "the downstream stage to be CANCELLED", func() bool {
		after, err := e.r.Store.StageGet(context.Background(), id, 1)
		if err != nil {
			t.Fatal(err)
		}
		return after.State == sm.StageCancelled
	})
	for _, c := range claims {
		if c.After(*st.Ended) {
			t.Errorf("a task was claimed at %s, after the job failed at %s", c, st.Ended)
		}
	}
}

// dropFirstCommitResponse lets the first commit write of a task reach the
// emulator, then loses its response, as a network failure would.
type dropFirstCommitResponse struct {
	next    http.RoundTripper
	dropped atomic.Bool
}

func (d *dropFirstCommitResponse) RoundTrip(r *http.Request) (*http.Response, error) {
	target := r.Header.Get("X-Amz-Target")
	batch := strings.HasSuffix(target, "BatchExecuteStatement")
	if !strings.HasSuffix(target, "UpdateItem") && !batch || d.dropped.Load() {
		return d.next.RoundTrip(r)
	}
	var body []byte
	if r.Body != nil {
		var buf bytes.Buffer
		_, _ = buf.ReadFrom(r.Body)
		body = buf.Bytes()
		r.Body.Close()
		r.Body = io.NopCloser(bytes.NewReader(body))
	}
	// The commit's guarded write of the task (the fence), not its count:
	// its UpdateItem, or the batched UPDATE that goes first
	// (dynamo/commitbatch.go).
	if !bytes.Contains(body, []byte(`catt = :att`)) && !(batch && bytes.Contains(body, []byte(`SET \"catt\" = ?`))) {
		return d.next.RoundTrip(r)
	}
	resp, err := d.next.RoundTrip(r)
	if err != nil {
		return resp, err
	}
	resp.Body.Close()
	d.dropped.Store(true)
	return nil, &net.OpError{Op: "read", Net: "tcp", Err: syscall.ECONNRESET}
}

func TestCommitRetriedAfterLostResponse(t *testing.T) {
	t.Parallel()
	reg := batchwork.NewRegistry()
	reg.Register("work", func(ctx context.Context, t *batchwork.Task) error { return nil })
	drop := &dropFirstCommitResponse{}
	e := newEnv(t, reg, envOptions{transport: func(rt http.RoundTripper) http.RoundTripper { drop.next = rt; return drop }})
	id := e.submit("lost", []byte(`{"name":"lost","stages":[{"name":"s","task":"work","partitions":{"count":4}}]}`))
	st := e.waitJob(id, time.Minute)
	if !drop.dropped.Load() {
		t.Fatalf("no commit response was dropped; the test injected nothing (job %+v)", st)
	}
	if st.State != string(sm.JobSucceeded) {
		t.Fatalf("job %s: %+v", st.State, st)
	}
	ctx := context.Background()
	stage, err := e.r.Store.StageGet(ctx, id, 0)
	if err != nil {
		t.Fatal(err)
	}
	p, err := e.r.Store.StageProgress(ctx, stage)
	if err != nil {
		t.Fatal(err)
	}
	if p.Committed != 4 || p.Left != 0 {
		t.Fatalf("progress %+v: want exactly one commit per task", p)
	}
	tasks, err := e.r.Store.TaskListStage(ctx, id, 0, 4)
	if err != nil {
		t.Fatal(err)
	}
	for _, task := range tasks {
		if task.State != sm.TaskSucceeded || task.CommittedAttempt != 1 {
			t.Errorf("task %s: %s committed attempt %d, want SUCCEEDED at attempt 1", task.Ref, task.State, task.CommittedAttempt)
		}
	}
}

func TestBadSpecsWriteNothing(t *testing.T) {
	t.Parallel()
	e := newEnv(t, batchwork.NewRegistry(), envOptions{noRun: true})
	cases := []struct {
		name, body, field string
	}{
		{"cycle", `{"name":"c","stages":[{"name":"a","task":"t","after":["b"],"partitions":{"count":1}},{"name":"b","task":"t","after":["a"],"partitions":{"count":1}}]}`, "stages[0].after"},
		{"unknown dependency", `{"name":"u","stages":[{"name":"a","task":"t","after":["zzz"],"partitions":{"count":1}}]}`, "stages[0].after[0]"},
		{"too many partitions", `{"name":"p","stages":[{"name":"a","task":"t","partitions":{"count":100001}}]}`, "stages[0].partitions.count"},
		{"empty name", `{"name":"","stages":[{"name":"a","task":"t","partitions":{"count":1}}]}`, "name"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			req, _ := http.NewRequest(http.MethodPost, e.r.URL+"/jobs", strings.NewReader(tc.body))
			req.Header.Set("Idempotency-Key", "bad-"+tc.name)
			req.Header.Set("X-Batchwork-Owner", "tester")
			localauth.SetHeader(req, e.r.Token)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			var body struct {
				Code, Message, Field string
			}
			_ = json.NewDecoder(resp.Body).Decode(&body)
			if resp.StatusCode != http.StatusBadRequest || !strings.HasPrefix(body.Field, tc.field) {
				t.Fatalf("status %d body %+v; want 400 naming %s", resp.StatusCode, body, tc.field)
			}
		})
	}
	assertEmpty(t, e)
}

func assertEmpty(t *testing.T, e *env) {
	t.Helper()
	ctx := context.Background()
	n, err := countItems(ctx, e)
	if err != nil {
		t.Fatal(err)
	}
	if n != 0 {
		t.Errorf("table has %d items, want none", n)
	}
	for _, q := range []string{e.r.Resources.Queues.High, e.r.Resources.Queues.Normal, e.r.Resources.Queues.Low} {
		msgs, err := e.r.Queue.Receive(ctx, q, 10, 0, time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if len(msgs) != 0 {
			t.Errorf("queue %s has messages %v", q, msgs)
		}
	}
	out, err := s3.NewFromConfig(e.cfg, func(o *s3.Options) { o.UsePathStyle = true }).ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: &e.r.Resources.Bucket})
	if err != nil {
		t.Fatal(err)
	}
	if len(out.Contents) != 0 {
		t.Errorf("bucket has %d objects, want none", len(out.Contents))
	}
}
