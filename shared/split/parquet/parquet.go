// Package parquet reads the rows of a byte range of a Parquet file as
// JSON Lines, so that a task reads Parquet as it reads any other format.
//
// A range owns every row group whose first byte lies in it, as split
// owns the records that start in a range: however a file is cut into
// ranges, each row group, and so each row, is read by exactly one. A range
// in which no row group starts has no rows.
//
// Each row is one JSON object on a line, its keys the file's top-level
// columns in the file's order. Values keep their meaning rather than
// their storage: integers are JSON numbers, decimals strings carrying
// their scale ("12.50"), timestamps RFC 3339 strings in UTC, dates
// "2006-01-02", times "15:04:05.999999999", strings JSON strings, other
// binary base64, structs objects, lists arrays and maps objects whose
// keys are the map's keys as text. Floats that JSON cannot hold are the
// strings "NaN", "Infinity" and "-Infinity".
//
// Decoding (codecs, dictionary pages, definition and repetition levels)
// is github.com/parquet-go/parquet-go's; this package assembles its
// values into rows.
package parquet

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	pq "github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/format"
)

// footerRead is how many bytes at the end of a file the first read takes:
// a footer at most this long costs one read.
const footerRead = 256 << 10

// Open returns the rows of the row groups of a Parquet file of size bytes
// that start in [start, end), each a JSON object and a '\n'. With columns,
// the rows hold only those top-level columns, in the file's order, and
// only their column chunks are read. name says which file errors are about.
// r is read with ReadAt: the footer first, then each owned row group's
// column chunks front to back. The caller must Close the result.
func Open(ctx context.Context, r io.ReaderAt, size int64, name string, start, end int64, columns []string) (io.ReadCloser, error) {
	f, err := pq.OpenFile(r, size,
		pq.SkipMagicBytes(true), // the footer's magic is checked; the head's would cost a read
		pq.SkipPageIndex(true),
		pq.SkipBloomFilters(true),
		pq.OptimisticRead(true),
		pq.ReadBufferSize(footerRead),
	)
	if err != nil {
		return nil, fmt.Errorf("parquet: %q: %w", name, err)
	}
	top, err := project(f.Root(), columns)
	if err != nil {
		return nil, fmt.Errorf("parquet: %q: %w", name, err)
	}
	var groups []pq.RowGroup
	meta := f.Metadata()
	for i, g := range f.RowGroups() {
		if at := groupStart(meta.RowGroups[i].Columns); at >= start && at < end {
			groups = append(groups, g)
		}
	}
	return &rows{ctx: ctx, name: name, top: top, groups: groups}, nil
}

// groupStart is a row group's first byte: its first column chunk's
// dictionary page, or first data page when it has no dictionary. (The
// row group's own file_offset is optional, and some writers set it wrong.)
func groupStart(chunks []format.ColumnChunk) int64 {
	at := int64(-1)
	for _, c := range chunks {
		off := c.MetaData.DataPageOffset
		if d := c.MetaData.DictionaryPageOffset; d > 0 && d < off {
			off = d
		}
		if at < 0 || off < at {
			at = off
		}
	}
	return at
}

// project returns the top-level columns a row holds: all of them, or
// those named, in the file's order.
func project(root *pq.Column, columns []string) ([]*pq.Column, error) {
	all := root.Columns()
	if len(columns) == 0 {
		return all, nil
	}
	want := make(map[string]bool, len(columns))
	for _, c := range columns {
		want[c] = true
	}
	var out []*pq.Column
	for _, c := range all {
		if want[c.Name()] {
			out = append(out, c)
			delete(want, c.Name())
		}
	}
	if len(want) > 0 {
		names := make([]string, len(all))
		for i, c := range all {
			names[i] = c.Name()
		}
		var missing []string
		for _, c := range columns {
			if want[c] {
				missing = append(missing, fmt.Sprintf("%q", c))
			}
		}
		return nil, fmt.Errorf("no column %s; the file has %s", strings.Join(missing, ", "), strings.Join(names, ", "))
	}
	return out, nil
}

// rows streams the rows of the owned row groups, one group at a time.
type rows struct {
	ctx    context.Context
	name   string
	top    []*pq.Column
	groups []pq.RowGroup
	g      *group // the group being read; nil between groups
	buf    bytes.Buffer
	err    error
}

func (r *rows) Read(p []byte) (int, error) {
	for r.buf.Len() == 0 {
		if r.err != nil {
			return 0, r.err
		}
		r.err = r.fill()
	}
	return r.buf.Read(p)
}

// fill renders rows into buf, up to about a buffer's worth.
func (r *rows) fill() error {
	for r.buf.Len() < 64<<10 {
		if err := r.ctx.Err(); err != nil {
			return err
		}
		if r.g == nil {
			if len(r.groups) == 0 {
				return io.EOF
			}
			g, err := newGroup(r.groups[0], r.top)
			if err != nil {
				return fmt.Errorf("parquet: %q: %w", r.name, err)
			}
			r.g, r.groups = g, r.groups[1:]
		}
		more, err := r.g.row(&r.buf)
		if err != nil {
			return fmt.Errorf("parquet: %q: %w", r.name, err)
		}
		if !more {
			r.g.close()
			r.g = nil
		}
	}
	return nil
}

// Close releases the group being read.
func (r *rows) Close() error {
	if r.g != nil {
		r.g.close()
		r.g = nil
	}
	if r.err == nil {
		r.err = errors.New("parquet: read after Close")
	}
	return nil
}
