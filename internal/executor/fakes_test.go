package executor

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/batchwork/batchwork/shared/batch"
	"github.com/batchwork/batchwork/shared/blob"
	"github.com/batchwork/batchwork/shared/control"
	"github.com/batchwork/batchwork/shared/queue"
	"github.com/batchwork/batchwork/shared/spec"
	"github.com/batchwork/batchwork/shared/split"
)

// These fakes stand in for the control plane, S3 and SQS in tests of the
// hosts' own behaviour (draining, visibility calls). Claims against AWS are
// proven in package integration, never here.

func mustSpec(t *testing.T, body string) *spec.Job {
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
	claims  []batch.TaskRef
	commits []batch.TaskRef
	fails   []batch.TaskRef
	causes  []string // of fails, in order
}

func (f *fakeCP) Claim(ctx context.Context, ref batch.TaskRef) (control.Claim, error) {
	if err := ctx.Err(); err != nil {
		return control.Claim{}, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.claims = append(f.claims, ref)
	return control.Claim{Spec: f.spec, Lease: f.lease, Task: batch.Task{Ref: ref, Attempt: 1, MaxAttempts: 3, Token: "tok"}}, nil
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
	return control.Decision{Retry: true, Delay: time.Second}, nil
}

func unsupported(what string) error {
	return fmt.Errorf("fake control plane: %s: %w", what, ErrUnsupported)
}

func (f *fakeCP) ClaimCopy(context.Context, batch.TaskRef) (control.Claim, error) {
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

func (f *fakeCP) TaskMemory(context.Context, batch.TaskRef) (spec.Size, error) {
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

func (f *fakeCP) snapshot() (claims, commits, fails []batch.TaskRef) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]batch.TaskRef(nil), f.claims...), append([]batch.TaskRef(nil), f.commits...), append([]batch.TaskRef(nil), f.fails...)
}

// memBlob is an in-memory object store.
type memBlob struct {
	mu   sync.Mutex
	objs map[string][]byte
}

func (b *memBlob) Bucket() string { return "bucket" }

func (b *memBlob) PutIfAbsent(ctx context.Context, key string, body []byte) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.objs == nil {
		b.objs = map[string][]byte{}
	}
	if _, ok := b.objs[key]; ok {
		return batch.ErrExists
	}
	b.objs[key] = bytes.Clone(body)
	return nil
}

func (b *memBlob) Get(ctx context.Context, key string) ([]byte, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	v, ok := b.objs[key]
	if !ok {
		return nil, batch.ErrNotFound
	}
	return v, nil
}

func (b *memBlob) Open(ctx context.Context, bucket, key string, start int64) (io.ReadCloser, error) {
	v, err := b.Get(ctx, key)
	if err != nil {
		return nil, err
	}
	return io.NopCloser(bytes.NewReader(v[start:])), nil
}

func (b *memBlob) Opener(bucket string) split.RangeOpener {
	return func(ctx context.Context, key string, start int64) (io.ReadCloser, error) {
		return b.Open(ctx, bucket, key, start)
	}
}

// memBlob has only Objects: every other capability of the port is
// unsupported, so the tests run the runner's fallbacks (mpBlob streams,
// rangeBlob serves ranges).
var _ Blob = (*memBlob)(nil)

func blobUnsupported(what string) error {
	return fmt.Errorf("fake blob store: %s: %w", what, ErrUnsupported)
}

func (b *memBlob) PinnedOpener(string, string) (split.RangeOpener, error) {
	return nil, blobUnsupported("pinned reads")
}

func (b *memBlob) VersionOpener(string, string, string) (split.RangeOpener, error) {
	return nil, blobUnsupported("version reads")
}

func (b *memBlob) OpenRange(context.Context, string, int64, int64) (io.ReadCloser, error) {
	return nil, blobUnsupported("ranged reads")
}

func (b *memBlob) PutReaderIfAbsent(context.Context, string, io.ReadSeeker, int64) error {
	return blobUnsupported("puts from a reader")
}

func (b *memBlob) CopyIfAbsent(context.Context, string, string, string) error {
	return blobUnsupported("server-side copies")
}

func (b *memBlob) CanMultipart() error { return blobUnsupported("multipart uploads") }

func (b *memBlob) CreateMultipart(context.Context, string) (string, error) {
	return "", blobUnsupported("multipart uploads")
}

func (b *memBlob) UploadPart(context.Context, string, string, int32, []byte) (blob.CompletedPart, error) {
	return blob.CompletedPart{}, blobUnsupported("multipart uploads")
}

func (b *memBlob) CompleteMultipartIfAbsent(context.Context, string, string, []blob.CompletedPart) error {
	return blobUnsupported("multipart uploads")
}

func (b *memBlob) AbortMultipart(context.Context, string, string) error {
	return blobUnsupported("multipart uploads")
}

func (b *memBlob) MarkUncommitted(context.Context, string) (int, error) {
	return 0, blobUnsupported("expiry tags")
}

// memQueue is an in-memory queue for the poller: Receive hands out queued
// messages and otherwise blocks, as a long poll does, until a message is
// pushed or ctx ends. Every call is recorded.
type memQueue struct {
	mu       sync.Mutex
	msgs     []queue.Message
	wake     chan struct{}
	receives int
	// entered and left receive the call number of each Receive as it
	// starts and as it returns.
	entered, left chan int
	deleted       []string
	visibility    map[string][]time.Duration
}

func newMemQueue() *memQueue {
	return &memQueue{wake: make(chan struct{}, 1), entered: make(chan int, 100), left: make(chan int, 100), visibility: map[string][]time.Duration{}}
}

func (q *memQueue) push(m queue.Message) {
	q.mu.Lock()
	q.msgs = append(q.msgs, m)
	q.mu.Unlock()
	select {
	case q.wake <- struct{}{}:
	default:
	}
}

func (q *memQueue) Receive(ctx context.Context, url string, maxN int, wait, visibility time.Duration) ([]queue.Message, error) {
	q.mu.Lock()
	q.receives++
	n := q.receives
	q.mu.Unlock()
	q.entered <- n
	defer func() { q.left <- n }()
	for {
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("receive from %s: %w", url, err)
		}
		q.mu.Lock()
		if len(q.msgs) > 0 {
			k := min(maxN, len(q.msgs))
			out := append([]queue.Message(nil), q.msgs[:k]...)
			q.msgs = q.msgs[k:]
			q.mu.Unlock()
			return out, nil
		}
		q.mu.Unlock()
		select {
		case <-ctx.Done():
		case <-q.wake:
		}
	}
}

func (q *memQueue) ChangeVisibility(ctx context.Context, url, receipt string, d time.Duration) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	q.visibility[receipt] = append(q.visibility[receipt], d)
	return nil
}

func (q *memQueue) ChangeVisibilityBatch(ctx context.Context, url string, receipts []string, d time.Duration) ([]string, error) {
	for _, r := range receipts {
		if err := q.ChangeVisibility(ctx, url, r, d); err != nil {
			return nil, err
		}
	}
	return nil, nil
}

func (q *memQueue) DeleteBatch(ctx context.Context, url string, receipts []string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	q.deleted = append(q.deleted, receipts...)
	return nil
}

func (q *memQueue) state() (receives int, deleted []string) {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.receives, append([]string(nil), q.deleted...)
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
