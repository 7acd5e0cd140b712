package split

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"strings"

	"github.com/klauspost/compress/zstd"
)

// Input formats (a stage's partitions.input.format).
const (
	// Lines: a record is a line of text (the default).
	Lines = "lines"
	// JSONL: JSON Lines, one JSON value per line. Each record is checked
	// when read; blank lines are skipped.
	JSONL = "jsonl"
	// CSV: RFC 4180, with a header row. A quoted field may hold commas,
	// quotes ("") and newlines, so a record may span lines.
	CSV = "csv"
	// Parquet: a record is a row of a Parquet file, read as one JSON
	// object on a line (shared/split/parquet). A split owns the row groups
	// that start in its range.
	Parquet = "parquet"
)

// Formats lists the input formats, default first.
var Formats = []string{Lines, JSONL, CSV, Parquet}

// Compression codecs, named by the object's suffix.
const (
	Gzip = "gzip" // .gz
	Zstd = "zstd" // .zst
)

// Compression returns the codec an object's name implies: Gzip for .gz,
// Zstd for .zst (any case), "" for an uncompressed object. A compressed
// object is one whole-file split: its stream can be decoded only from
// its start.
func Compression(key string) string {
	k := strings.ToLower(key)
	switch {
	case strings.HasSuffix(k, ".gz"):
		return Gzip
	case strings.HasSuffix(k, ".zst"):
		return Zstd
	}
	return ""
}

// Limits on what one split may read. Each bounds an attack or a mistake
// whose cost would otherwise be unbounded memory or time.
const (
	// DefaultMaxDecompressed caps the bytes a compressed split may
	// decompress to: a small "bomb" (gzip compresses zeros about 1000:1)
	// must fail with a clear error, not run a task for hours. Sixteen
	// times the largest uncompressed split (spec.MaxSplitSize) leaves room
	// for well-compressed real data.
	DefaultMaxDecompressed = 4 << 30
	// MaxHeader caps a CSV header record, read whole into memory.
	MaxHeader = 1 << 20
	// MaxJSONRecord caps a JSON Lines record, held whole to be checked.
	MaxJSONRecord = 16 << 20
	// DefaultLookahead is how far past a CSV split's start the reader
	// looks to settle whether the start lies inside a quoted field (see
	// csvInsideQuotes).
	DefaultLookahead = 256 << 10
)

// Options say how to read a split.
type Options struct {
	// Format is one of Formats; "" means Lines.
	Format string
	// MaxDecompressed overrides DefaultMaxDecompressed (tests).
	MaxDecompressed int64
	// Lookahead overrides DefaultLookahead (tests).
	Lookahead int
	// Cut, when set, lets the caller give away the unread rest of the
	// split while it is read (cut.go). Only an uncompressed object's
	// split can be cut.
	Cut *Cut
	// Columns, for Parquet, are the top-level columns to read; none means
	// all of them.
	Columns []string
	// Size gives a Parquet object's size; Parquet needs it.
	Size SizeFunc
}

// ErrUnknownFormat is returned for a format not in Formats.
var ErrUnknownFormat = errors.New("not a format")

// ErrTooLarge is returned when a compressed split decompresses to more
// than its cap.
var ErrTooLarge = errors.New("decompressed input too large")

// OpenFormat returns a stream of exactly the records split s owns, in the
// given format, and for CSV the object's header (its first record, which
// no split's stream includes; nil if the object has none).
//
// Lines and JSON Lines records are lines, as with Open; a JSON Lines
// record that is not valid JSON ends the stream with an error naming the
// object, the record's byte offset and the problem. CSV records are the
// raw bytes of the records, so csv.NewReader reads them; a split that
// starts inside a quoted field skips to the first record that starts in
// its range. Parquet records are rows, each a JSON object on a line, of
// the row groups that start in the range; a Parquet object named as
// compressed is refused.
//
// A compressed object (Compression) is decompressed; its whole stream
// belongs to the split that starts at 0 (Plan makes no other), and
// decompressing more than Options.MaxDecompressed bytes fails the stream
// with ErrTooLarge. The caller must Close the result.
func OpenFormat(ctx context.Context, open RangeOpener, s Split, o Options) (io.ReadCloser, []string, error) {
	if s.Start < 0 || s.End < s.Start {
		return nil, nil, fmt.Errorf("split: invalid range [%d, %d) of %q", s.Start, s.End, s.Key)
	}
	format := o.Format
	switch format {
	case "":
		format = Lines
	case Lines, JSONL, CSV, Parquet:
	default:
		return nil, nil, fmt.Errorf("split: %q is %w; want %s", o.Format, ErrUnknownFormat, strings.Join(Formats, ", "))
	}
	if s.Start == s.End {
		return &lineReader{done: true, err: io.EOF}, nil, nil
	}
	if format == Parquet {
		rc, err := openParquet(ctx, open, s, o) // parquet.go
		return rc, nil, err
	}
	if codec := Compression(s.Key); codec != "" {
		return openCompressed(ctx, open, s, codec, format, o)
	}
	switch format {
	case CSV:
		rc, h, err := openCSV(ctx, open, s, o)
		if lr, ok := rc.(*lineReader); ok && err == nil {
			lr.attachCut(o.Cut, s.Start)
		}
		return rc, h, err
	default:
		r, err := openRange(ctx, open, s, false, 0)
		if err != nil {
			return nil, nil, err
		}
		if s.Start > 0 {
			if err := r.skipPartialLine(); err != nil {
				r.Close()
				return nil, nil, fmt.Errorf("split: read %q at %d: %w", s.Key, s.Start-1, err)
			}
		}
		r.attachCut(o.Cut, s.Start)
		if format == JSONL {
			return newJSONL(r, s.Key, r.pos, false), nil, nil
		}
		return r, nil, nil
	}
}

// openCompressed decompresses the whole object for the split at 0.
func openCompressed(ctx context.Context, open RangeOpener, s Split, codec, format string, o Options) (io.ReadCloser, []string, error) {
	if s.Start > 0 {
		// Only a plan made before compressed objects were whole-file
		// splits cuts one; its first split reads the whole stream.
		return &lineReader{done: true, err: io.EOF}, nil, nil
	}
	body, err := open(ctx, s.Key, 0)
	if err != nil {
		return nil, nil, fmt.Errorf("split: open %q: %w", s.Key, err)
	}
	var dec io.Reader
	closers := []io.Closer{body}
	src := &watchedReader{r: body}
	switch codec {
	case Gzip:
		z, err := gzip.NewReader(src)
		if err != nil {
			body.Close()
			err = fmt.Errorf("split: %q is named .gz but is not gzip data: %w", s.Key, err)
			if src.ok() && ctx.Err() == nil {
				err = corrupt(err)
			}
			return nil, nil, err
		}
		dec, closers = z, []io.Closer{z, body}
	case Zstd:
		// One goroutine and a bounded window: a task decodes one stream,
		// and the frame header must not make it allocate gigabytes.
		z, err := zstd.NewReader(src, zstd.WithDecoderConcurrency(1), zstd.WithDecoderMaxWindow(128<<20))
		if err != nil {
			body.Close()
			return nil, nil, fmt.Errorf("split: read zstd %q: %w", s.Key, err)
		}
		dec, closers = z, []io.Closer{z.IOReadCloser(), body}
	}
	limit := o.MaxDecompressed
	if limit <= 0 {
		limit = DefaultMaxDecompressed
	}
	r := &lineReader{
		ctx: ctx,
		rc: struct {
			io.Reader
			io.Closer
		}{dec, multiCloser(closers)},
		br:  bufio.NewReaderSize(&capReader{ctx: ctx, r: dec, src: src, left: limit, key: s.Key, limit: limit}, bufSize),
		end: math.MaxInt64, // the whole stream
		csv: format == CSV,
	}
	switch format {
	case JSONL:
		return newJSONL(r, s.Key, 0, true), nil, nil
	case CSV:
		h, err := r.readHeader(s.Key)
		if err != nil {
			r.Close()
			return nil, nil, err
		}
		return r, h, nil
	}
	return r, nil, nil
}

type multiCloser []io.Closer

func (m multiCloser) Close() error {
	var errs []error
	for _, c := range m {
		errs = append(errs, c.Close())
	}
	return errors.Join(errs...)
}

// capReader fails once more than limit bytes have been read through it.
type capReader struct {
	ctx         context.Context
	r           io.Reader
	src         *watchedReader // what r decompresses
	left, limit int64
	key         string
}

func (c *capReader) Read(p []byte) (int, error) {
	if int64(len(p)) > c.left+1 {
		p = p[:c.left+1] // one byte more than allowed tells "over" from "exactly"
	}
	n, err := c.r.Read(p)
	c.left -= int64(n)
	if c.left < 0 {
		return 0, fmt.Errorf("split: %q decompresses to more than %d bytes: %w; split it into smaller files", c.key, c.limit, ErrTooLarge)
	}
	if err != nil {
		err = decodeError(c.ctx, c.src, c.key, err)
	}
	return n, err
}

// openCSV opens a CSV split of an uncompressed object.
func openCSV(ctx context.Context, open RangeOpener, s Split, o Options) (io.ReadCloser, []string, error) {
	look := o.Lookahead
	if look <= 0 {
		look = DefaultLookahead
	}
	if s.Start == 0 {
		r, err := openRange(ctx, open, s, true, 0)
		if err != nil {
			return nil, nil, err
		}
		h, err := r.readHeader(s.Key)
		if err != nil {
			r.Close()
			return nil, nil, err
		}
		return r, h, nil
	}
	// Every split reports the header; it is the object's first record,
	// which a small read of the object's start finds.
	h, headerEnd, err := readCSVHeader(ctx, open, s.Key)
	if err != nil {
		return nil, nil, err
	}
	r, err := openRange(ctx, open, s, true, look)
	if err != nil {
		return nil, nil, err
	}
	fail := func(err error) (io.ReadCloser, []string, error) {
		r.Close()
		return nil, nil, fmt.Errorf("split: read %q at %d: %w", s.Key, s.Start-1, err)
	}
	inside, err := r.csvInsideQuotes(open, s.Key, look)
	if err != nil {
		return fail(err)
	}
	r.odd = inside
	if err := r.skipPartialLine(); err != nil {
		return fail(err)
	}
	if !r.done && r.pos < headerEnd {
		// The split starts in the blank lines before the header, or in
		// the header itself: its records start after the header.
		n, err := r.br.Discard(int(headerEnd - r.pos))
		r.pos += int64(n)
		if err != nil && !errors.Is(err, io.EOF) {
			return fail(err)
		}
		if errors.Is(err, io.EOF) || r.pos >= r.end {
			r.finish(io.EOF)
		}
	}
	return r, h, nil
}

// readCSVHeader reads the header of a CSV object, and the offset just
// past it.
func readCSVHeader(ctx context.Context, open RangeOpener, key string) ([]string, int64, error) {
	rc, err := open(ctx, key, 0)
	if err != nil {
		return nil, 0, fmt.Errorf("split: open %q: %w", key, err)
	}
	r := &lineReader{ctx: ctx, rc: rc, br: bufio.NewReaderSize(rc, minBufSize), end: math.MaxInt64, csv: true}
	defer r.Close()
	h, err := r.readHeader(key)
	return h, r.pos, err
}

// readHeader reads the first record of a CSV stream positioned at its
// start, as encoding/csv does: blank lines before it are skipped, and a
// UTF-8 byte order mark is dropped. At the end of the stream it finishes
// r, so a header-only object has no records.
func (r *lineReader) readHeader(key string) ([]string, error) {
	var rec []byte
	for {
		chunk, err := r.br.ReadSlice('\n')
		r.pos += int64(len(chunk))
		r.countQuotes(chunk)
		rec = append(rec, chunk...)
		if len(rec) > MaxHeader {
			return nil, corrupt(fmt.Errorf("split: csv %q: the header record is longer than %d bytes", key, MaxHeader))
		}
		atEOF := errors.Is(err, io.EOF)
		if err != nil && !atEOF && !errors.Is(err, bufio.ErrBufferFull) {
			return nil, fmt.Errorf("split: csv %q: read header: %w", key, err)
		}
		if atEOF {
			r.finish(io.EOF)
		}
		if !r.endsRecord(chunk) && !atEOF {
			continue
		}
		if blankLine(rec) && !atEOF {
			rec = rec[:0] // not a record
			continue
		}
		rec = bytes.TrimPrefix(rec, bom)
		if blankLine(rec) {
			return nil, nil // no records at all
		}
		cr := csv.NewReader(bytes.NewReader(rec))
		cr.FieldsPerRecord = -1
		h, err := cr.Read()
		if err != nil {
			return nil, corrupt(fmt.Errorf("split: csv %q: header: %w", key, err))
		}
		return h, nil
	}
}

// blankLine reports whether rec, a record's bytes, is a line encoding/csv
// skips: an empty one (a trailing '\r' is dropped at the end of input).
func blankLine(rec []byte) bool {
	switch string(rec) {
	case "", "\n", "\r\n", "\r":
		return true
	}
	return false
}

// bom is the UTF-8 byte order mark, which some editors start a file with.
var bom = []byte("\uFEFF")

// csvInsideQuotes settles whether r, opened one byte before a split's
// start, is inside a quoted field there.
//
// It speculates, after Ge et al., "Speculative Distributed CSV Data
// Parsing for Big Data Analytics" (SIGMOD 2019): it runs a strict RFC 4180
// parser over the next look bytes from both states, outside and inside
// quotes. The true state never meets a syntax error in a valid file, so
// if exactly one hypothesis survives, it is the truth. If both survive
// (say, no quotes in the window at all) or neither does (the file is not
// valid CSV), it counts the quotes from the object's start, which is
// exact and costs a read of the object up to here.
func (r *lineReader) csvInsideQuotes(open RangeOpener, key string, look int) (bool, error) {
	win, err := r.br.Peek(look)
	atEOF := errors.Is(err, io.EOF)
	if err != nil && !atEOF {
		return false, err
	}
	if inside, ok := speculate(win, atEOF); ok {
		return inside, nil
	}
	return oddQuotesBefore(r.ctx, open, key, r.pos)
}

// States of a strict RFC 4180 parser, as encoding/csv (without
// LazyQuotes) accepts it.
type csvState uint8

const (
	sFieldStart csvState = iota // at the start of a field
	sUnquoted                   // in a field that did not start with a quote
	sQuoted                     // in a quoted field
	sQuote                      // in a quoted field, just after a quote: closing, or the first of ""
	sQuoteCR                    // a closing quote and '\r': only '\n' may follow
	sBad                        // a syntax error
)

func step(s csvState, c byte) csvState {
	switch s {
	case sFieldStart, sUnquoted:
		switch c {
		case '"':
			if s == sFieldStart {
				return sQuoted
			}
			return sBad // a bare quote in an unquoted field
		case ',', '\n':
			return sFieldStart
		}
		return sUnquoted
	case sQuoted:
		if c == '"' {
			return sQuote
		}
		return sQuoted
	case sQuote:
		switch c {
		case '"':
			return sQuoted
		case ',', '\n':
			return sFieldStart
		case '\r':
			return sQuoteCR
		}
		return sBad // text after a closing quote
	case sQuoteCR:
		if c == '\n' {
			return sFieldStart
		}
	}
	return sBad
}

// speculate runs the parser over win from every state: sQuoted is
// "inside quotes", the others "outside". It returns whether the start of
// win is inside quotes, and whether exactly one of the two survived. A
// stream that ends (atEOF) inside a quoted field is an error.
func speculate(win []byte, atEOF bool) (inside, ok bool) {
	out := []csvState{sFieldStart, sUnquoted, sQuote, sQuoteCR}
	in := sQuoted
	outAlive, whole := true, true
	for _, c := range win {
		outAlive = false
		for k, s := range out {
			if s != sBad {
				out[k] = step(s, c)
				outAlive = outAlive || out[k] != sBad
			}
		}
		if in != sBad {
			in = step(in, c)
		}
		if !outAlive && in == sBad {
			whole = false
			break // neither survived: not valid CSV
		}
	}
	if atEOF && whole {
		if in == sQuoted {
			in = sBad
		}
		alive := false
		for _, s := range out {
			alive = alive || (s != sBad && s != sQuoted)
		}
		outAlive = outAlive && alive
	}
	inAlive := in != sBad
	return inAlive, inAlive != outAlive
}

// oddQuotesBefore reports whether an odd number of quotes precede offset
// n of the object: whether n lies inside a quoted field.
func oddQuotesBefore(ctx context.Context, open RangeOpener, key string, n int64) (bool, error) {
	rc, err := open(ctx, key, 0)
	if err != nil {
		return false, fmt.Errorf("open %q to count quotes: %w", key, err)
	}
	defer rc.Close()
	buf := make([]byte, bufSize)
	var quotes int
	lr := io.LimitReader(rc, n)
	for read := int64(0); read < n; {
		if err := ctx.Err(); err != nil {
			return false, err
		}
		k, err := lr.Read(buf)
		quotes += bytes.Count(buf[:k], quote)
		read += int64(k)
		if errors.Is(err, io.EOF) && read < n {
			return false, fmt.Errorf("count quotes in %q: %w", key, io.ErrUnexpectedEOF)
		}
		if err != nil && !errors.Is(err, io.EOF) {
			return false, fmt.Errorf("count quotes in %q: %w", key, err)
		}
	}
	return quotes%2 == 1, nil
}

// jsonlReader passes through the lines of src, each checked to be one
// JSON value. Blank lines are dropped: they are not records.
type jsonlReader struct {
	src        io.ReadCloser
	br         *bufio.Reader
	key        string
	off        int64 // offset of the next line in the object (or stream)
	compressed bool
	line       []byte // the checked line being returned
	rest       []byte // what of line is left to return
	err        error
}

func newJSONL(src io.ReadCloser, key string, off int64, compressed bool) *jsonlReader {
	return &jsonlReader{src: src, br: bufio.NewReaderSize(src, bufSize), key: key, off: off, compressed: compressed}
}

func (j *jsonlReader) Read(p []byte) (int, error) {
	for len(j.rest) == 0 {
		if j.err != nil {
			return 0, j.err
		}
		j.err = j.next()
	}
	n := copy(p, j.rest)
	j.rest = j.rest[n:]
	return n, nil
}

// next reads and checks the next non-blank line into rest.
func (j *jsonlReader) next() error {
	for {
		j.line = j.line[:0]
		var err error
		for {
			var chunk []byte
			chunk, err = j.br.ReadSlice('\n')
			j.line = append(j.line, chunk...)
			if len(j.line) > MaxJSONRecord {
				return corrupt(fmt.Errorf("jsonl: %s: the record is longer than %d bytes", j.where(), MaxJSONRecord))
			}
			if !errors.Is(err, bufio.ErrBufferFull) {
				break
			}
		}
		if err != nil && !errors.Is(err, io.EOF) {
			return err
		}
		at := j.off
		j.off += int64(len(j.line))
		if at == 0 {
			j.line = bytes.TrimPrefix(j.line, bom) // as some editors write
		}
		if v := bytes.TrimSpace(j.line); len(v) > 0 {
			if !json.Valid(v) {
				var raw json.RawMessage
				problem := json.Unmarshal(v, &raw)
				if problem == nil {
					problem = errors.New("not a single JSON value")
				}
				j.off = at
				return corrupt(fmt.Errorf("jsonl: %s: invalid JSON: %w", j.where(), problem))
			}
			j.rest = j.line
			return err // nil, or io.EOF after the last line
		}
		if err != nil {
			return err
		}
	}
}

func (j *jsonlReader) where() string {
	if j.compressed {
		return fmt.Sprintf("object %q, record at byte %d of the decompressed data", j.key, j.off)
	}
	return fmt.Sprintf("object %q, record at byte %d", j.key, j.off)
}

func (j *jsonlReader) Close() error { return j.src.Close() }
