package control

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/batchwork/batchwork/internal/testdouble"
	"github.com/batchwork/batchwork/shared/blob"
	"github.com/batchwork/batchwork/shared/domain"
	"github.com/batchwork/batchwork/shared/dynamo"
	sm "github.com/batchwork/batchwork/statemachine"
)

// The unit tests' rig: a Service over internal/testdouble's doubles, on a
// test clock, with helpers for the steps an executor takes.

// unitLease is the lease of the tests' specs: the sweep takes a claim
// back at twice that (the lease plus a grace of one lease).
const unitLease = 10 * time.Second

// unitTimings are the control plane's timings in these tests. StuckAfter
// is longer than a lease and its grace, so a test of one repair is not
// crossed by resends of READY tasks unless it waits for them.
var unitTimings = Config{
	Queues:     Queues{High: "q-high", Normal: "q-normal", Low: "q-low"},
	StartGrace: time.Second, CheckEvery: 2 * time.Second, StuckAfter: 30 * time.Second,
	// The tests' input stages read a bucket of their own.
	InputBuckets: []string{"in-bucket"},
}

// unitRig is one test's control plane over fresh fakes, on a test clock
// and without jitter.
type unitRig struct {
	t     *testing.T
	ctx   context.Context
	clock *testdouble.Clock
	log   *testdouble.Journal
	store *testdouble.Store
	queue *testdouble.Queue
	blob  *testdouble.Blob
	svc   *Service
	keys  int

	mu    sync.Mutex
	slept []time.Duration // the service's waits (sleep)
}

func newUnitRig(t *testing.T, opts ...func(*Config)) *unitRig {
	t.Helper()
	cfg := unitTimings
	for _, o := range opts {
		o(&cfg)
	}
	log := &testdouble.Journal{}
	r := &unitRig{t: t, ctx: t.Context(), clock: testdouble.NewClock(), log: log,
		store: testdouble.NewStore(log), queue: testdouble.NewQueue(),
		blob: testdouble.NewBlob(log, testdouble.PresignRefused(ErrPresignUnavailable))}
	r.svc = New(cfg, r.store, r.queue, r.blob, testLogger(t))
	r.svc.Now = r.clock.Now
	r.svc.Jitter = func(time.Duration) time.Duration { return 0 }
	r.svc.Sleep = r.sleep
	t.Cleanup(func() { r.store.CheckInvariants(t) })
	return r
}

// oneStage is a job of one stage "s" of n tasks with maxAttempts attempts
// and a 2s base backoff; extra is spliced into the job object.
func oneStage(n, maxAttempts int, extra string) string {
	return fmt.Sprintf(`{"name":"unit","lease":"10s","retry":{"maxAttempts":%d,"backoff":"2s"}%s,"stages":[{"name":"s","task":"work","partitions":{"count":%d}}]}`,
		maxAttempts, extra, n)
}

// twoStages is oneStage followed by a stage "t" of one task after it.
func twoStages(n, maxAttempts int) string {
	return fmt.Sprintf(`{"name":"unit","lease":"10s","retry":{"maxAttempts":%d,"backoff":"2s"},"stages":[`+
		`{"name":"s","task":"work","partitions":{"count":%d}},{"name":"t","task":"work","after":["s"],"partitions":{"count":1}}]}`,
		maxAttempts, n)
}

func (r *unitRig) submit(spec string) string {
	r.t.Helper()
	r.keys++
	res, err := r.svc.Submit(r.ctx, SubmitRequest{Owner: "tester", IdempotencyKey: fmt.Sprintf("k%d", r.keys), Spec: []byte(spec)})
	if err != nil {
		r.t.Fatalf("submit: %v", err)
	}
	return res.JobID
}

func taskRef(job string, stage, p int) domain.TaskRef {
	return domain.TaskRef{Job: job, Stage: stage, Partition: p}
}

func taskItem(ref domain.TaskRef) dynamo.DueItem {
	return dynamo.DueItem{Kind: dynamo.DueTask, Job: ref.Job, Stage: ref.Stage, Task: ref}
}

func stageItem(job string, idx int) dynamo.DueItem {
	return dynamo.DueItem{Kind: dynamo.DueStage, Job: job, Stage: idx}
}

func (r *unitRig) claim(ref domain.TaskRef) Claim {
	r.t.Helper()
	c, err := r.svc.Claim(r.ctx, ref)
	if err != nil {
		r.t.Fatalf("claim %s: %v", ref, err)
	}
	return c
}

// output writes n output parts of c's attempt, as its task function would.
func (r *unitRig) output(c Claim, n int) {
	for p := 0; p < n; p++ {
		k := blob.OutputKey(c.Task.Ref.Job, c.StageName(), c.Task.Ref.Partition, c.Task.Attempt, p)
		r.blob.Put(testdouble.DefaultBucket, k, []byte("out"))
	}
}

// commit writes n outputs of c's attempt and commits them.
func (r *unitRig) commit(c Claim, n int) {
	r.t.Helper()
	r.output(c, n)
	if err := r.svc.Commit(r.ctx, c, CommitResult{Outputs: n}); err != nil {
		r.t.Fatalf("commit %s: %v", c.Task.Ref, err)
	}
}

func (r *unitRig) task(ref domain.TaskRef) domain.Task {
	r.t.Helper()
	t, err := r.store.TaskGet(r.ctx, ref)
	if err != nil {
		r.t.Fatal(err)
	}
	return t
}

func (r *unitRig) stage(job string, idx int) domain.Stage {
	r.t.Helper()
	st, err := r.store.StageGet(r.ctx, job, idx)
	if err != nil {
		r.t.Fatal(err)
	}
	return st
}

func (r *unitRig) job(id string) domain.Job {
	r.t.Helper()
	j, err := r.store.JobGet(r.ctx, id)
	if err != nil {
		r.t.Fatal(err)
	}
	return j
}

func (r *unitRig) shardLeft(job string, idx, shard int) int {
	r.t.Helper()
	n, err := r.store.ShardLeft(r.ctx, job, idx, shard)
	if err != nil {
		r.t.Fatal(err)
	}
	return n
}

// sweep runs one sweep that must not fail.
// sleep is the service's Sleep on the test clock: it advances it and
// records the wait.
func (r *unitRig) sleep(_ context.Context, d time.Duration) error {
	r.mu.Lock()
	r.slept = append(r.slept, d)
	r.mu.Unlock()
	r.clock.Advance(d)
	return nil
}

func (r *unitRig) sweep() SweepCounts {
	r.t.Helper()
	c, err := r.svc.Sweep(r.ctx)
	if err != nil {
		r.t.Fatalf("sweep: %v", err)
	}
	return c
}

// manifestKeys reads a manifest and returns the keys it lists.
func (r *unitRig) manifestKeys(key string) []string {
	r.t.Helper()
	if _, ok := r.blob.Object(key); !ok {
		r.t.Fatalf("manifest %s not written", key)
	}
	// As readers read it: a shuffle stage's lists its outputs under
	// "shuffleOutputs" (blob.ManifestWriter.IndexedShuffle).
	m, err := blob.ReadManifest(context.Background(), r.blob, key)
	if err != nil || len(m.Pages) != 0 {
		r.t.Fatalf("manifest %s: %v (%d pages)", key, err, len(m.Pages))
	}
	keys := make([]string, 0, len(m.Outputs))
	for _, o := range m.Outputs {
		if o.Key != blob.OutputKey(m.Job, o.Stage, o.Partition, o.Attempt, o.Part) {
			r.t.Errorf("manifest %s: output %+v names another key", key, o)
		}
		keys = append(keys, o.Key)
	}
	return keys
}

// wantState fails unless the task, stage and job are in the given states
// (an empty one is not checked).
func (r *unitRig) wantState(ref domain.TaskRef, task sm.TaskState, stage sm.StageState, job sm.JobState) {
	r.t.Helper()
	if got := r.task(ref); task != "" && got.State != task {
		r.t.Errorf("task %s is %s (%q), want %s", ref, got.State, got.LastError, task)
	}
	if got := r.stage(ref.Job, ref.Stage); stage != "" && got.State != stage {
		r.t.Errorf("stage %s/%d is %s (%q), want %s", ref.Job, ref.Stage, got.State, got.Error, stage)
	}
	if got := r.job(ref.Job); job != "" && got.State != job {
		r.t.Errorf("job %s is %s (%q), want %s", ref.Job, got.State, got.Error, job)
	}
}

// bodyCounts counts messages by body.
func bodyCounts(msgs []testdouble.Sent) map[string]int {
	n := map[string]int{}
	for _, m := range msgs {
		n[m.Body]++
	}
	return n
}

// testLogger writes to the test's output, shown for failures and -v only.
func testLogger(t testing.TB) *slog.Logger {
	var w io.Writer = io.Discard
	if tt, ok := t.(interface{ Output() io.Writer }); ok {
		w = tt.Output()
	}
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: slog.LevelDebug}))
}
