package blob

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

// readRun is the whole object RunBody makes.
func readRun(t *testing.T, head, buf []byte, spans []RunSpan) []byte {
	t.Helper()
	body, size := RunBody(head, buf, spans)
	raw, err := io.ReadAll(body)
	if err != nil {
		t.Fatal(err)
	}
	if int64(len(raw)) != size {
		t.Fatalf("read %d bytes, size %d", len(raw), size)
	}
	return raw
}

func TestSortRunEncodesASortedRun(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("k", RunSampleKeyMax+10)
	tests := []struct {
		name    string
		records []string // as written, each without its newline
		samples int
	}{
		{"one record", []string{"a\t1"}, 4},
		{"keys only, no tab", []string{"b", "a", "c"}, 2},
		{"equal keys keep their order", []string{"k\t1", "a\t0", "k\t2", "k\t3", "z\t9", "k\t4"}, 3},
		{"empty key and empty line", []string{"b\tx", "", "\tv"}, 8},
		{"long keys are cut in samples", []string{long + "b\t1", long + "a\t2", "a\t3"}, 3},
		{"many", func() []string {
			r := rand.New(rand.NewPCG(1, 2))
			out := make([]string, 5000)
			for i := range out {
				out[i] = fmt.Sprintf("%08d\t%d", r.IntN(1000), i)
			}
			return out
		}(), DefaultRunSamples},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			buf := []byte(strings.Join(tt.records, "\n") + "\n")
			head, spans, err := SortRun(slices.Clone(buf), tt.samples)
			if err != nil {
				t.Fatal(err)
			}
			raw := readRun(t, head, buf, spans)
			h, err := DecodeRunHeader(raw)
			if err != nil {
				t.Fatal(err)
			}
			if h.Head != int64(len(head)) || h.Size != int64(len(raw)) || h.Records != int64(len(tt.records)) {
				t.Fatalf("header: head %d size %d records %d; want %d, %d, %d", h.Head, h.Size, h.Records, len(head), len(raw), len(tt.records))
			}
			// The records: the written ones, stably sorted by key.
			want := slices.Clone(tt.records)
			slices.SortStableFunc(want, func(a, b string) int {
				return bytes.Compare(RunKey([]byte(a)), RunKey([]byte(b)))
			})
			got := strings.Split(strings.TrimSuffix(string(raw[h.Head:]), "\n"), "\n")
			if !slices.Equal(got, want) {
				t.Fatalf("records\n got %q\nwant %q", got, want)
			}
			// Each sample is the record at its position, at its offset,
			// with its key (cut), and the weights add up to the records.
			if want := min(len(tt.records), tt.samples); len(h.Samples) != want {
				t.Fatalf("%d samples, want %d", len(h.Samples), want)
			}
			var weight int64
			for i, s := range h.Samples {
				rec := want[s.Index]
				if !bytes.HasPrefix(raw[s.Offset:], []byte(rec+"\n")) {
					t.Errorf("sample %d at byte %d: %q, want record %d %q", i, s.Offset, raw[s.Offset:min(int(s.Offset)+20, len(raw))], s.Index, rec)
				}
				key := RunKey([]byte(rec))
				if k := key[:min(len(key), RunSampleKeyMax)]; !bytes.Equal(s.Key, k) {
					t.Errorf("sample %d's key %q, want %q", i, s.Key, k)
				}
				weight += h.Weight(i)
			}
			if weight != h.Records {
				t.Errorf("weights add up to %d, want %d", weight, h.Records)
			}
		})
	}
}

func TestSortRunRefuses(t *testing.T) {
	t.Parallel()
	if _, _, err := SortRun([]byte("a\tb"), 4); !errors.Is(err, ErrBadRun) {
		t.Errorf("records without a last newline: %v, want ErrBadRun", err)
	}
	head, spans, err := SortRun(nil, 4)
	if err != nil || len(spans) != 0 {
		t.Fatalf("no records: %v, %d spans", err, len(spans))
	}
	h, err := DecodeRunHeader(head)
	if err != nil || h.Records != 0 || len(h.Samples) != 0 || h.Size != int64(len(head)) {
		t.Errorf("an empty run: %+v, %v", h, err)
	}
}

// RunBody reads the same bytes at any offset, in order, out of order and
// after a rewind (the SDK's retry).
func TestRunBodyReadAt(t *testing.T) {
	t.Parallel()
	buf := []byte("c\t3\nb\t22\na\t111\nd\t\n")
	head, spans, err := SortRun(buf, 2)
	if err != nil {
		t.Fatal(err)
	}
	whole := readRun(t, head, buf, spans)
	body, size := RunBody(head, buf, spans)
	r := rand.New(rand.NewPCG(3, 4))
	for range 500 {
		off := r.Int64N(size + 2)
		p := make([]byte, r.IntN(12)+1)
		n, err := body.ReadAt(p, off)
		want := whole[min(off, size):]
		want = want[:min(len(want), len(p))]
		if n != len(want) || !bytes.Equal(p[:n], want) {
			t.Fatalf("ReadAt(%d bytes, %d) = %q, want %q", len(p), off, p[:n], want)
		}
		if (n < len(p)) != (err == io.EOF) {
			t.Fatalf("ReadAt(%d bytes, %d) read %d, err %v", len(p), off, n, err)
		}
	}
}

func TestDecodeRunHeaderRefuses(t *testing.T) {
	t.Parallel()
	buf := []byte("b\t1\na\t2\nc\t3\nd\t4\n")
	head, _, err := SortRun(buf, 4)
	if err != nil {
		t.Fatal(err)
	}
	sample := func(i int) int { return runFixed + i*(18+1) } // 1-byte keys
	tests := []struct {
		name string
		edit func(b []byte) []byte
	}{
		{"no magic", func(b []byte) []byte { b[0] = 'X'; return b }},
		{"cut short", func(b []byte) []byte { return b[:len(b)-1] }},
		{"too short for the fixed part", func(b []byte) []byte { return b[:10] }},
		{"first sample not the first record", func(b []byte) []byte { b[sample(0)+7] = 1; return b }},
		{"samples out of order", func(b []byte) []byte { b[sample(1)+18], b[sample(2)+18] = 'c', 'b'; return b }},
		{"more samples than records", func(b []byte) []byte { b[23] = 2; return b }},
		{"size before the records", func(b []byte) []byte { b[31] = 1; b[30] = 0; return b }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if _, err := DecodeRunHeader(tt.edit(slices.Clone(head))); !errors.Is(err, ErrBadRun) {
				t.Errorf("DecodeRunHeader = %v, want ErrBadRun", err)
			}
		})
	}
}

func TestRunSamplePositions(t *testing.T) {
	t.Parallel()
	tests := []struct {
		n    int64
		s    int
		want []int64
	}{
		{0, 4, nil},
		{3, 4, []int64{0, 1, 2}},
		{10, 4, []int64{0, 2, 5, 7}},
		{8, 4, []int64{0, 2, 4, 6}},
		{5, 1, []int64{0}},
	}
	for _, tt := range tests {
		if got := RunSamplePositions(tt.n, tt.s); !slices.Equal(got, tt.want) {
			t.Errorf("RunSamplePositions(%d, %d) = %v, want %v", tt.n, tt.s, got, tt.want)
		}
	}
}

// A header read from S3 is decoded without panicking whatever its bytes,
// and one that decodes keeps its samples inside the object.
func FuzzDecodeRunHeader(f *testing.F) {
	head, _, _ := SortRun([]byte("b\t1\na\t2\nc\t3\n"), 2)
	f.Add(head)
	f.Add([]byte(RunMagic))
	f.Fuzz(func(t *testing.T, b []byte) {
		h, err := DecodeRunHeader(b)
		if err != nil {
			return
		}
		for i, s := range h.Samples {
			if s.Offset < h.Head || s.Offset >= h.Size || h.Weight(i) <= 0 {
				t.Fatalf("sample %d: %+v in %+v", i, s, h)
			}
		}
	})
}
