// Package parquetout writes a task attempt's output as one Parquet file
// of a declared schema (spec.StageOutput), for a stage whose output format
// is parquet. The task writes records as every task does, one JSON object
// a line (t.Out in Go, stdout for exec); a Writer takes those bytes in
// place of the output's buffers (output.Output.Encode), turns each line
// into a row and writes row groups to a temporary file as they fill, and
// at publish puts the file at the attempt's output key with
// If-None-Match: *, as every output is put.
//
// A record that does not fit the schema (not a JSON object, a column
// missing or null that is not nullable, a value of the wrong type, a key
// the schema does not have) is a bad record: rejected, when the stage
// allows maxBadRecords, through the attempt's rejections; otherwise the
// attempt fails permanently with an error naming the line and the column.
//
// Memory: the row group being filled (flushed to the file once its
// buffered size reaches RowGroupBytes, 16 MiB by default), the writer's
// page buffer per column (PageBufferSize, 64 KiB) and the longest line
// (at most MaxLine): for a schema of c columns, about 16 MiB + c × 64 KiB
// and a line, whatever the task writes. The file is on local disk (the
// system's temporary directory: /tmp on Lambda and Fargate), removed when
// the attempt ends.
package parquetout

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"

	"github.com/parquet-go/parquet-go"

	"github.com/batchwork/batchwork/internal/executor/feed"
	"github.com/batchwork/batchwork/shared/blob"
	"github.com/batchwork/batchwork/shared/domain"
	"github.com/batchwork/batchwork/shared/spec"
)

// Blob is what a Writer calls on S3 to put its file: from the file as a
// reader, or, unsupported (feed.ErrUnsupported), from memory; in parts
// when the file is over SinglePutBytes and the store can upload in parts.
type Blob interface {
	PutIfAbsent(ctx context.Context, key string, body []byte) error
	PutReaderIfAbsent(ctx context.Context, key string, body io.ReadSeeker, size int64) error
	CanMultipart() error
	CreateMultipart(ctx context.Context, key string) (string, error)
	UploadPart(ctx context.Context, key, uploadID string, n int32, body []byte) (blob.CompletedPart, error)
	CompleteMultipartIfAbsent(ctx context.Context, key, uploadID string, parts []blob.CompletedPart) error
	AbortMultipart(ctx context.Context, key, uploadID string) error
}

// Sizes. Variables, so tests can make row groups and parts small.
var (
	// RowGroupBytes is the buffered size at which a row group is flushed
	// to the file: DuckDB and Spark read a row group per thread, and tens
	// of megabytes a group is what their writers aim at.
	RowGroupBytes int64 = 16 << 20
	// PageBufferSize is the writer's page buffer per column.
	PageBufferSize = 64 << 10
	// SinglePutBytes is the largest file put in one request; larger ones
	// are uploaded in PartBytes parts.
	SinglePutBytes int64 = 64 << 20
	PartBytes            = 8 << 20
)

// MaxLine bounds one record: a longer line fails the attempt.
const MaxLine = 16 << 20

// ErrBadRecord is a record that does not fit the schema, when the stage
// allows no bad records; it wraps domain.ErrPermanent too, since the
// attempt's retry writes the same records.
var ErrBadRecord = errors.New("parquet output: a record does not fit the schema")

// Options are a Writer's settings.
type Options struct {
	// Reject rejects a record that does not fit the schema, as a bad
	// record (the attempt's rejections); an error it returns (past the
	// stage's maxBadRecords) fails the write. Nil: the stage allows none,
	// and the first such record fails the attempt with ErrBadRecord.
	Reject func(record []byte, reason string) error
	// TempDir holds the file; "": os.TempDir().
	TempDir string
}

// Writer turns the JSON lines written to it into a Parquet file. Its
// caller serializes calls (output.Output holds its lock).
type Writer struct {
	cols   []column
	byName map[string]int
	schema *parquet.Schema
	blob   Blob
	opts   Options

	file    *os.File // nil until the first record
	out     *countWriter
	pw      *parquet.Writer
	flushed int64 // pw.Size() after the last flush

	partial []byte // a line not yet ended
	line    int64  // lines seen
	rows    int64
	row     parquet.Row
	err     error // the first failure: every later call returns it
}

// New returns a Writer of the schema's columns (validated: spec.Job.Validate).
func New(schema []spec.Column, b Blob, opts Options) (*Writer, error) {
	w := &Writer{blob: b, opts: opts, byName: make(map[string]int, len(schema))}
	fields := make([]parquet.Field, 0, len(schema))
	for i, c := range schema {
		t, err := spec.ParseColumnType(c.Type)
		if err != nil {
			return nil, fmt.Errorf("parquet output column %q: %w", c.Name, err)
		}
		n := node(t)
		if c.Nullable {
			n = parquet.Optional(n)
		}
		// A one-field group makes the Field; the root keeps the schema's
		// order, where parquet.Group would sort the columns by name.
		fields = append(fields, parquet.Group{c.Name: n}.Fields()[0])
		w.cols = append(w.cols, column{name: c.Name, typ: t, nullable: c.Nullable, index: i})
		w.byName[c.Name] = i
	}
	w.schema = parquet.NewSchema("record", ordered{fields: fields})
	return w, nil
}

// ordered is a group whose fields keep the order they were declared in.
type ordered struct {
	parquet.Group
	fields []parquet.Field
}

func (g ordered) Fields() []parquet.Field { return g.fields }

// Schema is the file's Parquet schema.
func (w *Writer) Schema() *parquet.Schema { return w.schema }

// Rows is how many rows the file holds so far.
func (w *Writer) Rows() int64 { return w.rows }

// Write takes the task's output bytes: each complete line is a record.
func (w *Writer) Write(p []byte) (int, error) {
	if w.err != nil {
		return 0, w.err
	}
	n := len(p)
	for len(p) > 0 {
		i := bytes.IndexByte(p, '\n')
		if i < 0 {
			if len(w.partial)+len(p) > MaxLine {
				return 0, w.fail(fmt.Errorf("parquet output line %d: longer than %d bytes: %w", w.line+1, MaxLine, domain.ErrPermanent))
			}
			w.partial = append(w.partial, p...)
			break
		}
		rec := p[:i]
		if len(w.partial) > 0 {
			if len(w.partial)+i > MaxLine {
				return 0, w.fail(fmt.Errorf("parquet output line %d: longer than %d bytes: %w", w.line+1, MaxLine, domain.ErrPermanent))
			}
			rec = append(w.partial, rec...)
		}
		if err := w.record(rec); err != nil {
			return 0, w.fail(err)
		}
		w.partial = w.partial[:0]
		p = p[i+1:]
	}
	return n, nil
}

func (w *Writer) fail(err error) error {
	w.err = err
	return err
}

// record writes one line as a row, or rejects it.
func (w *Writer) record(rec []byte) error {
	w.line++
	rec = bytes.TrimSuffix(rec, []byte("\r"))
	if len(bytes.TrimSpace(rec)) == 0 {
		return nil // a blank line holds no record
	}
	col, why := w.convert(rec)
	if why != nil {
		reason := fmt.Sprintf("line %d: %v", w.line, why)
		if col != "" {
			reason = fmt.Sprintf("line %d: column %q: %v", w.line, col, why)
		}
		if w.opts.Reject == nil {
			return fmt.Errorf("%w: %s (the stage allows no bad records: maxBadRecords): %w", ErrBadRecord, reason, domain.ErrPermanent)
		}
		return w.opts.Reject(rec, "parquet output "+reason)
	}
	if err := w.open(); err != nil {
		return err
	}
	if _, err := w.pw.WriteRows([]parquet.Row{w.row}); err != nil {
		return fmt.Errorf("parquet output line %d: %w", w.line, err)
	}
	w.rows++
	if size := w.pw.Size(); size-w.flushed >= RowGroupBytes {
		if err := w.pw.Flush(); err != nil {
			return fmt.Errorf("parquet output: flush a row group: %w", err)
		}
		w.flushed = w.pw.Size()
	}
	return nil
}

// convert builds w.row from one record, or says which column (if any)
// does not fit, and why.
func (w *Writer) convert(rec []byte) (string, error) {
	dec := json.NewDecoder(bytes.NewReader(rec))
	dec.UseNumber()
	var m map[string]any
	if err := dec.Decode(&m); err != nil || m == nil {
		return "", fmt.Errorf("not a JSON object (%s)", clip(string(rec)))
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return "", errors.New("holds more than one JSON value")
	}
	row := w.row[:0]
	for _, c := range w.cols {
		v, ok := m[c.name]
		if v == nil {
			if !c.nullable {
				if ok {
					return c.name, errors.New("is null, and the column is not nullable")
				}
				return c.name, errors.New("is missing, and the column is not nullable")
			}
			row = append(row, parquet.NullValue().Level(0, 0, c.index))
			continue
		}
		def := 0
		if c.nullable {
			def = 1
		}
		if c.typ.Kind != spec.ColList {
			pv, err := scalar(c.typ, v)
			if err != nil {
				return c.name, err
			}
			row = append(row, pv.Level(0, def, c.index))
			continue
		}
		arr, ok := v.([]any)
		if !ok {
			return c.name, fmt.Errorf("want a list (an array), got %s", describe(v))
		}
		// The list's repeated level adds one definition level.
		if len(arr) == 0 {
			row = append(row, parquet.NullValue().Level(0, def, c.index))
			continue
		}
		for k, e := range arr {
			if e == nil {
				return c.name, fmt.Errorf("element %d is null; a list's elements may not be", k)
			}
			pv, err := scalar(*c.typ.Elem, e)
			if err != nil {
				return c.name, fmt.Errorf("element %d: %w", k, err)
			}
			rep := 1
			if k == 0 {
				rep = 0
			}
			row = append(row, pv.Level(rep, def+1, c.index))
		}
	}
	if len(m) > len(w.cols) || w.unknown(m) != "" {
		return w.unknown(m), errors.New("is not in the schema")
	}
	w.row = row
	return "", nil
}

// unknown is the first key of m, in order, that is not a column.
func (w *Writer) unknown(m map[string]any) string {
	var keys []string
	for k := range m {
		if _, ok := w.byName[k]; !ok {
			keys = append(keys, k)
		}
	}
	if len(keys) == 0 {
		return ""
	}
	slices.Sort(keys)
	return keys[0]
}

// open creates the file and its writer at the first row.
func (w *Writer) open() error {
	if w.pw != nil {
		return nil
	}
	f, err := os.CreateTemp(w.opts.TempDir, "batchwork-output-*.parquet")
	if err != nil {
		return fmt.Errorf("parquet output: a temporary file: %w", err)
	}
	w.file, w.out = f, &countWriter{w: f}
	w.pw = parquet.NewWriter(w.out, w.schema,
		parquet.Compression(&parquet.Snappy),
		parquet.PageBufferSize(PageBufferSize),
		parquet.CreatedBy("batchwork", "", ""))
	return nil
}

// Flush takes the last line, written without its newline, as a record:
// its error (a record that does not fit, past the stage's maxBadRecords)
// is the attempt's, found while the runner still counts the attempt's
// bad records rather than at publish. Later writes start a new line.
func (w *Writer) Flush() error {
	if w.err != nil {
		return w.err
	}
	if len(w.partial) > 0 {
		if err := w.record(w.partial); err != nil {
			return w.fail(err)
		}
		w.partial = w.partial[:0]
	}
	return nil
}

// Publish ends the last line (Flush), closes the file and puts it at key with
// If-None-Match: *. An object already there is this attempt's own
// earlier put (the key names the attempt), so it counts as written.
func (w *Writer) Publish(ctx context.Context, key string) error {
	if w.err != nil {
		return w.err
	}
	if err := w.Flush(); err != nil {
		return err
	}
	if err := w.open(); err != nil { // a file of no rows: every record was rejected
		return err
	}
	if err := w.pw.Close(); err != nil {
		return w.fail(fmt.Errorf("parquet output: close the file: %w", err))
	}
	err := w.put(ctx, key, w.out.n)
	if errors.Is(err, domain.ErrExists) {
		return nil
	}
	return err
}

func (w *Writer) put(ctx context.Context, key string, size int64) error {
	if size <= SinglePutBytes || w.blob.CanMultipart() != nil {
		err := w.blob.PutReaderIfAbsent(ctx, key, io.NewSectionReader(w.file, 0, size), size)
		if !errors.Is(err, feed.ErrUnsupported) {
			return err
		}
		body := make([]byte, size)
		if _, err := w.file.ReadAt(body, 0); err != nil {
			return fmt.Errorf("parquet output: read the file back: %w", err)
		}
		return w.blob.PutIfAbsent(ctx, key, body)
	}
	id, err := w.blob.CreateMultipart(ctx, key)
	if err != nil {
		return err
	}
	var parts []blob.CompletedPart
	buf := make([]byte, PartBytes)
	for off := int64(0); off < size; off += int64(PartBytes) {
		n, err := w.file.ReadAt(buf, off)
		if err != nil && !errors.Is(err, io.EOF) {
			return w.abort(ctx, key, id, fmt.Errorf("parquet output: read the file back: %w", err))
		}
		part, err := w.blob.UploadPart(ctx, key, id, int32(len(parts)+1), buf[:n])
		if err != nil {
			return w.abort(ctx, key, id, err)
		}
		parts = append(parts, part)
	}
	err = w.blob.CompleteMultipartIfAbsent(ctx, key, id, parts)
	if err != nil {
		// Written before (ErrExists) or failed: nothing of this upload
		// is needed.
		return w.abort(ctx, key, id, err)
	}
	return nil
}

func (w *Writer) abort(ctx context.Context, key, id string, err error) error {
	if aerr := w.blob.AbortMultipart(context.WithoutCancel(ctx), key, id); aerr != nil && !errors.Is(err, domain.ErrExists) {
		return fmt.Errorf("%w (and aborting the upload: %v)", err, aerr)
	}
	return err
}

// ErrClosed is a write or publish after Close: the attempt has ended
// (failed, fenced or abandoned), and a function still running writes for
// nothing.
var ErrClosed = errors.New("parquet output: the attempt's output is closed")

// Close removes the file, published or not, and refuses every later call:
// a function abandoned by its attempt may still write, and a file opened
// then would be left on disk, removed by nobody.
func (w *Writer) Close() error {
	if w.err == nil {
		w.err = ErrClosed
	}
	w.partial = nil
	if w.file == nil {
		return nil
	}
	f := w.file
	w.file, w.out, w.pw = nil, nil, nil
	f.Close()
	return os.Remove(f.Name())
}

type countWriter struct {
	w io.Writer
	n int64
}

func (c *countWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}
