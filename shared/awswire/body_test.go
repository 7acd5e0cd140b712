package awswire

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"
	"testing/iotest"
)

// readBody reads what io.ReadAll reads, with the same error, whatever the
// declared length says.
func TestReadBodyIsReadAll(t *testing.T) {
	body := strings.Repeat("0123456789", 300)
	boom := errors.New("connection reset")
	cases := []struct {
		name   string
		length int64
		r      func() io.Reader
	}{
		{"declared", int64(len(body)), func() io.Reader { return strings.NewReader(body) }},
		{"unknown", -1, func() io.Reader { return strings.NewReader(body) }},
		{"empty", 0, func() io.Reader { return strings.NewReader("") }},
		{"past the bound", maxSizedBody + 1, func() io.Reader { return strings.NewReader(body) }},
		{"shorter than declared", int64(len(body)) + 10, func() io.Reader { return strings.NewReader(body) }},
		{"longer than declared", 10, func() io.Reader { return strings.NewReader(body) }},
		{"a byte at a time", int64(len(body)), func() io.Reader { return iotest.OneByteReader(strings.NewReader(body)) }},
		{"the end with the data", int64(len(body)), func() io.Reader { return iotest.DataErrReader(strings.NewReader(body)) }},
		{"empty reads", int64(len(body)), func() io.Reader { return &emptyReads{r: strings.NewReader(body)} }},
		{"an error midway", int64(len(body)), func() io.Reader { return io.MultiReader(strings.NewReader(body[:100]), iotest.ErrReader(boom)) }},
		{"an error at the declared end", int64(len(body)), func() io.Reader { return io.MultiReader(strings.NewReader(body), iotest.ErrReader(boom)) }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			want, werr := io.ReadAll(c.r())
			got, gerr := readBody(c.r(), c.length)
			if !bytes.Equal(got, want) || !errors.Is(gerr, werr) && gerr != werr {
				t.Fatalf("read %d bytes, %v; want %d bytes, %v", len(got), gerr, len(want), werr)
			}
		})
	}
}

// emptyReads returns nothing, without an error, every other read.
type emptyReads struct {
	r    io.Reader
	skip bool
}

func (e *emptyReads) Read(p []byte) (int, error) {
	e.skip = !e.skip
	if e.skip {
		return 0, nil
	}
	return e.r.Read(p)
}
