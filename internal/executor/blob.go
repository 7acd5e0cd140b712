package executor

import (
	"context"
	"io"

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
	ReaderPuts
	Copies
	Multipart
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

// ReaderPuts is PutIfAbsent from a seekable reader, so the indexed shuffle
// object is put from the partitions' buffers without a copy; unsupported,
// the body is copied into one buffer and put with PutIfAbsent.
type ReaderPuts interface {
	PutReaderIfAbsent(ctx context.Context, key string, body io.ReadSeeker, size int64) error
}

// Copies copies an object server side, if the destination is absent (a
// checkpointed partition of one segment to its output key); unsupported,
// the segment is streamed to the output key as several segments are.
type Copies interface {
	CopyIfAbsent(ctx context.Context, srcKey, dstBucket, dstKey string) error
}

// Multipart streams an output partition to S3 in parts (stream.go).
// CanMultipart is asked before an attempt writes: unsupported, every
// partition is published whole, from memory, after the function returns,
// and the other methods are not called.
type Multipart interface {
	CanMultipart() error
	CreateMultipart(ctx context.Context, key string) (string, error)
	UploadPart(ctx context.Context, key, uploadID string, n int32, body []byte) (blob.CompletedPart, error)
	CompleteMultipartIfAbsent(ctx context.Context, key, uploadID string, parts []blob.CompletedPart) error
	AbortMultipart(ctx context.Context, key, uploadID string) error
}

// Expiry tags objects for the bucket's lifecycle rule to expire (a
// committed task's checkpoints); unsupported, they stay until the job's
// data is deleted.
type Expiry interface {
	MarkUncommitted(ctx context.Context, prefix string) (int, error)
}
