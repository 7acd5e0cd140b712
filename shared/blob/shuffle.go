package blob

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net/http"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/smithy-go"

	"github.com/batchwork/batchwork/shared/domain"
)

// Indexed shuffle objects: how a map task writes all of its shuffle
// partitions with one PUT (as Locus and Exoshuffle do), whatever the
// number of reducers. The object is the attempt's output part 0
// (OutputKey(..., 0)), written once with If-None-Match: * like every
// output, and the task commits one output; its bytes are
//
//	"BWSHUF1\n"                 magic, 8 bytes
//	P                           uint32, big-endian: the partitions it holds
//	0                           uint32, reserved
//	off[0] ... off[P]           P+1 uint64, big-endian: absolute offsets
//	partition 0 ... P-1         partition r is bytes [off[r], off[r+1])
//
// so off[0] is ShuffleHeaderLen(P) and off[P] the object's size. A reducer
// r reads the index from the front of the object, only as far as off[r+1]
// (ShuffleIndexPrefix), then its slice with a ranged GET. The first GET
// reads some bytes past the index as well (a read-ahead): a small map
// output, or a slice that lies in the read-ahead, costs one GET, and an
// empty slice never costs a second.
//
// Why the index is in the object and not in the manifest: a manifest
// entry per map task carrying its P+1 offsets would let a reducer skip
// the index read, but the offsets would have to travel through the
// commit into the task record (P = 10,000 partitions, spec's maximum, is
// 80 KB per record: 80 WCU per commit where a commit is a few) and the
// manifest would grow with maps × reducers: one page of ManifestPageSize
// outputs would hold 10,000 × 10,000 offsets, and every reducer would read
// every page, all offsets, to use two per map. With the index in the
// object the record, the commit and the manifest stay as they were (one
// output per map task, with its key), a manifest page stays ~1.5 MB, and
// a reducer reads 8 × (r+2) bytes of each map's index.
//
// Which layout a map task's outputs have is known from the manifest alone:
// a shuffle stage of P > 1 partitions commits either P outputs, one object
// per partition (the per-part layout, which every release before this one
// wrote, and which a stage feeding a lambda stage, or a map task whose
// buffered outputs outgrew the memory cap, still writes), or one indexed
// object (ShuffleIndexed). With P = 1 there is nothing to index: the one
// object is the partition, as before. A map task that wrote nothing
// commits no output at all. The control plane writes a shuffle stage's
// manifest so that readers of the previous release, which would take an
// indexed object for partition 0, fail to read it
// (ManifestWriter.IndexedShuffle); readers of this one decide per map
// task, so manifests and objects of either layout, or both, read right.
const ShuffleMagic = "BWSHUF1\n"

// ShuffleHeaderLen is the size of the magic, the count and the offsets of
// an indexed object of parts partitions: where partition 0 starts.
func ShuffleHeaderLen(parts int) int64 { return 16 + 8*int64(parts+1) }

// ShuffleIndexPrefix is how many bytes from the front of an indexed object
// hold what a reader of partition r needs: the magic, the count and
// offsets 0 to r+1.
func ShuffleIndexPrefix(r int) int64 { return 16 + 8*int64(r+2) }

// ShuffleIndexed reports whether a map task of a shuffle stage of parts
// partitions that committed outputs objects wrote one indexed object.
func ShuffleIndexed(parts, outputs int) bool { return parts > 1 && outputs == 1 }

// ErrBadShuffleObject: an object listed as an indexed shuffle object does
// not hold the index this package writes.
var ErrBadShuffleObject = errors.New("malformed indexed shuffle object")

// ShuffleBody is the indexed object holding parts, in order: a reader
// over the partitions' own buffers and a header, so writing it copies
// nothing (the object may be as large as the outputs an attempt may
// buffer, and a copy would double the memory). Seekable, as the SDK needs
// to sign and retry a PUT.
func ShuffleBody(parts [][]byte) (*io.SectionReader, int64) {
	head := make([]byte, ShuffleHeaderLen(len(parts)))
	copy(head, ShuffleMagic)
	binary.BigEndian.PutUint32(head[8:], uint32(len(parts)))
	off := int64(len(head))
	segs := make([][]byte, 0, len(parts)+1)
	segs = append(segs, head)
	for r, p := range parts {
		binary.BigEndian.PutUint64(head[16+8*r:], uint64(off))
		off += int64(len(p))
		if len(p) > 0 {
			segs = append(segs, p)
		}
	}
	binary.BigEndian.PutUint64(head[16+8*len(parts):], uint64(off))
	return io.NewSectionReader(segments(segs), 0, off), off
}

// segments reads byte slices as one.
type segments [][]byte

func (s segments) ReadAt(p []byte, off int64) (int, error) {
	n := 0
	for _, seg := range s {
		if len(p) == 0 {
			break
		}
		if off >= int64(len(seg)) {
			off -= int64(len(seg))
			continue
		}
		k := copy(p, seg[off:])
		n, p, off = n+k, p[k:], 0
	}
	if len(p) > 0 {
		return n, io.EOF
	}
	return n, nil
}

// ShuffleRange is partition r's byte range [start, end) in an indexed
// object of parts partitions, from head, the object's first bytes (at
// least ShuffleIndexPrefix(r) of them).
func ShuffleRange(head []byte, parts, r int) (start, end int64, err error) {
	if r < 0 || r >= parts {
		return 0, 0, fmt.Errorf("partition %d of %d: %w", r, parts, ErrBadShuffleObject)
	}
	if int64(len(head)) < ShuffleIndexPrefix(r) {
		return 0, 0, fmt.Errorf("%d bytes, too short for the index of partition %d: %w", len(head), r, ErrBadShuffleObject)
	}
	if string(head[:8]) != ShuffleMagic {
		return 0, 0, fmt.Errorf("no magic: %w", ErrBadShuffleObject)
	}
	if n := binary.BigEndian.Uint32(head[8:]); int(n) != parts {
		return 0, 0, fmt.Errorf("holds %d partitions, want %d: %w", n, parts, ErrBadShuffleObject)
	}
	s := binary.BigEndian.Uint64(head[16+8*r:])
	e := binary.BigEndian.Uint64(head[24+8*r:])
	if s < uint64(ShuffleHeaderLen(parts)) || e < s || e > 1<<62 {
		return 0, 0, fmt.Errorf("partition %d at [%d, %d): %w", r, s, e, ErrBadShuffleObject)
	}
	return int64(s), int64(e), nil
}

// RangeGetter reads the bytes [start, end) of an object of the store's
// bucket; fewer when the object ends before end.
type RangeGetter interface {
	OpenRange(ctx context.Context, key string, start, end int64) (io.ReadCloser, error)
}

var _ RangeGetter = (*Store)(nil)

// OpenRange implements RangeGetter with one ranged GET.
func (s *Store) OpenRange(ctx context.Context, key string, start, end int64) (io.ReadCloser, error) {
	if end <= start {
		return io.NopCloser(bytes.NewReader(nil)), nil
	}
	out, err := s.api.GetObject(ctx, &s3.GetObjectInput{
		Bucket: &s.bucket, Key: &key, Range: aws.String(fmt.Sprintf("bytes=%d-%d", start, end-1)),
	})
	if err != nil {
		var ae smithy.APIError
		if errors.As(err, &ae) && ae.ErrorCode() == "NoSuchKey" {
			return nil, fmt.Errorf("get s3://%s/%s: %w", s.bucket, key, domain.ErrNotFound)
		}
		return nil, fmt.Errorf("get s3://%s/%s bytes %d-%d: %w", s.bucket, key, start, end-1, err)
	}
	return out.Body, nil
}

// PutReaderIfAbsent is PutIfAbsent with the body read from body (size
// bytes), which the SDK may seek to sign or to retry.
func (s *Store) PutReaderIfAbsent(ctx context.Context, key string, body io.ReadSeeker, size int64) error {
	for try := 0; ; try++ {
		if _, err := body.Seek(0, io.SeekStart); err != nil {
			return err
		}
		_, err := s.api.PutObject(ctx, &s3.PutObjectInput{
			Bucket: &s.bucket, Key: &key, Body: body,
			IfNoneMatch: aws.String("*"), ContentLength: aws.Int64(size),
		})
		switch code := httpStatus(err); {
		case err == nil:
			return nil
		case code == http.StatusPreconditionFailed:
			return fmt.Errorf("put s3://%s/%s: %w", s.bucket, key, domain.ErrExists)
		case code == http.StatusConflict && try < 3:
			continue
		default:
			return fmt.Errorf("put s3://%s/%s: %w", s.bucket, key, err)
		}
	}
}

// DefaultShuffleReadAhead is how many bytes past its index a reducer's
// first GET of an indexed object asks for: an object (or a slice) within
// it is read with that one request. Data transfer inside a region costs
// nothing; a request costs the same for 16 bytes as for 64 KiB.
const DefaultShuffleReadAhead = 64 << 10

// OpenShuffleSlice reads partition r of the indexed object at key, which
// holds parts partitions: one ranged GET for the index up to r and
// readAhead bytes more, and a second only for what of the slice lies
// beyond them (none for an empty slice).
func OpenShuffleSlice(ctx context.Context, g RangeGetter, key string, parts, r int, readAhead int64) (io.ReadCloser, error) {
	head, err := ReadShuffleHead(ctx, g, key, r, readAhead)
	if err != nil {
		return nil, err
	}
	start, end, err := ShuffleRange(head, parts, r)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", key, err)
	}
	return OpenShuffleRange(ctx, g, key, head, start, end)
}

// ReadShuffleHead is the first GET of OpenShuffleSlice: the object's
// first ShuffleIndexPrefix(r) + readAhead bytes, or all of it if shorter.
func ReadShuffleHead(ctx context.Context, g RangeGetter, key string, r int, readAhead int64) ([]byte, error) {
	want := ShuffleIndexPrefix(r) + max(readAhead, 0)
	rc, err := g.OpenRange(ctx, key, 0, want)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	head, err := io.ReadAll(io.LimitReader(rc, want))
	if err != nil {
		return nil, fmt.Errorf("read the index of %s: %w", key, err)
	}
	return head, nil
}

// ShuffleOffsets is the whole index (P+1 offsets) of an indexed object of
// parts partitions, if head, its first bytes, holds all of it.
func ShuffleOffsets(head []byte, parts int) ([]int64, bool) {
	if int64(len(head)) < ShuffleHeaderLen(parts) {
		return nil, false
	}
	offs := make([]int64, parts+1)
	for r := range parts {
		s, e, err := ShuffleRange(head, parts, r)
		if err != nil {
			return nil, false
		}
		offs[r], offs[r+1] = s, e
	}
	return offs, true
}

// OpenShuffleRange reads bytes [start, end) of the indexed object at key:
// from head, its first bytes, as far as they go (head may be nil), and
// the rest with one ranged GET; no GET for an empty range. A body that
// ends early is an error.
func OpenShuffleRange(ctx context.Context, g RangeGetter, key string, head []byte, start, end int64) (io.ReadCloser, error) {
	have := int64(len(head))
	if end == start {
		return io.NopCloser(bytes.NewReader(nil)), nil // an empty slice: no GET
	}
	if end <= have {
		return io.NopCloser(bytes.NewReader(head[start:end])), nil
	}
	var first []byte
	if start < have {
		first, start = head[start:], have
	}
	rest, err := g.OpenRange(ctx, key, start, end)
	if err != nil {
		return nil, err
	}
	return &sliceReader{Reader: io.MultiReader(bytes.NewReader(first), io.LimitReader(rest, end-start)), rest: rest,
		want: end - start + int64(len(first)), key: key}, nil
}

// sliceReader is a slice read in two parts; it checks the object held
// all of it (a short body is an error, not a short partition).
type sliceReader struct {
	io.Reader
	rest io.Closer
	want int64
	got  int64
	key  string
}

func (s *sliceReader) Read(p []byte) (int, error) {
	n, err := s.Reader.Read(p)
	s.got += int64(n)
	if err == io.EOF && s.got != s.want {
		return n, fmt.Errorf("%s: slice ended after %d of %d bytes: %w", s.key, s.got, s.want, ErrBadShuffleObject)
	}
	return n, err
}

func (s *sliceReader) Close() error { return s.rest.Close() }
