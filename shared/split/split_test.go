package split

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/google/go-cmp/cmp"
)

// store is an in-memory bucket whose opener records how it is used.
type store struct {
	objects map[string][]byte
	// wrap, when set, wraps every reader the opener returns.
	wrap func(io.Reader) io.Reader
}

func (s *store) open(_ context.Context, key string, start int64) (io.ReadCloser, error) {
	data, ok := s.objects[key]
	if !ok {
		return nil, fmt.Errorf("no such key %q", key)
	}
	var r io.Reader = bytes.NewReader(data[min(start, int64(len(data))):])
	if s.wrap != nil {
		r = s.wrap(r)
	}
	return &trackedReader{r: r}, nil
}

// trackedReader counts the bytes read through it and whether it was closed.
type trackedReader struct {
	r      io.Reader
	read   int64
	closed int
}

func (t *trackedReader) Read(p []byte) (int, error) {
	if t.closed > 0 {
		return 0, errors.New("read after close")
	}
	n, err := t.r.Read(p)
	t.read += int64(n)
	return n, err
}

func (t *trackedReader) Close() error { t.closed++; return nil }

func readSplit(t testing.TB, open RangeOpener, s Split) string {
	t.Helper()
	rc, err := Open(context.Background(), open, s)
	if err != nil {
		t.Fatalf("Open(%+v): %v", s, err)
	}
	b, err := io.ReadAll(rc)
	if err != nil {
		t.Fatalf("reading %+v: %v", s, err)
	}
	if err := rc.Close(); err != nil {
		t.Fatalf("Close(%+v): %v", s, err)
	}
	return string(b)
}

func TestPlan(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		objs   []Object
		target int64
		want   []Split
	}{
		{name: "no objects", target: 10, want: []Split{}},
		{name: "exact multiple", objs: []Object{{Key: "a", Size: 10}}, target: 5, want: []Split{{Key: "a", Start: 0, End: 5}, {Key: "a", Start: 5, End: 10}}},
		{
			name: "remainder spread over the first splits", objs: []Object{{Key: "a", Size: 10}}, target: 4,
			want: []Split{{Key: "a", Start: 0, End: 4}, {Key: "a", Start: 4, End: 7}, {Key: "a", Start: 7, End: 10}},
		},
		{name: "target larger than object", objs: []Object{{Key: "a", Size: 3}}, target: 100, want: []Split{{Key: "a", Start: 0, End: 3}}},
		{name: "one-byte target", objs: []Object{{Key: "a", Size: 3}}, target: 1, want: []Split{{Key: "a", Start: 0, End: 1}, {Key: "a", Start: 1, End: 2}, {Key: "a", Start: 2, End: 3}}},
		{
			name: "objects in order, empty ones skipped", objs: []Object{{Key: "z", Size: 4}, {Key: "empty", Size: 0}, {Key: "a", Size: 2}, {Key: "neg", Size: -1}}, target: 3,
			want: []Split{{Key: "z", Start: 0, End: 2}, {Key: "z", Start: 2, End: 4}, {Key: "a", Start: 0, End: 2}},
		},
		{name: "zero target", objs: []Object{{Key: "a", Size: 10}, {Key: "b", Size: 0}, {Key: "c", Size: 1}}, target: 0, want: []Split{{Key: "a", Start: 0, End: 10}, {Key: "c", Start: 0, End: 1}}},
		{name: "negative target", objs: []Object{{Key: "a", Size: 10}}, target: -5, want: []Split{{Key: "a", Start: 0, End: 10}}},
		{
			name: "no overflow near the int64 limit", objs: []Object{{Key: "huge", Size: math.MaxInt64}}, target: math.MaxInt64 / 2,
			want: []Split{
				{Key: "huge", Start: 0, End: math.MaxInt64/3 + 1},
				{Key: "huge", Start: math.MaxInt64/3 + 1, End: 2*(math.MaxInt64/3) + 1},
				{Key: "huge", Start: 2*(math.MaxInt64/3) + 1, End: math.MaxInt64},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := Plan(tt.objs, tt.target)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Plan mismatch (-want +got):\n%s", diff)
			}
			if n := Count(tt.objs, tt.target); n != int64(len(got)) {
				t.Errorf("Count = %d, want len(Plan) = %d", n, len(got))
			}
		})
	}
}

func TestOpen(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("x", 3*bufSize) + "\n" // longer than the read buffer
	s := &store{objects: map[string][]byte{
		"abc":   []byte("ab\ncd\nef"),
		"crlf":  []byte("a\r\nbb\r\n"),
		"blank": []byte("\n\n\n"),
		"long":  []byte("a\n" + long + "y\n"),
		"utf8":  []byte("héllo\n世界\n"),
		"empty": nil,
	}}
	tests := []struct {
		name  string
		split Split
		want  string
	}{
		{"whole object", Split{Key: "abc", Start: 0, End: 8}, "ab\ncd\nef"},
		{"first byte owns the first line", Split{Key: "abc", Start: 0, End: 1}, "ab\n"},
		{"no line starts in range", Split{Key: "abc", Start: 1, End: 3}, ""},
		{"line at the last owned byte", Split{Key: "abc", Start: 1, End: 4}, "cd\n"},
		{"previous byte is a newline", Split{Key: "abc", Start: 3, End: 4}, "cd\n"},
		{"skip the partial line", Split{Key: "abc", Start: 4, End: 8}, "ef"},
		{"last line without newline", Split{Key: "abc", Start: 6, End: 8}, "ef"},
		{"partial last line", Split{Key: "abc", Start: 7, End: 8}, ""},
		{"empty range", Split{Key: "abc", Start: 3, End: 3}, ""},
		{"range past the end", Split{Key: "abc", Start: 8, End: 20}, ""},
		{"CRLF is two bytes of one line", Split{Key: "crlf", Start: 2, End: 4}, "bb\r\n"},
		{"a line starting after CRLF", Split{Key: "crlf", Start: 1, End: 4}, "bb\r\n"},
		{"empty lines", Split{Key: "blank", Start: 1, End: 2}, "\n"},
		{"empty lines to the end", Split{Key: "blank", Start: 1, End: 3}, "\n\n"},
		{"line longer than the buffer", Split{Key: "long", Start: 1, End: 3}, long},
		{"skip a line longer than the buffer", Split{Key: "long", Start: 3, End: int64(3 + len(long))}, "y\n"},
		{"start inside a multi-byte rune", Split{Key: "utf8", Start: 2, End: 8}, "世界\n"},
		{"empty object", Split{Key: "empty", Start: 0, End: 1}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := readSplit(t, s.open, tt.split); got != tt.want {
				t.Errorf("Open(%+v) read %q, want %q", tt.split, got, tt.want)
			}
		})
	}
}

func TestOpenErrors(t *testing.T) {
	t.Parallel()
	boom := errors.New("boom")
	// failing serves data and then fails, whatever the start offset.
	failing := func(data string) RangeOpener {
		return func(ctx context.Context, key string, start int64) (io.ReadCloser, error) {
			return io.NopCloser(io.MultiReader(strings.NewReader(data), iotest.ErrReader(boom))), nil
		}
	}
	tests := []struct {
		name     string
		open     RangeOpener
		split    Split
		openFail bool  // Open itself fails
		wantErr  error // the error Open or reading ends with, if any
	}{
		{name: "open fails", open: (&store{}).open, split: Split{Key: "missing", Start: 0, End: 5}, openFail: true},
		{name: "negative start", open: failing(""), split: Split{Key: "k", Start: -1, End: 5}, openFail: true},
		{name: "end before start", open: failing(""), split: Split{Key: "k", Start: 5, End: 4}, openFail: true},
		{name: "read fails while skipping", open: failing("abc"), split: Split{Key: "k", Start: 1, End: 10}, openFail: true, wantErr: boom},
		{name: "read fails mid-line", open: failing("abc\nd"), split: Split{Key: "k", Start: 0, End: 10}, wantErr: boom},
		{name: "done before the failure", open: failing("abc\nd"), split: Split{Key: "k", Start: 0, End: 1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			rc, err := Open(context.Background(), tt.open, tt.split)
			if (err != nil) != tt.openFail {
				t.Fatalf("Open error = %v, want failure %t", err, tt.openFail)
			}
			if err == nil {
				defer rc.Close()
				_, err = io.ReadAll(rc)
			}
			if tt.wantErr != nil && !errors.Is(err, tt.wantErr) || tt.wantErr == nil && !tt.openFail && err != nil {
				t.Errorf("error = %v, want %v", err, tt.wantErr)
			}
		})
	}
}

// TestOpenStopsEarly checks that a split reads little beyond its range and
// releases the object as soon as its last line is read.
func TestOpenStopsEarly(t *testing.T) {
	t.Parallel()
	line := strings.Repeat("z", 99) + "\n"
	data := strings.Repeat(line, 20_000) // 2 MB
	var opened []*trackedReader
	s := &store{objects: map[string][]byte{"k": []byte(data)}}
	open := func(ctx context.Context, key string, start int64) (io.ReadCloser, error) {
		rc, err := s.open(ctx, key, start)
		if err == nil {
			opened = append(opened, rc.(*trackedReader))
		}
		return rc, err
	}
	rc, err := Open(context.Background(), open, Split{Key: "k", Start: 150, End: 1000})
	if err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(rc)
	if err != nil {
		t.Fatal(err)
	}
	if want := strings.Repeat(line, 8); string(got) != want { // lines at 200 ... 900
		t.Errorf("read %d bytes, want the 8 lines starting in [150, 1000)", len(got))
	}
	tr := opened[0]
	if tr.closed != 1 {
		t.Errorf("underlying reader closed %d times before Close, want 1", tr.closed)
	}
	if tr.read > 2*minBufSize {
		t.Errorf("read %d bytes of the object, want at most %d", tr.read, 2*minBufSize)
	}
	if err := rc.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
	if err := rc.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	if tr.closed != 1 {
		t.Errorf("underlying reader closed %d times in all, want 1", tr.closed)
	}
	if n, err := rc.Read(make([]byte, 1)); n != 0 || err == nil {
		t.Errorf("Read after Close = %d, %v; want an error", n, err)
	}
}

func TestOpenCanceled(t *testing.T) {
	t.Parallel()
	s := &store{objects: map[string][]byte{"k": []byte("a\nb\n")}}
	ctx, cancel := context.WithCancel(context.Background())
	rc, err := Open(ctx, s.open, Split{Key: "k", Start: 0, End: 4})
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	cancel()
	if _, err := io.ReadAll(rc); !errors.Is(err, context.Canceled) {
		t.Errorf("read error = %v, want context.Canceled", err)
	}
}

// randomObject returns text built to hit the edge cases: empty lines, CRLF,
// multi-byte UTF-8, long lines, and sometimes no final newline.
func randomObject(rng *rand.Rand) []byte {
	pieces := []string{"a", "bc", "héllo", "世界", "🙂", " ", "\r", "\t", "x"}
	var b bytes.Buffer
	for range rng.Intn(40) {
		switch rng.Intn(10) {
		case 0: // empty line
		case 1: // a long line
			b.WriteString(strings.Repeat("L", 50+rng.Intn(300)))
		default:
			for range rng.Intn(12) {
				b.WriteString(pieces[rng.Intn(len(pieces))])
			}
		}
		if rng.Intn(3) == 0 {
			b.WriteString("\r\n")
		} else {
			b.WriteByte('\n')
		}
	}
	if b.Len() > 0 && rng.Intn(2) == 0 { // drop the final newline
		b.Truncate(b.Len() - 1)
	}
	return b.Bytes()
}

// ownedLines is the reference answer: the lines of data whose first byte
// lies in [start, end).
func ownedLines(data []byte, start, end int64) string {
	var out strings.Builder
	for off := int64(0); off < int64(len(data)); {
		n := int64(bytes.IndexByte(data[off:], '\n')) + 1
		if n == 0 {
			n = int64(len(data)) - off
		}
		if start <= off && off < end {
			out.Write(data[off : off+n])
		}
		off += n
	}
	return out.String()
}

// TestPlanOpenProperty checks, over many random inputs, that the splits of
// a plan read back every line exactly once, in order, and that each split
// reads exactly the lines it owns.
func TestPlanOpenProperty(t *testing.T) {
	t.Parallel()
	for seed := int64(1); seed <= 300; seed++ {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) {
			t.Parallel()
			rng := rand.New(rand.NewSource(seed))
			s := &store{objects: make(map[string][]byte)}
			var objs []Object
			var want bytes.Buffer
			var largest int64
			for i := range 1 + rng.Intn(5) {
				key := fmt.Sprintf("in/part-%d", i)
				data := randomObject(rng)
				s.objects[key] = data
				objs = append(objs, Object{Key: key, Size: int64(len(data))})
				want.Write(data)
				largest = max(largest, int64(len(data)))
			}
			// Deliver data in awkward pieces now and then, to exercise
			// partial buffer fills.
			switch rng.Intn(3) {
			case 0:
				s.wrap = iotest.OneByteReader
			case 1:
				s.wrap = iotest.HalfReader
			}
			targets := []int64{1, 2, 3, 7, 1 + rng.Int63n(largest+10), largest, 2 * largest, 0}

			for _, target := range targets {
				var got strings.Builder
				for _, sp := range Plan(objs, target) {
					part := readSplit(t, s.open, sp)
					if ref := ownedLines(s.objects[sp.Key], sp.Start, sp.End); part != ref {
						t.Fatalf("target %d: split %+v read %q, want %q", target, sp, part, ref)
					}
					got.WriteString(part)
				}
				if got.String() != want.String() {
					t.Fatalf("target %d: splits read\n%q\nwant\n%q", target, got.String(), want.String())
				}
			}
		})
	}
}

func BenchmarkOpen(b *testing.B) {
	rng := rand.New(rand.NewSource(1))
	var data bytes.Buffer
	for data.Len() < 8<<20 {
		data.WriteString(strings.Repeat("w", 1+rng.Intn(150)))
		data.WriteByte('\n')
	}
	s := &store{objects: map[string][]byte{"k": data.Bytes()}}
	splits := Plan([]Object{{Key: "k", Size: int64(data.Len())}}, 1<<20)
	b.SetBytes(int64(data.Len()))
	b.ReportAllocs()
	for b.Loop() {
		for _, sp := range splits {
			rc, err := Open(context.Background(), s.open, sp)
			if err != nil {
				b.Fatal(err)
			}
			if _, err := io.Copy(io.Discard, rc); err != nil {
				b.Fatal(err)
			}
			rc.Close()
		}
	}
}
