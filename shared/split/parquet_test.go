package split

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/big"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
)

// The files in parquet/testdata are written by DuckDB (gen.py there), and
// rows.jsonl.gz is what DuckDB reads back from each, in the reader's
// conventions. A file read whole gives exactly those rows in order, every
// value equal; read in splits of any size, one after another, it gives
// the same bytes: each row once.
func TestParquetEqualsDuckDB(t *testing.T) {
	t.Parallel()
	want := readExpected(t, "parquet/testdata/rows.jsonl.gz")
	for _, name := range []string{"snappy", "zstd", "gzip"} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			data, err := os.ReadFile(filepath.Join("parquet/testdata", name+".parquet"))
			if err != nil {
				t.Fatal(err)
			}
			whole, opens := readParquetSplits(t, data, 0, nil)
			compareRows(t, whole, want)
			if opens > 3 {
				// The footer's read, then the column chunks front to back.
				t.Errorf("reading the file opened %d streams", opens)
			}
			sizes := []int64{65536, int64(len(data)) / 3}
			if name == "snappy" {
				// Where splits fall is the codec's business only through the
				// column chunks' sizes: the small splits, hundreds of opens
				// of the file, for one codec (the race run spends ten
				// seconds a codec on them).
				sizes = append(sizes, 1000, 4096)
			}
			for _, size := range sizes {
				got, _ := readParquetSplits(t, data, size, nil)
				if !slices.Equal(got, whole) {
					t.Errorf("in splits of %d bytes: %d rows differ from the whole file's %d", size, len(got), len(whole))
				}
			}
		})
	}
}

// With columns, a row holds those columns only, in the file's order.
func TestParquetColumns(t *testing.T) {
	t.Parallel()
	all := readExpected(t, "parquet/testdata/rows.jsonl.gz")
	data, err := os.ReadFile("parquet/testdata/zstd.parquet")
	if err != nil {
		t.Fatal(err)
	}
	cols := []string{"ls", "name", "id"}
	var want []string
	for _, line := range all {
		var row map[string]json.RawMessage
		if err := json.Unmarshal([]byte(line), &row); err != nil {
			t.Fatal(err)
		}
		want = append(want, fmt.Sprintf(`{"id":%s,"name":%s,"ls":%s}`, row["id"], row["name"], row["ls"]))
	}
	got, _ := readParquetSplits(t, data, 50000, cols)
	compareRows(t, got, want)
	if len(got) > 0 && !strings.HasPrefix(got[0], `{"id":`) {
		t.Errorf("first row %s: columns are not in the file's order", got[0])
	}

	_, _, err = OpenFormat(context.Background(), memOpener(data, nil), Split{Key: "k", Start: 0, End: int64(len(data))},
		Options{Format: Parquet, Columns: []string{"id", "nope"}, Size: memSize(data)})
	if err == nil || !strings.Contains(err.Error(), `no column "nope"`) {
		t.Errorf("unknown column: err = %v", err)
	}
}

// A Parquet object named as compressed is refused: the suffix would make
// it a whole-file split of a codec Parquet does not use.
func TestParquetRefusesCompressedName(t *testing.T) {
	t.Parallel()
	_, _, err := OpenFormat(context.Background(), memOpener(nil, nil), Split{Key: "x.parquet.gz", Start: 0, End: 10},
		Options{Format: Parquet, Size: memSize(make([]byte, 10))})
	if err == nil || !strings.Contains(err.Error(), "compress") {
		t.Errorf("err = %v, want a refusal of the compressed name", err)
	}
}

// An object shorter than its planned range changed since planning.
func TestParquetShorterThanPlanned(t *testing.T) {
	t.Parallel()
	data, err := os.ReadFile("parquet/testdata/zstd.parquet")
	if err != nil {
		t.Fatal(err)
	}
	_, _, err = OpenFormat(context.Background(), memOpener(data, nil), Split{Key: "k", Start: 0, End: int64(len(data)) + 1},
		Options{Format: Parquet, Size: memSize(data)})
	if err == nil || !strings.Contains(err.Error(), "changed since planning") {
		t.Errorf("err = %v", err)
	}
}

func memOpener(data []byte, opens *atomic.Int64) RangeOpener {
	return func(_ context.Context, _ string, start int64) (io.ReadCloser, error) {
		if opens != nil {
			opens.Add(1)
		}
		return io.NopCloser(bytes.NewReader(data[start:])), nil
	}
}

func memSize(data []byte) SizeFunc {
	return func(context.Context, string) (int64, error) { return int64(len(data)), nil }
}

// readParquetSplits reads data planned at target bytes per split, split
// after split, and returns the rows and the streams opened.
func readParquetSplits(t *testing.T, data []byte, target int64, cols []string) ([]string, int64) {
	t.Helper()
	var opens atomic.Int64
	var rows []string
	for _, s := range Plan([]Object{{Key: "f.parquet", Size: int64(len(data))}}, target) {
		rc, _, err := OpenFormat(context.Background(), memOpener(data, &opens), s, Options{Format: Parquet, Columns: cols, Size: memSize(data)})
		if err != nil {
			t.Fatalf("split [%d, %d): %v", s.Start, s.End, err)
		}
		sc := bufio.NewScanner(rc)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			rows = append(rows, sc.Text())
		}
		if err := sc.Err(); err != nil {
			t.Fatalf("split [%d, %d): %v", s.Start, s.End, err)
		}
		if err := rc.Close(); err != nil {
			t.Fatal(err)
		}
	}
	return rows, opens.Load()
}

func readExpected(t *testing.T, path string) []string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	z, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(z)
	if err != nil {
		t.Fatal(err)
	}
	return strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
}

// compareRows holds got to want row by row, as JSON values: numbers are
// equal when they are the same number however written (DuckDB's Python
// writes 1.0 where Go writes 1).
func compareRows(t *testing.T, got, want []string) {
	t.Helper()
	if len(got) != len(want) {
		t.Errorf("%d rows, want %d", len(got), len(want))
	}
	bad := 0
	for i := range min(len(got), len(want)) {
		g, w := decodeJSON(t, got[i]), decodeJSON(t, want[i])
		if !reflect.DeepEqual(g, w) {
			t.Errorf("row %d:\n got %s\nwant %s", i, got[i], want[i])
			if bad++; bad == 3 {
				return
			}
		}
	}
}

// decodeJSON decodes a JSON text with its numbers as exact rationals,
// written in lowest terms.
func decodeJSON(t *testing.T, s string) any {
	t.Helper()
	d := json.NewDecoder(strings.NewReader(s))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		t.Fatalf("%s: %v", s, err)
	}
	return exact(v)
}

func exact(v any) any {
	switch x := v.(type) {
	case json.Number:
		r, ok := new(big.Rat).SetString(string(x))
		if !ok {
			return "bad number " + string(x)
		}
		return "number " + r.RatString()
	case map[string]any:
		for k, e := range x {
			x[k] = exact(e)
		}
	case []any:
		for i, e := range x {
			x[i] = exact(e)
		}
	}
	return v
}
