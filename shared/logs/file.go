package logs

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
)

// File reads lines from a JSON-lines log file: the local runner's, which
// its executor processes may write to as well. A cursor is the byte
// offset after the last line read, so following a job reads only what
// was appended since.
type File struct {
	Path string
}

const fileCursor = "f"

// maxLine bounds one line; a longer one is skipped.
const maxLine = 1 << 20

// Query scans the file from the cursor (or its start) for q's lines.
func (f File) Query(ctx context.Context, q Query) (Page, error) {
	limit, err := q.Validate()
	if err != nil {
		return Page{}, err
	}
	off, err := parseFileCursor(q.Cursor)
	if err != nil {
		return Page{}, err
	}
	fh, err := os.Open(f.Path)
	if errors.Is(err, os.ErrNotExist) {
		return Page{Lines: []Line{}, Next: fileCursorAt(off)}, nil
	}
	if err != nil {
		return Page{}, fmt.Errorf("read log file: %w", err)
	}
	defer fh.Close()
	if st, err := fh.Stat(); err == nil && st.Size() < off {
		off = 0 // the file was replaced or truncated: read it again
	}
	if _, err := fh.Seek(off, io.SeekStart); err != nil {
		return Page{}, fmt.Errorf("read log file: %w", err)
	}
	pg := Page{Lines: []Line{}}
	r := bufio.NewReaderSize(fh, 64<<10)
	for len(pg.Lines) < limit {
		if err := ctx.Err(); err != nil {
			return Page{}, err
		}
		raw, n, complete, err := readLine(r)
		// A last line without its newline is still being written: it is
		// read again from its start next time.
		if complete {
			off += n
			if l, ok := Match(raw, q); ok && (q.Since.IsZero() || !l.Time.Before(q.Since)) {
				pg.Lines = append(pg.Lines, l)
			}
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			return Page{}, fmt.Errorf("read log file: %w", err)
		}
	}
	pg.Next = fileCursorAt(off)
	return pg, nil
}

// readLine reads the next line: n is its length in the file, its newline
// included, and complete whether it has one. line is nil for a line longer
// than maxLine (skipped).
func readLine(r *bufio.Reader) (line []byte, n int64, complete bool, err error) {
	long := false
	for {
		chunk, err := r.ReadSlice('\n')
		n += int64(len(chunk))
		if !long && len(line)+len(chunk) > maxLine {
			long, line = true, nil
		} else if !long {
			line = append(line, chunk...)
		}
		if err == bufio.ErrBufferFull {
			continue
		}
		complete = len(chunk) > 0 && chunk[len(chunk)-1] == '\n'
		return line, n, complete, err
	}
}

func parseFileCursor(c string) (int64, error) {
	if c == "" {
		return 0, nil
	}
	rest, ok := strings.CutPrefix(c, fileCursor)
	if !ok {
		return 0, ErrBadCursor
	}
	n, err := strconv.ParseInt(rest, 10, 64)
	if err != nil || n < 0 {
		return 0, ErrBadCursor
	}
	return n, nil
}

func fileCursorAt(off int64) string { return fileCursor + strconv.FormatInt(off, 10) }
