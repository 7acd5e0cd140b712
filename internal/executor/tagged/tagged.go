// Package tagged reads a task's several sources as one stream of records,
// each tagged with the source it came from: a reduce-side join's reducer
// reads partition p of every upstream shuffle it joins (spec.ShuffleSources).
//
// The representation, the same for every kind of task: a record of source
// s that reads "key\tvalue" in its own shuffle is the line
// "s\tkey\tvalue\n" in the joined stream, where s is the upstream stage's
// name (which holds no tab: spec names are letters, digits, '_' and '-').
// Go tasks read it with batchwork.TaggedRecords, exec programs on stdin,
// and lambda functions read each source's objects from their event's
// shuffle.sources and tag them themselves. The sources come in the order
// the stage's "after" lists them, each whole before the next, so a
// reducer that holds one side in memory (the smaller, listed first) can
// stream the other.
package tagged

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/batchwork/batchwork/shared/lambdatask"
	"github.com/batchwork/batchwork/shared/spec"
)

// Source is one source of a joined stream: its name, and its records as
// lines ("key\tvalue\n"). Open is called when the stream reaches the
// source, so a source is read only after the ones before it.
type Source struct {
	Name string
	Open func() (io.ReadCloser, error)
	// opened is the reader Open returns when it was opened beforehand
	// (the package's Open), which Close must close even if never read.
	opened io.ReadCloser
}

// Concat returns the records of srcs, in order, each line prefixed with
// its source's name and a tab. A source whose last line has no newline
// gets one, so its record does not run into the next source's first.
func Concat(srcs []Source) io.ReadCloser {
	return &reader{srcs: srcs}
}

type reader struct {
	srcs []Source
	cur  io.ReadCloser
	br   *bufio.Reader
	pre  string // the current source's "name\t"
	// pending is what is left of the line being handed out.
	pending []byte
	// midLine: the last bytes handed out did not end a line, so the next
	// bytes of the source continue it and take no prefix.
	midLine bool
}

func (r *reader) Read(p []byte) (int, error) {
	n := 0
	for n < len(p) {
		if len(r.pending) > 0 {
			c := copy(p[n:], r.pending)
			r.pending = r.pending[c:]
			n += c
			continue
		}
		if r.br == nil {
			if len(r.srcs) == 0 {
				return n, eofIf(n)
			}
			rc, err := r.srcs[0].Open()
			if err != nil {
				return n, err
			}
			r.cur, r.br, r.pre = rc, bufio.NewReaderSize(rc, 64<<10), r.srcs[0].Name+"\t"
			r.srcs = r.srcs[1:]
		}
		line, err := r.br.ReadSlice('\n')
		if len(line) > 0 {
			if !r.midLine {
				r.pending = append(r.pending[:0], r.pre...)
			} else {
				r.pending = r.pending[:0]
			}
			r.pending = append(r.pending, line...)
			r.midLine = line[len(line)-1] != '\n'
		}
		switch {
		case err == nil, errors.Is(err, bufio.ErrBufferFull):
			// A line longer than the buffer goes out in pieces.
		case err == io.EOF:
			if r.midLine {
				r.pending = append(r.pending, '\n')
				r.midLine = false
			}
			cerr := r.cur.Close()
			r.cur, r.br = nil, nil
			if cerr != nil {
				return n, cerr
			}
		default:
			return n, err
		}
		if n > 0 && len(r.pending) == 0 {
			return n, nil
		}
	}
	return n, nil
}

func eofIf(n int) error {
	if n > 0 {
		return nil
	}
	return io.EOF
}

// Close closes the source being read. Sources not reached yet are not
// opened; those Open hands back already open (Open's) are closed too.
func (r *reader) Close() error {
	var errs []error
	if r.cur != nil {
		errs = append(errs, r.cur.Close())
		r.cur, r.br = nil, nil
	}
	for _, s := range r.srcs {
		if s.opened != nil {
			errs = append(errs, s.opened.Close())
		}
	}
	r.srcs = nil
	return errors.Join(errs...)
}

// Records reads a joined stream's "source\tkey\tvalue" lines from r,
// calling fn for each and stopping at its first error. A line with one
// tab is a key with an empty value; a line with none is a source's record
// with an empty key and value. Lines may be up to 16 MiB, as a shuffle's
// records (executor.Records).
func Records(r io.Reader, fn func(source, key, value string) error) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	for sc.Scan() {
		src, rest, _ := strings.Cut(sc.Text(), "\t")
		k, v, _ := strings.Cut(rest, "\t")
		if err := fn(src, k, v); err != nil {
			return err
		}
	}
	return sc.Err()
}

// Open is the input of a task reading the shuffles of stages srcs of sp:
// the one shuffle's records as they are, or several's tagged with their
// stages' names. open lists one shuffle's objects (reading its manifest)
// and returns their records, opened as they are read: every manifest is
// read here, so a missing one fails the attempt before its function runs.
func Open(sp *spec.Job, srcs []int, open func(src int) (io.ReadCloser, error)) (io.ReadCloser, error) {
	if len(srcs) == 1 {
		return open(srcs[0])
	}
	ts := make([]Source, 0, len(srcs))
	for _, src := range srcs {
		rc, err := open(src)
		if err != nil {
			Concat(ts).Close()
			return nil, fmt.Errorf("shuffle of stage %s: %w", sp.Stages[src].Name, err)
		}
		ts = append(ts, Source{Name: sp.Stages[src].Name, Open: func() (io.ReadCloser, error) { return rc, nil }, opened: rc})
	}
	return Concat(ts), nil
}

// LambdaShuffle lists a lambda stage's shuffle objects (keys lists one
// shuffle's): all of them in Keys, and for a stage joining several
// shuffles each one's under its stage's name too.
func LambdaShuffle(sp *spec.Job, bucket string, srcs []int, keys func(src int) ([]string, error)) (*lambdatask.Shuffle, error) {
	sh := &lambdatask.Shuffle{Bucket: bucket, Keys: []string{}}
	for _, src := range srcs {
		ks, err := keys(src)
		if err != nil {
			return nil, err
		}
		sh.Keys = append(sh.Keys, ks...)
		if len(srcs) > 1 {
			sh.Sources = append(sh.Sources, lambdatask.ShuffleSource{Source: sp.Stages[src].Name, Keys: append([]string{}, ks...)})
		}
	}
	return sh, nil
}
