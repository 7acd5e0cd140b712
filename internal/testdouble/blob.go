package testdouble

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/batchwork/batchwork/shared/blob"
	"github.com/batchwork/batchwork/shared/domain"
	"github.com/batchwork/batchwork/shared/split"
)

// DefaultBucket is the bucket a Blob writes to unless WithBucket names
// another.
const DefaultBucket = "bw-bucket"

// ErrUnsupported is what a refused capability or an unsigned presign
// wraps unless the test names its own error (the port's sentinel).
var ErrUnsupported = errors.New("not supported")

// Capability is a part of the executor's blob port it may do without; a
// Blob made with Refusing answers its methods with an error, so a test
// runs the caller's fallback.
type Capability string

// The executor's optional capabilities, named as its port names them.
const (
	PinnedReads Capability = "pinned reads"
	RangeReads  Capability = "ranged reads"
	ReaderPuts  Capability = "puts from a reader"
	Copies      Capability = "server-side copies"
	Multipart   Capability = "multipart uploads"
	Expiry      Capability = "expiry tags"
)

// Blob is S3 in memory: the store's own bucket and any other a test fills
// (inputs, publishing destinations). It keeps S3's rules that callers
// rely on: puts and copies are conditional on the key being absent; a
// ranged read past the end is cut at the end; a multipart object appears
// only when its upload completes, and every part but the last holds at
// least the minimum part size.
type Blob struct {
	log    *Journal
	bucket string
	// oneBucket reads every bucket name as the blob's own.
	oneBucket  bool
	refusedBy  map[Capability]error
	presignErr error
	minPart    int
	pageSize   int

	mu     sync.Mutex
	before Hook
	objs   map[string]map[string][]byte // bucket -> key -> body
	marked []string                     // MarkUncommitted prefixes, in order
	// listLimit, when set, ends a listing of more objects with the blob
	// adapter's *blob.ListLimitError.
	listLimit int
	// refused buckets answer every publishing write with blob.ErrRefused.
	refused map[string]bool
	uploads map[string]*upload
	next    int
}

type upload struct {
	key   string
	parts map[int32][]byte
}

// BlobOption shapes a Blob at construction.
type BlobOption func(*Blob)

// WithBucket names the blob's own bucket.
func WithBucket(name string) BlobOption { return func(b *Blob) { b.bucket = name } }

// OneBucket reads every bucket name as the blob's own, for callers that
// name the bucket an object came from without the test caring which.
func OneBucket() BlobOption { return func(b *Blob) { b.oneBucket = true } }

// Refusing answers the capabilities' methods with an error wrapping err
// (CanMultipart too), as a store without them does.
func Refusing(err error, caps ...Capability) BlobOption {
	return func(b *Blob) {
		for _, c := range caps {
			b.refusedBy[c] = err
		}
	}
}

// PresignRefused makes PresignGet fail wrapping err, the port's sentinel
// for an installation that cannot presign.
func PresignRefused(err error) BlobOption { return func(b *Blob) { b.presignErr = err } }

// MinPartSize is S3's minimum size of a part but the last (default
// blob.MinPartSize), lowered so a test streams small parts.
func MinPartSize(n int) BlobOption { return func(b *Blob) { b.minPart = n } }

// ListPageSize is how many keys a ListPage returns (default 2, so that
// callers' paging is exercised).
func ListPageSize(n int) BlobOption { return func(b *Blob) { b.pageSize = n } }

// NewBlob is an empty store whose writes go to log (nil: none recorded).
func NewBlob(log *Journal, opts ...BlobOption) *Blob {
	b := &Blob{log: log, bucket: DefaultBucket, refusedBy: map[Capability]error{}, presignErr: ErrUnsupported,
		pageSize: 2, objs: map[string]map[string][]byte{}, refused: map[string]bool{}, uploads: map[string]*upload{}}
	for _, o := range opts {
		o(b)
	}
	return b
}

func (b *Blob) Bucket() string { return b.bucket }

func (b *Blob) hook(method string) error {
	b.mu.Lock()
	before := b.before
	b.mu.Unlock()
	if before == nil {
		return nil
	}
	return before(method)
}

func (b *Blob) refuse(c Capability) error {
	if err, ok := b.refusedBy[c]; ok {
		return fmt.Errorf("testdouble.Blob: %s: %w", c, err)
	}
	return nil
}

func (b *Blob) at(bucket string) string {
	if b.oneBucket {
		return b.bucket
	}
	return bucket
}

// ---- objects ----

func (b *Blob) PutIfAbsent(_ context.Context, key string, body []byte) error {
	if err := b.hook("PutIfAbsent"); err != nil {
		return err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if _, ok := b.objs[b.bucket][key]; ok {
		return fmt.Errorf("put %s: %w", key, domain.ErrExists)
	}
	b.putLocked(b.bucket, key, body)
	b.log.Add("put %s", key)
	return nil
}

func (b *Blob) Get(_ context.Context, key string) ([]byte, error) {
	if err := b.hook("Get"); err != nil {
		return nil, err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	body, ok := b.objs[b.bucket][key]
	if !ok {
		return nil, fmt.Errorf("get %s: %w", key, domain.ErrNotFound)
	}
	return body, nil
}

func (b *Blob) Open(_ context.Context, bucket, key string, start int64) (io.ReadCloser, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	body, ok := b.objs[b.at(bucket)][key]
	if !ok {
		return nil, fmt.Errorf("get %s: %w", key, domain.ErrNotFound)
	}
	return io.NopCloser(bytes.NewReader(body[start:])), nil
}

// Size ignores the pins, as the double's reads do.
func (b *Blob) Size(_ context.Context, bucket, key, _, _ string) (int64, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	body, ok := b.objs[b.at(bucket)][key]
	if !ok {
		return 0, fmt.Errorf("size %s: %w", key, domain.ErrNotFound)
	}
	return int64(len(body)), nil
}

func (b *Blob) Opener(bucket string) split.RangeOpener {
	return func(ctx context.Context, key string, start int64) (io.ReadCloser, error) {
		return b.Open(ctx, bucket, key, start)
	}
}

// PinnedOpener and VersionOpener read unpinned: the double's objects
// never change under a reader.
func (b *Blob) PinnedOpener(bucket, _ string) (split.RangeOpener, error) {
	if err := b.refuse(PinnedReads); err != nil {
		return nil, err
	}
	return b.Opener(bucket), nil
}

func (b *Blob) VersionOpener(bucket, _, _ string) (split.RangeOpener, error) {
	if err := b.refuse(PinnedReads); err != nil {
		return nil, err
	}
	return b.Opener(bucket), nil
}

// OpenRange reads [start, end) of an object of the blob's bucket; a range
// past the end is cut at the end, one starting past it is refused.
func (b *Blob) OpenRange(ctx context.Context, key string, start, end int64) (io.ReadCloser, error) {
	if err := b.refuse(RangeReads); err != nil {
		return nil, err
	}
	b.log.Add("range %s %d-%d", key, start, end)
	v, err := b.Get(ctx, key)
	if err != nil {
		return nil, err
	}
	if start >= int64(len(v)) {
		return nil, fmt.Errorf("range %d- of %d bytes: not satisfiable", start, len(v))
	}
	return io.NopCloser(bytes.NewReader(v[start:min(end, int64(len(v)))])), nil
}

func (b *Blob) PutReaderIfAbsent(ctx context.Context, key string, body io.ReadSeeker, size int64) error {
	if err := b.refuse(ReaderPuts); err != nil {
		return err
	}
	buf := make([]byte, size)
	if _, err := io.ReadFull(body, buf); err != nil {
		return fmt.Errorf("put %s: read body: %w", key, err)
	}
	return b.PutIfAbsent(ctx, key, buf)
}

func (b *Blob) List(_ context.Context, bucket, prefix string) ([]split.Object, error) {
	if err := b.hook("List"); err != nil {
		return nil, err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []split.Object
	for k, body := range b.objs[b.at(bucket)] {
		if strings.HasPrefix(k, prefix) {
			out = append(out, split.Object{Key: k, Size: int64(len(body))})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Key < out[j].Key })
	if b.listLimit > 0 && len(out) > b.listLimit {
		l := blob.ListLimit{Objects: b.listLimit, KeyBytes: 1 << 40}
		return nil, &blob.ListLimitError{Bucket: bucket, Prefix: prefix, Limit: l, Objects: l.Objects + 1}
	}
	return out, nil
}

// ListPage lists keys after after, a page of ListPageSize at a time.
func (b *Blob) ListPage(_ context.Context, bucket, prefix, after string) ([]string, bool, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	var keys []string
	for k := range b.objs[b.at(bucket)] {
		if strings.HasPrefix(k, prefix) && k > after {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	if len(keys) > b.pageSize {
		return keys[:b.pageSize], true, nil
	}
	return keys, false, nil
}

// PinVersions: the double's buckets are unversioned, where the adapter
// plans with the listed ETags alone.
func (b *Blob) PinVersions(_ context.Context, _, _ string, objs []split.Object) ([]split.Object, error) {
	return objs, nil
}

// PresignGet: the double cannot sign URLs.
func (b *Blob) PresignGet(context.Context, string, time.Duration) (string, error) {
	return "", fmt.Errorf("testdouble.Blob: PresignGet not supported: %w", b.presignErr)
}

func (b *Blob) MarkUncommitted(_ context.Context, prefix string) (int, error) {
	if err := b.refuse(Expiry); err != nil {
		return 0, err
	}
	if err := b.hook("MarkUncommitted"); err != nil {
		return 0, err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.marked = append(b.marked, prefix)
	n := 0
	for k := range b.objs[b.bucket] {
		if strings.HasPrefix(k, prefix) {
			n++
		}
	}
	return n, nil
}

// DeletePrefix deletes up to maxPages pages of blob.DeleteBatch keys.
func (b *Blob) DeletePrefix(_ context.Context, prefix string, maxPages int) (blob.DeleteResult, error) {
	if err := b.hook("DeletePrefix"); err != nil {
		return blob.DeleteResult{}, err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	keys := b.keysLocked(prefix)
	budget := maxPages * blob.DeleteBatch
	n := min(len(keys), budget)
	for _, k := range keys[:n] {
		delete(b.objs[b.bucket], k)
	}
	return blob.DeleteResult{Deleted: n, Complete: len(keys) < budget}, nil
}

// ---- publishing ----

func (b *Blob) PutIfAbsentIn(_ context.Context, bucket, key string, body []byte) error {
	if err := b.hook("PutIfAbsentIn"); err != nil {
		return err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.refused[bucket] {
		return fmt.Errorf("put s3://%s/%s: %w: AccessDenied", bucket, key, blob.ErrRefused)
	}
	if _, ok := b.objs[b.at(bucket)][key]; ok {
		return fmt.Errorf("put %s: %w", key, domain.ErrExists)
	}
	b.putLocked(b.at(bucket), key, body)
	b.log.Add("publish put s3://%s/%s", bucket, key)
	return nil
}

func (b *Blob) CopyIfAbsent(_ context.Context, src, bucket, dst string) error {
	if err := b.refuse(Copies); err != nil {
		return err
	}
	if err := b.hook("CopyIfAbsent"); err != nil {
		return err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.refused[bucket] {
		return fmt.Errorf("copy: %w: AccessDenied", blob.ErrRefused)
	}
	body, ok := b.objs[b.bucket][src]
	if !ok {
		return fmt.Errorf("copy %s: NoSuchKey", src)
	}
	if _, ok := b.objs[b.at(bucket)][dst]; ok {
		return fmt.Errorf("copy to %s: %w", dst, domain.ErrExists)
	}
	b.putLocked(b.at(bucket), dst, body)
	b.log.Add("copy %s to s3://%s/%s", src, bucket, dst)
	return nil
}

// ---- multipart uploads ----

func (b *Blob) CanMultipart() error { return b.refuse(Multipart) }

func (b *Blob) CreateMultipart(ctx context.Context, key string) (string, error) {
	if err := b.refuse(Multipart); err != nil {
		return "", err
	}
	if err := ctx.Err(); err != nil {
		return "", err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.next++
	id := fmt.Sprintf("u%d", b.next)
	b.uploads[id] = &upload{key: key, parts: map[int32][]byte{}}
	b.log.Add("create %s", key)
	return id, nil
}

func (b *Blob) UploadPart(ctx context.Context, key, id string, n int32, body []byte) (blob.CompletedPart, error) {
	if err := b.refuse(Multipart); err != nil {
		return blob.CompletedPart{}, err
	}
	if err := ctx.Err(); err != nil {
		return blob.CompletedPart{}, err
	}
	if err := b.hook("UploadPart"); err != nil {
		return blob.CompletedPart{}, err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	up, ok := b.uploads[id]
	if !ok || up.key != key {
		return blob.CompletedPart{}, fmt.Errorf("no upload %s at %s", id, key)
	}
	up.parts[n] = bytes.Clone(body)
	b.log.Add("part %s %d %d", key, n, len(body))
	return blob.CompletedPart{Number: n, ETag: fmt.Sprintf("e%d", n)}, nil
}

// CompleteMultipartIfAbsent joins the parts into the object unless the
// key exists, when the upload stays open, as on S3.
func (b *Blob) CompleteMultipartIfAbsent(_ context.Context, key, id string, parts []blob.CompletedPart) error {
	if err := b.refuse(Multipart); err != nil {
		return err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.log.Add("complete %s %d", key, len(parts))
	up, ok := b.uploads[id]
	if !ok || up.key != key {
		return fmt.Errorf("NoSuchUpload %s", id)
	}
	var body []byte
	for i, p := range parts {
		part, ok := up.parts[p.Number]
		if !ok || p.Number != int32(i+1) {
			return fmt.Errorf("InvalidPart %d", p.Number)
		}
		if i < len(parts)-1 && len(part) < cmp.Or(b.minPart, blob.MinPartSize) {
			return fmt.Errorf("EntityTooSmall: part %d holds %d bytes", p.Number, len(part))
		}
		body = append(body, part...)
	}
	if _, exists := b.objs[b.bucket][key]; exists {
		return fmt.Errorf("complete %s: %w", key, domain.ErrExists)
	}
	b.putLocked(b.bucket, key, body)
	delete(b.uploads, id)
	return nil
}

func (b *Blob) AbortMultipart(ctx context.Context, key, id string) error {
	if err := b.refuse(Multipart); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.log.Add("abort %s", key)
	delete(b.uploads, id)
	return nil
}

// ---- for tests ----

// SetFault installs the hook consulted before each write, Get and List.
func (b *Blob) SetFault(before Hook) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.before = before
}

// SetListLimit ends a listing of more than n objects with the adapter's
// *blob.ListLimitError (0: no limit).
func (b *Blob) SetListLimit(n int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.listLimit = n
}

// Refuse makes bucket answer every publishing write with blob.ErrRefused.
func (b *Blob) Refuse(bucket string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.refused[bucket] = true
}

// Put writes an object as a task function (or a test's input) would.
func (b *Blob) Put(bucket, key string, body []byte) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.putLocked(b.at(bucket), key, body)
}

// Object reads an object of the blob's bucket.
func (b *Blob) Object(key string) ([]byte, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	body, ok := b.objs[b.bucket][key]
	return body, ok
}

// Delete removes an object of the blob's bucket.
func (b *Blob) Delete(key string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	delete(b.objs[b.bucket], key)
}

// Keys lists the blob's bucket's keys under prefix, sorted.
func (b *Blob) Keys(prefix string) []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.keysLocked(prefix)
}

// MarkedPrefixes are the prefixes MarkUncommitted tagged, in order.
func (b *Blob) MarkedPrefixes() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return slices.Clone(b.marked)
}

// OpenUploads counts the multipart uploads neither completed nor aborted.
func (b *Blob) OpenUploads() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.uploads)
}

func (b *Blob) keysLocked(prefix string) []string {
	var keys []string
	for k := range b.objs[b.bucket] {
		if strings.HasPrefix(k, prefix) {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	return keys
}

func (b *Blob) putLocked(bucket, key string, body []byte) {
	if b.objs[bucket] == nil {
		b.objs[bucket] = map[string][]byte{}
	}
	b.objs[bucket][key] = bytes.Clone(body)
}
