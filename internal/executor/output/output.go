// Package output holds one task attempt's output partitions: buffered
// under a cap, streamed to S3 in multipart uploads once a partition holds
// a part, written as checkpoint segments once the attempt checkpoints, or
// as one indexed object for a shuffle read by Go or exec stages; and
// published, once, after the function returns. The runner
// (internal/executor) owns when each step happens; this package owns what
// the objects hold.
package output

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/batchwork/batchwork/internal/executor/feed"
	"github.com/batchwork/batchwork/shared/blob"
	"github.com/batchwork/batchwork/shared/domain"
)

// Blob is what an Output calls on S3. Every implementation has every
// method: one that lacks a capability says so by returning an error
// wrapping ErrUnsupported, and the Output does without it as each
// capability's comment describes.
type Blob interface {
	PutIfAbsent(ctx context.Context, key string, body []byte) error
	Open(ctx context.Context, bucket, key string, start int64) (io.ReadCloser, error)
	Bucket() string
	ReaderPuts
	Copies
	Multipart
}

// ErrUnsupported is the runner's (feed.ErrUnsupported): one value, so a
// store says "unsupported" the same way to every package that asks it.
var ErrUnsupported = feed.ErrUnsupported

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

// Multipart streams an output partition to S3 in parts. CanMultipart is
// asked before an attempt writes: unsupported, every partition is
// published whole, from memory, after the function returns, and the other
// methods are not called.
type Multipart interface {
	CanMultipart() error
	CreateMultipart(ctx context.Context, key string) (string, error)
	UploadPart(ctx context.Context, key, uploadID string, n int32, body []byte) (blob.CompletedPart, error)
	CompleteMultipartIfAbsent(ctx context.Context, key, uploadID string, parts []blob.CompletedPart) error
	AbortMultipart(ctx context.Context, key, uploadID string) error
}

// ErrOutputTooLarge is returned by an Output's writers once an attempt's
// outputs would pass its cap (the runner's is tuning.MaxTaskOutput).
var ErrOutputTooLarge = errors.New("task output too large")

// PartitionOf is the shuffle partition of key among n.
func PartitionOf(key string, n int) int {
	h := fnv.New32a()
	h.Write([]byte(key))
	return int(h.Sum32() % uint32(n))
}

// DefaultPartSize is the size at which an output partition's buffer is
// uploaded as one part of a multipart upload. 8 MiB: above S3's 5 MiB
// minimum for every part but the last, and 10,000 parts (S3's maximum)
// of it are 80 GB per partition, far more than one task writes.
const DefaultPartSize = 8 << 20

// Output holds an attempt's output partitions. A stage with a shuffle has
// one partition per downstream task; others have one.
//
// How much memory it takes: each partition has a buffer, and every
// buffered byte counts against one cap for the attempt (limit; the
// runner's is tuning.MaxTaskOutput). Once a partition's buffer holds
// partSize bytes it is streamed: uploaded as the next part of a multipart
// upload at the partition's key, and emptied. So one partition can be
// written without bound (a task writing gigabytes holds one part at a
// time), and a write that would pass the cap first streams the fullest
// buffer that S3 would take as a part (minPart, 5 MiB). What cannot be
// streamed is a buffer under 5 MiB: a shuffle with many partitions holds
// each below that, and the cap refuses the write that would pass it. A
// multipart buffer per partition without the cap would cost parts ×
// partSize (256 partitions: 2 GiB) in a 1 GB executor.
//
// Small partitions, which never reach partSize, stay in memory and are
// published with one PutObject (If-None-Match: *) after the function
// returns: one request instead of three. A streamed partition's object
// appears only when its upload is completed, after the function returned
// without error, and the attempt commits only after every partition is
// complete; an attempt that fails, is fenced or loses its lease aborts its
// open uploads (and the bucket's lifecycle rule aborts any left behind,
// after a day).
//
// A shuffle of more than one partition read by Go or exec stages is
// published differently (Index, indexed.go): nothing streams, and
// all partitions are put as one indexed object, unless the cap would be
// passed, when the attempt falls back to the streaming above.
//
// A refused or failed write makes the attempt fail even if the function
// ignores the error. Writes are serialized: a partition being streamed
// holds up writes to the others for the upload of one part.
type Output struct {
	limit    int64 // on buffered bytes; 0: no cap
	partSize int   // stream a buffer once it holds this many bytes
	minPart  int   // S3's minimum part size (tests lower it)

	// key names partition r's object; sink, when set, streams to it
	// (Bind). Without either, Publish cannot name the objects.
	key  func(r int) string
	sink Multipart
	// indexed: the partitions are published as one indexed object
	// (indexed.go) and none streams, until the cap would be passed: then
	// the attempt falls back to the per-part layout, streaming with mp.
	indexed bool
	// ranged: the map output of a range shuffle, sorted and put as one
	// run (ranged.go); nothing streams.
	ranged bool
	mp     Multipart
	ctx    context.Context // the task's: an upload stops when the lease is lost

	mu       sync.Mutex
	parts    []*outPart
	buffered int64 // bytes in buffers now
	peak     int64 // the most buffered at once
	uploaded int   // parts uploaded, all partitions
	err      error // the first refusal or failed upload
	// segments, when active, holds the partitions as checkpoint segments
	// (segments.go).
	segments *segments
	// enc, when set, takes every write instead of the buffers (encoded.go).
	enc Encoder
}

// outPart is one output partition.
type outPart struct {
	buf []byte
	// For the records count: newlines written, the last byte, and how
	// many bytes in all (streamed or not).
	lines int64
	last  byte
	size  int64
	// up is the partition's open multipart upload, nil until it streams
	// and again once completed or aborted.
	up *openUpload
}

type openUpload struct {
	id   string
	done []blob.CompletedPart
}

// New returns the outputs of an attempt with n partitions (at least one),
// buffering at most limit bytes (0: no cap).
func New(n int, limit int64) *Output {
	o := &Output{parts: make([]*outPart, max(n, 1)), limit: limit, partSize: DefaultPartSize, minPart: blob.MinPartSize}
	for i := range o.parts {
		o.parts[i] = &outPart{}
	}
	return o
}

// Bind names the attempt's output objects and, when b can upload in
// parts, lets partitions stream while the task runs; ctx is the task's.
func (o *Output) Bind(ctx context.Context, b Blob, key func(r int) string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.key, o.ctx = key, ctx
	if b.CanMultipart() == nil {
		o.mp = b
		if !o.indexed && !o.ranged {
			o.sink = b
		}
	}
}

// Parts is the number of output partitions.
func (o *Output) Parts() int { return len(o.parts) }

// Part returns the writer of output partition r. For r outside
// [0, Parts()) every write fails, and so does the attempt.
func (o *Output) Part(r int) io.Writer { return partWriter{o, r} }

// Write writes to partition 0.
func (o *Output) Write(p []byte) (int, error) { return o.write(0, p) }

type partWriter struct {
	o *Output
	r int
}

func (w partWriter) Write(p []byte) (int, error) { return w.o.write(w.r, p) }

// Emit writes a key/value record to the partition its key hashes to.
// Records are lines, so keys and values must not contain tabs (keys) or
// newlines. A record is buffered whole or refused whole.
func (o *Output) Emit(key, value string) error {
	if strings.ContainsAny(key, "\t\n") || strings.ContainsRune(value, '\n') {
		return fmt.Errorf("emit %q: keys must not contain tab or newline, values no newline", key)
	}
	n := len(key) + len(value) + 2
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.enc != nil {
		_, err := o.encode(0, []byte(key+"\t"+value+"\n"))
		return err
	}
	r := PartitionOf(key, len(o.parts))
	if err := o.reserve(n); err != nil {
		return err
	}
	p := o.parts[r]
	p.buf = append(p.buf, key...)
	p.buf = append(p.buf, '\t')
	p.buf = append(p.buf, value...)
	p.buf = append(p.buf, '\n')
	p.lines++
	p.last = '\n'
	p.size += int64(n)
	return o.streamIfFull(r)
}

func (o *Output) write(r int, b []byte) (int, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if r < 0 || r >= len(o.parts) {
		// An error, as batchwork.RunTask gives, never an index panic: a
		// write from a goroutine of the function's own would take the
		// whole process down. The attempt fails whatever the function
		// does with it: an output it meant to write is missing.
		err := fmt.Errorf("output partition %d: the task has %d (0 to %d)", r, len(o.parts), len(o.parts)-1)
		if o.ranged {
			err = rangedPartition(r) // ranged.go
		}
		if o.err == nil {
			o.err = err
		}
		return 0, err
	}
	if o.enc != nil {
		return o.encode(r, b)
	}
	if o.sink == nil && (!o.indexed || o.mp == nil) {
		// Nothing streams: the write is buffered or refused whole.
		if err := o.reserve(len(b)); err != nil {
			return 0, err
		}
		o.append(r, b)
		return len(b), nil
	}
	// A long write is taken a part at a time, so even one write of
	// gigabytes needs one part's buffer.
	n := 0
	for len(b) > 0 {
		room := o.partSize // indexed, not streaming (yet): a part at a time
		if o.sink != nil {
			room -= len(o.parts[r].buf)
		}
		k := min(len(b), max(room, 1))
		if err := o.reserve(k); err != nil {
			return n, err
		}
		o.append(r, b[:k])
		n, b = n+k, b[k:]
		if err := o.streamIfFull(r); err != nil {
			return n, err
		}
	}
	return n, nil
}

func (o *Output) append(r int, b []byte) {
	if len(b) == 0 {
		return
	}
	p := o.parts[r]
	p.buf = append(p.buf, b...)
	o.count(p, b) // encoded.go
}

// reserve accounts for n more buffered bytes, streaming full enough
// buffers to make room, or refuses them. o.mu is held.
func (o *Output) reserve(n int) error {
	if o.err != nil {
		return o.err
	}
	for o.limit > 0 && o.buffered+int64(n) > o.limit {
		if o.indexed && o.mp != nil {
			// Too much for one object in memory: the per-part layout,
			// streamed (indexed.go).
			o.indexed, o.sink = false, o.mp
		}
		ok, err := o.streamFullest()
		if err != nil {
			return err
		}
		if !ok {
			o.err = o.tooLarge()
			return o.err
		}
	}
	o.buffered += int64(n)
	o.peak = max(o.peak, o.buffered)
	return nil
}

// tooLarge is the refusal. Streaming or not, the advice holds: with
// streaming, only buffers under S3's minimum part (many shuffle
// partitions, each holding a little) can fill the cap, and a task given
// less to write holds less in each.
func (o *Output) tooLarge() error {
	if o.ranged {
		return rangedTooLarge(o.limit) // ranged.go
	}
	return fmt.Errorf("%w: an attempt may buffer at most %d bytes of outputs in memory before publishing them; "+
		"give each task less to write (a smaller splitSize, or more partitions)", ErrOutputTooLarge, o.limit)
}

// streamIfFull streams partition r once its buffer holds a part.
func (o *Output) streamIfFull(r int) error {
	if o.sink == nil || len(o.parts[r].buf) < o.partSize {
		return nil
	}
	return o.stream(r)
}

// streamFullest streams the fullest buffer S3 would take as a part; false
// when none would.
func (o *Output) streamFullest() (bool, error) {
	if o.sink == nil {
		return false, nil
	}
	best := -1
	for r, p := range o.parts {
		if len(p.buf) >= o.minPart && (best < 0 || len(p.buf) > len(o.parts[best].buf)) {
			best = r
		}
	}
	if best < 0 {
		return false, nil
	}
	return true, o.stream(best)
}

// stream uploads partition r's buffer as its upload's next part, starting
// the upload first if need be, and empties the buffer (its memory goes to
// the garbage collector: a partition that streamed once may never write
// again). A failure fails the attempt. o.mu is held.
func (o *Output) stream(r int) error {
	p := o.parts[r]
	key := o.key(r)
	if p.up == nil {
		id, err := o.sink.CreateMultipart(o.ctx, key)
		if err != nil {
			o.err = fmt.Errorf("stream output partition %d: %w", r, err)
			return o.err
		}
		p.up = &openUpload{id: id}
	}
	if len(p.up.done) >= blob.MaxParts-1 { // keep the last for publish
		o.err = fmt.Errorf("%w: output partition %d passed S3's %d parts of %d bytes", ErrOutputTooLarge, r, blob.MaxParts, o.partSize)
		return o.err
	}
	part, err := o.sink.UploadPart(o.ctx, key, p.up.id, int32(len(p.up.done)+1), p.buf)
	if err != nil {
		o.err = fmt.Errorf("stream output partition %d: %w", r, err)
		return o.err
	}
	p.up.done = append(p.up.done, part)
	o.uploaded++
	o.buffered -= int64(len(p.buf))
	p.buf = nil
	return nil
}

// Publish writes every partition's object after the function returned
// without error: a streamed partition uploads what is left as its last
// part and completes its upload, with If-None-Match: *; the others are
// put whole, with the same condition. An existing object is this
// attempt's own earlier write (the key names the attempt), so it counts
// as written.
func (o *Output) Publish(ctx context.Context, b Blob) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.enc != nil {
		return o.enc.Publish(ctx, o.key(0)) // encoded.go
	}
	if o.segments != nil && o.segments.active {
		return o.publishSegments(ctx, b) // segments.go
	}
	if o.indexed {
		return o.publishIndexed(ctx, b)
	}
	if o.ranged {
		return publishRanged(ctx, o, b) // ranged.go
	}
	for r, p := range o.parts {
		key := o.key(r)
		if p.up == nil {
			if err := b.PutIfAbsent(ctx, key, p.buf); err != nil && !errors.Is(err, domain.ErrExists) {
				return err
			}
			continue
		}
		if len(p.buf) > 0 || len(p.up.done) == 0 {
			part, err := o.sink.UploadPart(ctx, key, p.up.id, int32(len(p.up.done)+1), p.buf)
			if err != nil {
				return fmt.Errorf("last part of output partition %d: %w", r, err)
			}
			p.up.done = append(p.up.done, part)
			o.uploaded++
			o.buffered -= int64(len(p.buf))
			p.buf = nil
		}
		err := o.sink.CompleteMultipartIfAbsent(ctx, key, p.up.id, p.up.done)
		if errors.Is(err, domain.ErrExists) {
			// Nothing of this upload is needed; abort frees its parts.
			err = o.sink.AbortMultipart(ctx, key, p.up.id)
		}
		if err != nil {
			return err
		}
		p.up = nil
	}
	return nil
}

// abortTimeout bounds aborting an attempt's uploads, which runs even when
// the host is shutting down.
const abortTimeout = 10 * time.Second

// Abort aborts the uploads still open: those of an attempt that failed,
// lost its lease or ended with its job, or whose publishing failed.
// Completed uploads are not touched. A failed abort is only logged: the
// bucket's lifecycle rule aborts incomplete uploads after a day.
func (o *Output) Abort(ctx context.Context, log *slog.Logger) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.enc != nil {
		if err := o.enc.Close(); err != nil {
			log.Warn("release the encoded output", "err", err)
		}
	}
	var cancel context.CancelFunc
	for r, p := range o.parts {
		if p.up == nil {
			continue
		}
		if cancel == nil {
			// Made only when an upload is open: most attempts have none,
			// and every attempt ends here.
			ctx, cancel = context.WithTimeout(context.WithoutCancel(ctx), abortTimeout)
			defer cancel()
		}
		if err := o.sink.AbortMultipart(ctx, o.key(r), p.up.id); err != nil {
			log.Warn("abort an output upload", "partition", r, "err", err)
		}
		p.up = nil
	}
}

// Refused is the first write refused, or upload failed, if any: the
// attempt's outputs are incomplete and it must not commit.
func (o *Output) Refused() error {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.err
}

// Records is the number of lines written to all partitions, counted as
// they were written (streamed parts are no longer in memory); a final
// line without a newline counts too.
func (o *Output) Records() int64 {
	o.mu.Lock()
	defer o.mu.Unlock()
	var n int64
	for _, p := range o.parts {
		n += p.lines
		if p.size > 0 && p.last != '\n' {
			n++
		}
	}
	return n
}

// BufferedPeak is the most bytes the outputs held in memory at once.
func (o *Output) BufferedPeak() int64 {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.peak
}

// UploadedParts is how many parts the outputs uploaded in multipart
// uploads (0 when every partition was put whole).
func (o *Output) UploadedParts() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.uploaded
}

// Buffered is the bytes the outputs hold in memory now.
func (o *Output) Buffered() int64 {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.buffered
}

// Limit is the cap on buffered bytes (0: none).
func (o *Output) Limit() int64 { return o.limit }

// SetPartSizes sets the size at which a buffer streams and S3's minimum
// part: tests lower them to stream a few bytes at a time.
func (o *Output) SetPartSizes(part, minPart int) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.partSize, o.minPart = part, minPart
}

// Unwritten reports an output of one partition that was never written to
// and started no upload: an attempt with nothing to publish.
func (o *Output) Unwritten() bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	if len(o.parts) != 1 {
		return false
	}
	p := o.parts[0]
	return p.size == 0 && p.up == nil && len(p.buf) == 0
}
