package executor

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/batchwork/batchwork/internal/testdouble"
	"github.com/batchwork/batchwork/shared/control"
	"github.com/batchwork/batchwork/shared/domain"
	"github.com/batchwork/batchwork/shared/spec"
)

// These fakes stand in for the control plane, S3 and SQS in tests of the
// hosts' own behaviour (draining, visibility calls). Claims against AWS are
// proven in package integration, never here.

func mustSpec(t testing.TB, body string) *spec.Job {
	t.Helper()
	sp, err := spec.Parse([]byte(body))
	if err != nil {
		t.Fatalf("spec: %v", err)
	}
	return sp
}

// fakeCP grants every claim once per task and records commits and
// failures. Like a real control plane, it fails calls made on a cancelled
// context. It has no copies, batched counts, checkpoints, splits, sizes,
// liveness records, owners or job checks: those calls return
// ErrUnsupported, and fakes that need one embed it and override them.
type fakeCP struct {
	spec  *spec.Job
	lease time.Duration

	mu      sync.Mutex
	claims  []domain.TaskRef
	commits []domain.TaskRef
	fails   []domain.TaskRef
	causes  []string // of fails, in order
	classes []domain.ErrorClass
}

func (f *fakeCP) Claim(ctx context.Context, ref domain.TaskRef) (control.Claim, error) {
	if err := ctx.Err(); err != nil {
		return control.Claim{}, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.claims = append(f.claims, ref)
	return control.Claim{Spec: f.spec, Lease: f.lease, Task: domain.Task{Ref: ref, Attempt: 1, MaxAttempts: 3, Token: "tok"}}, nil
}

// JobSpec serves the spec before a claim, as control.Service does from
// its cache (Specs).
func (f *fakeCP) JobSpec(ctx context.Context, job string) (*spec.Job, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return f.spec, nil
}

func (f *fakeCP) Heartbeat(ctx context.Context, c control.Claim) error { return ctx.Err() }

var _ ControlPlane = (*fakeCP)(nil)

func (f *fakeCP) Commit(ctx context.Context, c control.Claim, _ control.CommitResult) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.commits = append(f.commits, c.Task.Ref)
	return nil
}

func (f *fakeCP) Fail(ctx context.Context, c control.Claim, p control.FailParams) (control.Decision, error) {
	if err := ctx.Err(); err != nil {
		return control.Decision{}, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.fails = append(f.fails, c.Task.Ref)
	f.causes = append(f.causes, p.Cause)
	f.classes = append(f.classes, p.Class)
	return control.Decision{Retry: true, Delay: time.Second}, nil
}

func unsupported(what string) error {
	return fmt.Errorf("fake control plane: %s: %w", what, ErrUnsupported)
}

func (f *fakeCP) ClaimCopy(context.Context, domain.TaskRef) (control.Claim, error) {
	return control.Claim{}, unsupported("speculative copies")
}

func (f *fakeCP) FlushCounts(context.Context) error { return unsupported("batched counts") }

func (f *fakeCP) CanCheckpoint() error { return unsupported("checkpoints") }

func (f *fakeCP) Checkpoint(context.Context, control.Claim, int, int64) error {
	return unsupported("checkpoints")
}

func (f *fakeCP) Continue(context.Context, control.Claim, int64) (control.Decision, error) {
	return control.Decision{}, unsupported("continuations")
}

func (f *fakeCP) NoteResumed(context.Context, control.Claim) {}

func (f *fakeCP) CheckpointRefused(context.Context, control.Claim, int) {}

func (f *fakeCP) SplitTask(context.Context, control.Claim, control.SplitRequest) (control.SplitResult, error) {
	return control.SplitResult{}, unsupported("dynamic splits")
}

func (f *fakeCP) TaskMemory(context.Context, domain.TaskRef) (spec.Size, error) {
	return 0, unsupported("task memory")
}

func (f *fakeCP) Forward(context.Context, string, time.Duration) error {
	return unsupported("forwarding to sized queues")
}

func (f *fakeCP) ExecutorAlive(context.Context, string) error {
	return unsupported("liveness records")
}

func (f *fakeCP) ExecutorAliveMemory(context.Context, string, control.MemoryReport) error {
	return unsupported("memory reports")
}

func (f *fakeCP) JobOwner(context.Context, string) (string, error) {
	return "", unsupported("job owners")
}

func (f *fakeCP) CheckJob(context.Context, control.Claim) error { return unsupported("job checks") }

func (f *fakeCP) JobStateTTL() time.Duration { return 0 }

func (f *fakeCP) snapshot() (claims, commits, fails []domain.TaskRef) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]domain.TaskRef(nil), f.claims...), append([]domain.TaskRef(nil), f.commits...), append([]domain.TaskRef(nil), f.fails...)
}

// refusable are the blob port's optional capabilities: a test's blob
// has none but those it asks for, so tests run the runner's fallbacks.
var refusable = []testdouble.Capability{testdouble.PinnedReads, testdouble.RangeReads, testdouble.ReaderPuts,
	testdouble.Copies, testdouble.Multipart, testdouble.Expiry}

// newBlob is S3 with objects only.
func newBlob() *testdouble.Blob { return blobWith(nil, nil) }

// blobWith is S3 with objects and the capabilities allowed, its writes
// journaled to log (nil: none). Every bucket name reads as its own.
func blobWith(log *testdouble.Journal, allowed []testdouble.Capability, opts ...testdouble.BlobOption) *testdouble.Blob {
	var refused []testdouble.Capability
	for _, c := range refusable {
		if !slices.Contains(allowed, c) {
			refused = append(refused, c)
		}
	}
	opts = append([]testdouble.BlobOption{testdouble.WithBucket("bucket"), testdouble.OneBucket(),
		testdouble.Refusing(ErrUnsupported, refused...)}, opts...)
	return testdouble.NewBlob(log, opts...)
}

// streamBlob is S3 with objects and multipart uploads, held to S3's rules
// with parts of at least minPart bytes (0: blob.MinPartSize); its
// requests are journaled to log.
func streamBlob(log *testdouble.Journal, minPart int) *testdouble.Blob {
	return blobWith(log, []testdouble.Capability{testdouble.Multipart}, testdouble.MinPartSize(minPart))
}

// newQueue is one SQS queue whose Receive hands out pushed messages and
// otherwise waits, as a long poll does, until a message is pushed or its
// context ends.
func newQueue() *testdouble.Queue {
	return testdouble.NewQueue(testdouble.LongPoll(), testdouble.OneQueue())
}

func discard() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// within fails the test unless ch yields within d. It bounds a wait that a
// bug would make endless; it does not stand in for synchronisation.
func within[T any](t *testing.T, ch <-chan T, d time.Duration, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(d):
		t.Fatalf("timed out after %s waiting for %s", d, what)
	}
	var zero T
	return zero
}

var errBoom = errors.New("boom")
