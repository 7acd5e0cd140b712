package split

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"math/rand"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/klauspost/compress/zstd"
)

// countingStore is a store that records the offsets it is opened at.
type countingStore struct {
	store
	mu     sync.Mutex
	starts []int64
}

func (s *countingStore) open(ctx context.Context, key string, start int64) (io.ReadCloser, error) {
	s.mu.Lock()
	s.starts = append(s.starts, start)
	s.mu.Unlock()
	return s.store.open(ctx, key, start)
}

// opensAtZero is how many times the store was opened at offset 0.
func (s *countingStore) opensAtZero() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, st := range s.starts {
		if st == 0 {
			n++
		}
	}
	return n
}

func newStore(objects map[string]string) *countingStore {
	s := &countingStore{store: store{objects: map[string][]byte{}}}
	for k, v := range objects {
		s.objects[k] = []byte(v)
	}
	return s
}

// readFormat reads split sp in the given options; it returns what was
// read, the header and the error that ended the stream (nil at EOF).
func readFormat(t testing.TB, open RangeOpener, sp Split, o Options) (string, []string, error) {
	t.Helper()
	rc, h, err := OpenFormat(context.Background(), open, sp, o)
	if err != nil {
		return "", nil, err
	}
	b, err := io.ReadAll(rc)
	if cerr := rc.Close(); cerr != nil && err == nil {
		err = cerr
	}
	return string(b), h, err
}

func gz(t testing.TB, s string) string {
	t.Helper()
	var b bytes.Buffer
	w := gzip.NewWriter(&b)
	if _, err := w.Write([]byte(s)); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

func zst(t testing.TB, s string) string {
	t.Helper()
	var b bytes.Buffer
	w, err := zstd.NewWriter(&b)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write([]byte(s)); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// A compressed object is one split whatever its size: a cut inside a
// compressed stream would hand a task bytes it cannot decode.
func TestPlanCompressedWholeFile(t *testing.T) {
	t.Parallel()
	objs := []Object{{Key: "a.txt", Size: 10}, {Key: "b.gz", Size: 10}, {Key: "c.ZST", Size: 10}, {Key: "d.gz", Size: 0}, {Key: "e.tar.gz", Size: 3}}
	want := []Split{{Key: "a.txt", Start: 0, End: 4}, {Key: "a.txt", Start: 4, End: 7}, {Key: "a.txt", Start: 7, End: 10}, {Key: "b.gz", Start: 0, End: 10}, {Key: "c.ZST", Start: 0, End: 10}, {Key: "e.tar.gz", Start: 0, End: 3}}
	got := Plan(objs, 4)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Plan mismatch (-want +got):\n%s", diff)
	}
	if n := Count(objs, 4); n != int64(len(want)) {
		t.Errorf("Count = %d, want %d", n, len(want))
	}
}

func TestOpenCompressed(t *testing.T) {
	t.Parallel()
	const lines = "one\ntwo\nthree"
	const table = "h1,h2\r\n1,\"multi\nline\"\r\n2,x\r\n"
	const jsonl = "{\"a\":1}\n\n[2]\n"
	s := newStore(map[string]string{
		"l.gz":       gz(t, lines),
		"l.zst":      zst(t, lines),
		"t.csv.gz":   gz(t, table),
		"t.csv.zst":  zst(t, table),
		"j.gz":       gz(t, jsonl),
		"bad.gz":     gz(t, "{\"a\":1}\n{oops}\n"),
		"bomb.gz":    gz(t, strings.Repeat("\x00", 1<<20)),
		"exact.zst":  zst(t, strings.Repeat("y", 1000)),
		"notgzip.gz": "plain text\n",
		"cat.gz":     gz(t, "a\n") + gz(t, "b\n"), // gzip members concatenated, as `cat` makes them
	})
	tests := []struct {
		name       string
		split      Split
		opt        Options
		want       string
		wantHeader []string
		wantErr    string // a substring of the error, if any
		wantIs     error
	}{
		{name: "gzip lines", split: Split{Key: "l.gz", Start: 0, End: 100}, want: lines},
		{name: "zstd lines", split: Split{Key: "l.zst", Start: 0, End: 100}, want: lines},
		{name: "only the split at 0 reads a compressed object", split: Split{Key: "l.gz", Start: 5, End: 100}, want: ""},
		{name: "gzip csv", split: Split{Key: "t.csv.gz", Start: 0, End: 100}, opt: Options{Format: CSV}, want: "1,\"multi\nline\"\r\n2,x\r\n", wantHeader: []string{"h1", "h2"}},
		{name: "zstd csv", split: Split{Key: "t.csv.zst", Start: 0, End: 100}, opt: Options{Format: CSV}, want: "1,\"multi\nline\"\r\n2,x\r\n", wantHeader: []string{"h1", "h2"}},
		{name: "gzip jsonl drops blank lines", split: Split{Key: "j.gz", Start: 0, End: 100}, opt: Options{Format: JSONL}, want: "{\"a\":1}\n[2]\n"},
		{name: "gzip jsonl bad record", split: Split{Key: "bad.gz", Start: 0, End: 100}, opt: Options{Format: JSONL}, want: "{\"a\":1}\n",
			wantErr: `object "bad.gz", record at byte 8 of the decompressed data: invalid JSON: invalid character 'o'`},
		{name: "a bomb is refused", split: Split{Key: "bomb.gz", Start: 0, End: 100}, opt: Options{MaxDecompressed: 4096}, wantIs: ErrTooLarge,
			wantErr: `"bomb.gz" decompresses to more than 4096 bytes`},
		{name: "exactly the cap passes", split: Split{Key: "exact.zst", Start: 0, End: 100}, opt: Options{MaxDecompressed: 1000}, want: strings.Repeat("y", 1000)},
		{name: "one byte under the size fails", split: Split{Key: "exact.zst", Start: 0, End: 100}, opt: Options{MaxDecompressed: 999}, wantIs: ErrTooLarge},
		{name: "not gzip", split: Split{Key: "notgzip.gz", Start: 0, End: 100}, wantErr: `"notgzip.gz" is named .gz but is not gzip data`},
		{name: "concatenated gzip members", split: Split{Key: "cat.gz", Start: 0, End: 100}, want: "a\nb\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, h, err := readFormat(t, s.open, tt.split, tt.opt)
			switch {
			case tt.wantErr == "" && tt.wantIs == nil && err != nil:
				t.Fatalf("error %v", err)
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Fatalf("error %v, want one containing %q", err, tt.wantErr)
			case tt.wantIs != nil && !errors.Is(err, tt.wantIs):
				t.Fatalf("error %v, want %v", err, tt.wantIs)
			}
			if tt.wantIs == nil && got != tt.want {
				t.Errorf("read %q, want %q", got, tt.want)
			}
			if diff := cmp.Diff(tt.wantHeader, h); diff != "" {
				t.Errorf("header (-want +got):\n%s", diff)
			}
		})
	}
}

func TestOpenJSONL(t *testing.T) {
	t.Parallel()
	const data = "{\"a\":1}\n\n[1,2]\n{\"bad\":}\n\"x\"\n  \n1 2\n"
	s := newStore(map[string]string{"k": data, "bom": "\uFEFF{\"a\":1}\n"})
	tests := []struct {
		name    string
		split   Split
		want    string
		wantErr string
	}{
		{name: "a byte order mark is dropped", split: Split{Key: "bom", Start: 0, End: 4}, want: "{\"a\":1}\n"},
		{name: "records before the bad one, then its error", split: Split{Key: "k", Start: 0, End: 20}, want: "{\"a\":1}\n[1,2]\n",
			wantErr: `jsonl: object "k", record at byte 15: invalid JSON: invalid character '}' looking for beginning of value`},
		{name: "a split starting mid-file names the object offset", split: Split{Key: "k", Start: 12, End: 16},
			wantErr: `record at byte 15: invalid JSON`},
		{name: "blank lines are not records", split: Split{Key: "k", Start: 16, End: 29}, want: "\"x\"\n"},
		{name: "two values on a line", split: Split{Key: "k", Start: 29, End: 33}, wantErr: `record at byte 31: invalid JSON: invalid character '2' after top-level value`},
		{name: "no record starts in range", split: Split{Key: "k", Start: 1, End: 8}, want: ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, _, err := readFormat(t, s.open, tt.split, Options{Format: JSONL})
			if tt.wantErr == "" && err != nil || tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)) {
				t.Fatalf("error %v, want %q", err, tt.wantErr)
			}
			if got != tt.want {
				t.Errorf("read %q, want %q", got, tt.want)
			}
		})
	}
}

func TestOpenFormatUnknown(t *testing.T) {
	t.Parallel()
	_, _, err := OpenFormat(context.Background(), newStore(nil).open, Split{Key: "k", Start: 0, End: 1}, Options{Format: "xml"})
	if err == nil || !strings.Contains(err.Error(), `"xml" is not a format; want lines, jsonl, csv`) {
		t.Fatalf("error %v", err)
	}
}

// csvFile is the file the CSV table test cuts, with its byte offsets:
//
//	[0,6)   h1,h2\n              the header
//	[6,14)  1,"x\ny"\n           a quoted newline at 10
//	[14,31) 2,"say ""hi""\n,"\n  escaped quotes; a quoted newline at 27 then ,"
//	[31,34) 3,\n                 an empty field
const csvFile = "h1,h2\n1,\"x\ny\"\n2,\"say \"\"hi\"\"\n,\"\n3,\n"

func TestOpenCSV(t *testing.T) {
	t.Parallel()
	const (
		rec1 = "1,\"x\ny\"\n"
		rec2 = "2,\"say \"\"hi\"\"\n,\"\n"
		rec3 = "3,\n"
	)
	if csvFile != "h1,h2\n"+rec1+rec2+rec3 {
		t.Fatal("csvFile changed: fix the offsets")
	}
	objects := map[string]string{
		"f":        csvFile,
		"crlf":     "a,b\r\n\"1\r\n2\",3\r\n4,5\r\n", // [0,5) header, [5,15) record, [15,20) record
		"only":     "a,b\n",
		"nonl":     "a,b",
		"blank":    "\n\r\nh\n1\n", // the header is at 3
		"bom":      "\uFEFFid,name\n1,x\n",
		"quoted":   "\"a\nb\",c\n1,2\n", // a header with a quoted newline: [0,8)
		"noquotes": "a,b\n1,2\n3,4\n",   // no quotes: the end of the file decides
	}
	header := []string{"h1", "h2"}
	tests := []struct {
		name       string
		split      Split
		want       string
		wantHeader []string
	}{
		{"whole file", Split{Key: "f", Start: 0, End: 34}, rec1 + rec2 + rec3, header},
		{"header only in range", Split{Key: "f", Start: 0, End: 6}, "", header},
		{"first record starts at the last byte", Split{Key: "f", Start: 0, End: 7}, rec1, header},
		{"starts in the header", Split{Key: "f", Start: 1, End: 6}, "", header},
		{"starts in the header, owns a record", Split{Key: "f", Start: 3, End: 7}, rec1, header},
		{"no record starts in range", Split{Key: "f", Start: 7, End: 14}, "", header},
		{"starts inside quotes after a quoted newline", Split{Key: "f", Start: 11, End: 15}, rec2, header},
		{"starts at a record", Split{Key: "f", Start: 14, End: 15}, rec2, header},
		{"starts inside escaped quotes", Split{Key: "f", Start: 22, End: 31}, "", header},
		{"quoted newline followed by a comma", Split{Key: "f", Start: 28, End: 40}, rec3, header},
		{"last record", Split{Key: "f", Start: 31, End: 34}, rec3, header},
		{"inside the last record", Split{Key: "f", Start: 32, End: 34}, "", header},
		{"CRLF record with a quoted CRLF", Split{Key: "crlf", Start: 5, End: 6}, "\"1\r\n2\",3\r\n", []string{"a", "b"}},
		{"inside a quoted CRLF", Split{Key: "crlf", Start: 8, End: 17}, "4,5\r\n", []string{"a", "b"}},
		{"header only", Split{Key: "only", Start: 0, End: 4}, "", []string{"a", "b"}},
		{"header without newline", Split{Key: "nonl", Start: 0, End: 3}, "", []string{"a", "b"}},
		{"blank lines before the header", Split{Key: "blank", Start: 0, End: 8}, "1\n", []string{"h"}},
		{"split in the blank lines", Split{Key: "blank", Start: 1, End: 4}, "", []string{"h"}},
		{"split in the blank lines owns the next record", Split{Key: "blank", Start: 1, End: 6}, "1\n", []string{"h"}},
		{"byte order mark dropped", Split{Key: "bom", Start: 2, End: 20}, "1,x\n", []string{"id", "name"}},
		{"header with a quoted newline", Split{Key: "quoted", Start: 2, End: 12}, "1,2\n", []string{"a\nb", "c"}},
		{"no quotes", Split{Key: "noquotes", Start: 5, End: 9}, "3,4\n", []string{"a", "b"}},
	}
	for _, tt := range tests {
		for _, look := range []int{0, 1} { // speculation, and counting quotes from the start
			t.Run(fmt.Sprintf("%s/lookahead=%d", tt.name, look), func(t *testing.T) {
				t.Parallel()
				s := newStore(objects)
				got, h, err := readFormat(t, s.open, tt.split, Options{Format: CSV, Lookahead: look})
				if err != nil {
					t.Fatal(err)
				}
				if got != tt.want {
					t.Errorf("read %q, want %q", got, tt.want)
				}
				if diff := cmp.Diff(tt.wantHeader, h); diff != "" {
					t.Errorf("header (-want +got):\n%s", diff)
				}
			})
		}
	}
}

// Speculation settles the quote state from the text after a split's
// start when it can, and reads the object's start only when it cannot.
func TestCSVSpeculation(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name       string
		window     string
		atEOF      bool
		wantInside bool
		wantOK     bool
	}{
		{name: "no quotes: ambiguous", window: "a,b\n1,2\n"},
		{name: "no quotes to the end: not inside", window: "a,b\n1,2\n", atEOF: true, wantOK: true},
		{name: "a closing quote", window: "x\"\n1,2\n", wantInside: true, wantOK: true},
		{name: "an opening quote", window: "\"a\",b\n", wantOK: true},
		{name: "escaped quotes inside", window: "say \"\"hi\"\"\",2\n", wantInside: true, wantOK: true},
		{name: "escaped quotes outside", window: "\"\"\"hi\"\"\",2\n", wantOK: true},
		{name: "quoted CRLF", window: "1\r\n2\",3\r\n", wantInside: true, wantOK: true},
		{name: "not CSV: neither survives", window: "a\"b"},
		{name: "a closing quote at the end", window: "abc\"", atEOF: true, wantInside: true, wantOK: true},
		{name: "an unterminated quote at the end", window: "\"abc", atEOF: true},
		{name: "empty window", window: ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			inside, ok := speculate([]byte(tt.window), tt.atEOF)
			if ok != tt.wantOK || ok && inside != tt.wantInside {
				t.Errorf("speculate(%q, %t) = %t, %t; want %t, %t", tt.window, tt.atEOF, inside, ok, tt.wantInside, tt.wantOK)
			}
		})
	}

	// Wired in: with the lookahead window large enough, splits do not
	// read the object's start beyond the header; with a one-byte window,
	// every split after the first counts quotes from the start.
	s := newStore(map[string]string{"f": csvFile})
	for _, sp := range []Split{{Key: "f", Start: 11, End: 15}, {Key: "f", Start: 28, End: 40}} {
		if _, _, err := readFormat(t, s.open, sp, Options{Format: CSV}); err != nil {
			t.Fatal(err)
		}
	}
	if n := s.opensAtZero(); n != 2 {
		t.Errorf("speculated splits opened the object at 0 %d times, want 2 (the headers)", n)
	}
	s = newStore(map[string]string{"f": csvFile})
	if _, _, err := readFormat(t, s.open, Split{Key: "f", Start: 11, End: 15}, Options{Format: CSV, Lookahead: 1}); err != nil {
		t.Fatal(err)
	}
	if n := s.opensAtZero(); n != 2 {
		t.Errorf("an ambiguous split opened the object at 0 %d times, want 2 (header and count)", n)
	}
}

// randomCSV writes a random valid CSV file: a header and rows of cols
// fields, some quoted with commas, quotes and newlines in them.
func randomCSV(rng *rand.Rand) string {
	cols := 1 + rng.Intn(4)
	eol := "\n"
	if rng.Intn(2) == 0 {
		eol = "\r\n"
	}
	field := func() string {
		switch rng.Intn(9) {
		case 0:
			return ""
		case 1:
			return `""`
		case 2:
			return `"a,b"`
		case 3:
			return "\"line\nbreak\""
		case 4:
			return "\"crlf\r\nbreak\""
		case 5:
			return `"say ""hi"""`
		case 6:
			return "\"\n\""
		case 7:
			return `""""`
		}
		return fmt.Sprintf("w%d", rng.Intn(1000))
	}
	var b strings.Builder
	rows := rng.Intn(30)
	for r := 0; r <= rows; r++ {
		if r > 0 && rng.Intn(10) == 0 {
			b.WriteString(eol) // a blank line, which csv.Reader skips
		}
		for c := range cols {
			if c > 0 {
				b.WriteByte(',')
			}
			if r == 0 {
				fmt.Fprintf(&b, "c%d", c)
			} else {
				b.WriteString(field())
			}
		}
		if r < rows || rng.Intn(4) > 0 {
			b.WriteString(eol)
		}
	}
	return b.String()
}

// For random CSV files cut at random sizes, the splits' records, read
// with csv.Reader and concatenated, are exactly the file's records after
// its header, and every split reports the header: no record is lost,
// duplicated or cut, whether speculation or counting settled the starts.
func TestCSVSplitsProperty(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewSource(11))
	for range 300 {
		data := randomCSV(rng)
		checkCSVSplits(t, data, int64(1+rng.Intn(len(data)+1)), []int{0, 1, 2, 16}[rng.Intn(4)])
	}
}

// FuzzCSVSplits checks the same of any valid CSV file.
func FuzzCSVSplits(f *testing.F) {
	f.Add(csvFile, int64(3), 0)
	f.Add("a,b\r\n\"1\r\n2\",3\r\n4,5\r\n", int64(2), 1)
	f.Add("h\n\"\"\"\"\n\"\n\"\n", int64(1), 2)
	f.Fuzz(func(t *testing.T, data string, target int64, look int) {
		whole, err := csv.NewReader(strings.NewReader(data)).ReadAll()
		if err != nil || len(whole) == 0 || len(data) > 4096 {
			t.Skip()
		}
		checkCSVSplits(t, data, 1+abs(target)%int64(len(data)+1), abs(look)%64)
	})
}

func abs[T int | int64](x T) T {
	if x < 0 {
		return -x
	}
	return x
}

// checkCSVSplits reads valid CSV data in splits of target bytes with a
// lookahead of look, and checks the records against csv.Reader's.
func checkCSVSplits(t *testing.T, data string, target int64, look int) {
	t.Helper()
	whole, err := csv.NewReader(strings.NewReader(data)).ReadAll()
	if err != nil {
		t.Fatalf("%q is not valid CSV: %v", data, err)
	}
	s := newStore(map[string]string{"k": data})
	var got [][]string
	for _, sp := range Plan([]Object{{Key: "k", Size: int64(len(data))}}, target) {
		out, h, err := readFormat(t, s.open, sp, Options{Format: CSV, Lookahead: look})
		if err != nil {
			t.Fatalf("file %q, split %+v: %v", data, sp, err)
		}
		if diff := cmp.Diff(whole[0], h); diff != "" {
			t.Fatalf("file %q, split %+v: header (-want +got):\n%s", data, sp, diff)
		}
		recs, err := csv.NewReader(strings.NewReader(out)).ReadAll()
		if err != nil {
			t.Fatalf("file %q, split %+v read %q: %v", data, sp, out, err)
		}
		got = append(got, recs...)
	}
	if diff := cmp.Diff(whole[1:], got, cmpEmpty); diff != "" {
		t.Fatalf("file %q in splits of %d (lookahead %d): records (-want +got):\n%s", data, target, look, diff)
	}
}

// cmpEmpty treats nil and empty record lists alike.
var cmpEmpty = cmp.Comparer(func(a, b [][]string) bool {
	if len(a) == 0 && len(b) == 0 {
		return true
	}
	return cmp.Equal(a, b)
})
