// Package reccount counts the records a task function reads from its
// input, as it reads them: the job's status reports them as the task's
// records in.
package reccount

import (
	"bytes"
	"fmt"
	"io"
)

// Reader counts the records (lines) read through it: a final line
// without a newline counts too. It also keeps the first read error, so
// an attempt whose function ignored one (a JSON Lines record that is not
// JSON, a broken download) fails, not commits the records before it as
// the whole.
type Reader struct {
	r       io.Reader
	n       int64
	midLine bool
	csv     *csvCounter // CSV input: records, not lines
	err     error
}

// New counts what is read from r: CSV records when csv, else lines.
func New(r io.Reader, csv bool) *Reader {
	l := &Reader{r: r}
	if csv {
		l.csv = &csvCounter{}
	}
	return l
}

func (l *Reader) Read(p []byte) (int, error) {
	n, err := l.r.Read(p)
	switch {
	case n > 0 && l.csv != nil:
		l.csv.count(p[:n])
	case n > 0:
		l.n += int64(bytes.Count(p[:n], []byte{'\n'}))
		l.midLine = p[n-1] != '\n'
	}
	if err != nil && err != io.EOF && l.err == nil {
		l.err = err
	}
	return n, err
}

// Err is the first error reading the input returned, if any (none on a
// nil Reader: a task without input).
func (l *Reader) Err() error {
	if l == nil || l.err == nil {
		return nil
	}
	return fmt.Errorf("read input: %w", l.err)
}

// Records is how many records were read.
func (l *Reader) Records() int64 {
	if l.csv != nil {
		return l.csv.records()
	}
	if l.midLine {
		return l.n + 1
	}
	return l.n
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
