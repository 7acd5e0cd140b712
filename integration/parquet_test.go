package integration

import (
	"bufio"
	"compress/gzip"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/big"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/batchwork/batchwork/shared/batchwork"
)

// Parquet files written by DuckDB, fresh for the run (snappy, zstd and
// gzip pages, row groups of 2,048 rows and one of all of them, nulls,
// decimals, timestamps, binary, dictionary-encoded strings, nested
// structs, lists and maps), read by a job whose splits are far smaller
// than a row group: the job's records are exactly the rows DuckDB reads
// from the files, each once, and with columns only those columns.
func TestParquetInputEqualsDuckDB(t *testing.T) {
	t.Parallel()
	const rows = 7000
	dir := t.TempDir()
	gen := exec.Command("../.venv/bin/python", "../shared/split/parquet/testdata/gen.py", dir, fmt.Sprint(rows))
	if out, err := gen.CombinedOutput(); err != nil {
		t.Fatalf("generate Parquet with DuckDB (make venv installs it): %v\n%s", err, out)
	}
	want := duckDBRows(t, filepath.Join(dir, "rows.jsonl.gz"))
	if len(want) != rows {
		t.Fatalf("DuckDB read %d rows, want %d", len(want), rows)
	}

	reg := batchwork.NewRegistry()
	reg.Register("parquet.rows", func(ctx context.Context, t *batchwork.Task) error {
		if t.Format != "parquet" {
			return fmt.Errorf("format %q, want parquet", t.Format)
		}
		_, err := io.Copy(t.Out, t.Input)
		return err
	})
	e := newEnv(t, reg, envOptions{})
	const owner = "parquet"
	files := []string{"snappy", "zstd", "gzip"}
	var size int64
	for _, f := range files {
		b, err := os.ReadFile(filepath.Join(dir, f+".parquet"))
		if err != nil {
			t.Fatal(err)
		}
		size += int64(len(b))
		e.putInput(owner, "all/"+f+".parquet", b)
		if f == "zstd" {
			e.putInput(owner, "one/"+f+".parquet", b)
		}
	}
	spec := func(name, prefix, columns string) []byte {
		return fmt.Appendf(nil, `{"name":%q,"retry":{"maxAttempts":1},"stages":[{"name":"s","task":"parquet.rows",`+
			`"partitions":{"input":{"prefix":%q,"format":"parquet","splitSize":65536%s}}}]}`, name, prefix, columns)
	}
	allID := e.submitAs(owner, "all", spec("all", "inputs:all/", ""))
	colsID := e.submitAs(owner, "cols", spec("cols", "inputs:one/", `,"columns":["s","id"]`))

	var wantAll []string
	for range files {
		wantAll = append(wantAll, canonicalRows(t, want)...)
	}
	slices.Sort(wantAll)
	st := e.waitJobAs(owner, allID, 3*time.Minute)
	if diff := cmp.Diff(wantAll, canonicalRows(t, jobLines(t, e, st))); diff != "" {
		t.Errorf("rows (-DuckDB +job):\n%s", diff)
	}
	s := st.Stages[0]
	if s.RecordsIn != int64(len(wantAll)) {
		t.Errorf("%d records in, want %d", s.RecordsIn, len(wantAll))
	}
	if min := int(size / 65536); s.Total < min {
		t.Errorf("%d tasks over %d bytes, want at least %d", s.Total, size, min)
	}

	var wantCols []string
	for _, line := range want {
		var row map[string]json.RawMessage
		if err := json.Unmarshal([]byte(line), &row); err != nil {
			t.Fatal(err)
		}
		wantCols = append(wantCols, fmt.Sprintf(`{"id":%s,"s":%s}`, row["id"], row["s"]))
	}
	wantCols = canonicalRows(t, wantCols)
	slices.Sort(wantCols)
	st = e.waitJobAs(owner, colsID, 3*time.Minute)
	if diff := cmp.Diff(wantCols, canonicalRows(t, jobLines(t, e, st))); diff != "" {
		t.Errorf("rows of columns s, id (-DuckDB +job):\n%s", diff)
	}
}

func duckDBRows(t *testing.T, path string) []string {
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
	var out []string
	sc := bufio.NewScanner(z)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		out = append(out, sc.Text())
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// canonicalRows rewrites JSON rows so that equal values are equal text,
// sorted: keys in order, and each number as an exact rational (DuckDB's
// Python writes 1.0 where Go writes 1).
func canonicalRows(t *testing.T, rows []string) []string {
	t.Helper()
	out := make([]string, len(rows))
	for i, r := range rows {
		d := json.NewDecoder(strings.NewReader(r))
		d.UseNumber()
		var v any
		if err := d.Decode(&v); err != nil {
			t.Fatalf("%s: %v", r, err)
		}
		b, err := json.Marshal(exactNumbers(v))
		if err != nil {
			t.Fatal(err)
		}
		out[i] = string(b)
	}
	slices.Sort(out)
	return out
}

func exactNumbers(v any) any {
	switch x := v.(type) {
	case json.Number:
		r, ok := new(big.Rat).SetString(string(x))
		if !ok {
			return "bad number " + string(x)
		}
		return "number " + r.RatString()
	case map[string]any:
		for k, e := range x {
			x[k] = exactNumbers(e)
		}
	case []any:
		for i, e := range x {
			x[i] = exactNumbers(e)
		}
	}
	return v
}
