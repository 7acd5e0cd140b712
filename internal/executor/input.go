package executor

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/batchwork/batchwork/shared/spec"
	"github.com/batchwork/batchwork/shared/split"
)

// openInput opens the split of an S3 input that a task reads, in the
// stage's input format, and sets the task's Format and Header (a CSV
// input's column names). A Parquet input's records are its rows as JSON
// objects. Records are checked as the function reads them:
// a JSON Lines record that is not JSON ends the input with an error that
// names the object, the offset and the problem.
func (r *Runner) openInput(ctx context.Context, in *spec.Input, s split.Split, t *Task) (io.ReadCloser, error) {
	bucket, _, err := spec.ParseS3URI(in.Prefix)
	if err != nil {
		return nil, err
	}
	format := in.Format
	if format == "" {
		format = spec.FormatLines
	}
	open, err := r.inputOpener(bucket, s)
	if err != nil {
		return nil, err
	}
	size := func(ctx context.Context, key string) (int64, error) {
		return r.Blob.Size(ctx, bucket, key, s.ETag, s.Version)
	}
	rc, header, err := split.OpenFormat(ctx, open, s, split.Options{Format: format, Cut: t.cut, Columns: in.Columns, Size: size})
	if err != nil {
		return nil, fmt.Errorf("open %s input %q [%d, %d): %w", format, s.Key, s.Start, s.End, err)
	}
	t.Format, t.Header = format, header
	return rc, nil
}

// inputOpener reads split s of bucket as planned: the planned version,
// whatever the key holds now, or else every GET If-Match the planned
// ETag. A store without pinned reads (ErrUnsupported) reads unpinned.
func (r *Runner) inputOpener(bucket string, s split.Split) (split.RangeOpener, error) {
	open := r.Blob.Opener(bucket)
	pin := func(o split.RangeOpener, err error) error {
		switch {
		case errors.Is(err, ErrUnsupported):
			return nil
		case err != nil:
			return fmt.Errorf("open input %q pinned to its plan: %w", s.Key, err)
		}
		open = o
		return nil
	}
	if s.ETag != "" {
		if err := pin(r.Blob.PinnedOpener(bucket, s.ETag)); err != nil {
			return nil, err
		}
	}
	if s.Version != "" {
		if err := pin(r.Blob.VersionOpener(bucket, s.ETag, s.Version)); err != nil {
			return nil, err
		}
	}
	return open, nil
}

// csvCounter counts the CSV records in a stream as encoding/csv reads
// them: a record ends at a newline outside quotes, an empty line ("\n" or
// "\r\n") is not a record, and a last record without a newline is one
// (unless it is a lone '\r', which encoding/csv drops).
type csvCounter struct {
	n   int64
	odd bool // inside a quoted field
	// line is how many bytes the current record has before its newline,
	// up to 2, and cr whether the first was '\r'.
	line int
	cr   bool
}

func (c *csvCounter) count(b []byte) {
	for _, ch := range b {
		switch {
		case ch == '\n' && !c.odd:
			if !c.blank() {
				c.n++
			}
			c.line, c.cr = 0, false
			continue
		case ch == '"':
			c.odd = !c.odd
		}
		if c.line == 0 {
			c.cr = ch == '\r'
		}
		c.line = min(c.line+1, 2)
	}
}

// blank reports whether the current record is empty so far, or only '\r'.
func (c *csvCounter) blank() bool { return c.line == 0 || c.line == 1 && c.cr }

func (c *csvCounter) records() int64 {
	if !c.blank() {
		return c.n + 1
	}
	return c.n
}
