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
