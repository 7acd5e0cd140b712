package executor

import (
	"context"
	"io"

	"github.com/batchwork/batchwork/internal/executor/output"
	"github.com/batchwork/batchwork/shared/blob"
	"github.com/batchwork/batchwork/shared/split"
)

// Blob is everything the runner calls on S3, grouped by capability. Every
// implementation has every method: one that lacks a capability says so by
// returning an error wrapping ErrUnsupported (Multipart: from
// CanMultipart, before anything is written), and the runner then does
// without it as each capability's comment describes. No capability is
// found by a type assertion, so a wrapper cannot switch one off by
// accident.
type Blob interface {
	Objects
	PinnedReads
	RangeReads
	output.Blob // the outputs' writes: puts from a reader, copies, multipart
	Expiry
}

var _ Blob = (*blob.Store)(nil)

// Objects writes objects of the store's bucket once and reads objects of
// any bucket; every store has it.
type Objects interface {
	PutIfAbsent(ctx context.Context, key string, body []byte) error
	Get(ctx context.Context, key string) ([]byte, error)
	Open(ctx context.Context, bucket, key string, start int64) (io.ReadCloser, error)
	Opener(bucket string) split.RangeOpener
	// Size is an input object's size as a split pinned to etag and
	// version reads it (a store without pinned reads ignores the pins).
	Size(ctx context.Context, bucket, key, etag, version string) (int64, error)
	Bucket() string
}

// PinnedReads reads an input split from the object its plan saw (If-Match
// its ETag, or its version on a versioned bucket); unsupported, the split
// is read unpinned with Opener.
type PinnedReads interface {
	PinnedOpener(bucket, etag string) (split.RangeOpener, error)
	VersionOpener(bucket, etag, version string) (split.RangeOpener, error)
}

// RangeReads reads the bytes [start, end) of an object with one ranged
// GET (a reducer's slice of an indexed shuffle object); unsupported, the
// slice is read with Open from start and cut at end.
type RangeReads interface {
	OpenRange(ctx context.Context, key string, start, end int64) (io.ReadCloser, error)
}

// Expiry tags objects for the bucket's lifecycle rule to expire (a
// committed task's checkpoints); unsupported, they stay until the job's
// data is deleted.
type Expiry interface {
	MarkUncommitted(ctx context.Context, prefix string) (int, error)
}
