package split

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
)

// ErrCorruptInput is what an error wraps when an object's own bytes are
// not valid for its format: not Parquet, no such column, a corrupt
// compressed stream, a JSON Lines record that is not JSON, a CSV header
// that does not parse. Reads are pinned to the planned version, so a
// retry would read the same bytes and fail the same way; errors of
// reading (I/O, a cancelled context) never wrap it.
var ErrCorruptInput = errors.New("corrupt input")

// corruptError keeps its error's message and adds ErrCorruptInput to
// what it wraps.
type corruptError struct{ err error }

func (e *corruptError) Error() string   { return e.err.Error() }
func (e *corruptError) Unwrap() []error { return []error{e.err, ErrCorruptInput} }

// corrupt marks err as caused by the object's bytes.
func corrupt(err error) error {
	if err == nil || errors.Is(err, ErrCorruptInput) {
		return err
	}
	return &corruptError{err}
}

// watchedReader remembers the first error of its reader other than
// io.EOF. A decompressor reports its source's errors and its own alike;
// only a source that never failed says the stream itself is invalid.
type watchedReader struct {
	r      io.Reader
	mu     sync.Mutex
	failed error
}

func (w *watchedReader) Read(p []byte) (int, error) {
	n, err := w.r.Read(p)
	if err != nil && !errors.Is(err, io.EOF) {
		w.mu.Lock()
		if w.failed == nil {
			w.failed = err
		}
		w.mu.Unlock()
	}
	return n, err
}

func (w *watchedReader) ok() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.failed == nil
}

// decodeError is a decompressor's error while reading object key: when
// its source read cleanly, one naming the object and wrapping
// ErrCorruptInput; else err as it is.
func decodeError(ctx context.Context, src *watchedReader, key string, err error) error {
	if errors.Is(err, io.EOF) || !src.ok() || ctx.Err() != nil {
		return err
	}
	return corrupt(fmt.Errorf("split: decompress %q: %w", key, err))
}
