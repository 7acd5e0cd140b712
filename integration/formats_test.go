package integration

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/klauspost/compress/zstd"

	"github.com/batchwork/batchwork/shared/batchwork"
	"github.com/batchwork/batchwork/shared/control"
	sm "github.com/batchwork/batchwork/statemachine"
)

// formatTasks registers the tasks of TestInputFormats: each writes one
// output line per input record.
func formatTasks() *batchwork.Registry {
	reg := batchwork.NewRegistry()
	// formats.lines copies its lines.
	reg.Register("formats.lines", func(ctx context.Context, t *batchwork.Task) error {
		sc := bufio.NewScanner(t.Input)
		for sc.Scan() {
			if _, err := fmt.Fprintln(t.Out, sc.Text()); err != nil {
				return err
			}
		}
		return sc.Err()
	})
	// formats.jsonl writes each record compacted.
	reg.Register("formats.jsonl", func(ctx context.Context, t *batchwork.Task) error {
		if t.Format != "jsonl" {
			return fmt.Errorf("format %q, want jsonl", t.Format)
		}
		sc := bufio.NewScanner(t.Input)
		for sc.Scan() {
			var b bytes.Buffer
			if err := json.Compact(&b, sc.Bytes()); err != nil {
				return err
			}
			b.WriteByte('\n')
			if _, err := t.Out.Write(b.Bytes()); err != nil {
				return err
			}
		}
		return sc.Err()
	})
	// formats.csv writes each record as a JSON object keyed by the header.
	reg.Register("formats.csv", func(ctx context.Context, t *batchwork.Task) error {
		if t.Format != "csv" || len(t.Header) == 0 {
			return fmt.Errorf("format %q, header %q: want csv and a header", t.Format, t.Header)
		}
		r := csv.NewReader(t.Input)
		for {
			rec, err := r.Read()
			if err != nil {
				if errors.Is(err, io.EOF) {
					return nil
				}
				return err
			}
			if _, err := t.Out.Write(csvRecordLine(t.Header, rec)); err != nil {
				return err
			}
		}
	})
	return reg
}

func csvRecordLine(header, rec []string) []byte {
	m := map[string]string{}
	for i, h := range header {
		m[h] = rec[i]
	}
	b, _ := json.Marshal(m)
	return append(b, '\n')
}

// testCSV is a CSV file of n records, most of them with quoted newlines,
// commas and escaped quotes, so that split boundaries fall inside quoted
// fields.
func testCSV(n int) string {
	var b strings.Builder
	b.WriteString("id,text,note\r\n")
	for i := range n {
		switch i % 4 {
		case 0:
			fmt.Fprintf(&b, "%d,\"line one\nline two, with a comma\",plain\r\n", i)
		case 1:
			fmt.Fprintf(&b, "%d,\"say \"\"hi\"\" %d\",\r\n", i, i)
		case 2:
			fmt.Fprintf(&b, "%d,\"\n\n\",\"a\r\nb\"\r\n", i)
		default:
			fmt.Fprintf(&b, "%d,x%d,y\r\n", i, i)
		}
	}
	return b.String()
}

// noisyLines are n lines that compress poorly, so that a compressed file
// of them is several splits long.
func noisyLines(prefix string, n int, seed int64) []string {
	rng := rand.New(rand.NewSource(seed))
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s %d %016x %016x", prefix, i, rng.Uint64(), rng.Uint64())
	}
	return out
}

func gzipBytes(t *testing.T, s string) []byte {
	t.Helper()
	var b bytes.Buffer
	w := gzip.NewWriter(&b)
	if _, err := w.Write([]byte(s)); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func zstdBytes(t *testing.T, s string) []byte {
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
	return b.Bytes()
}

// jobLines reads a succeeded job's output lines, sorted.
func jobLines(t *testing.T, e *env, st control.JobStatus) []string {
	t.Helper()
	if st.State != string(sm.JobSucceeded) {
		t.Fatalf("job %s %s (%s), want SUCCEEDED", st.ID, st.State, st.Error)
	}
	var got []string
	for _, o := range readManifest(t, e, st.Manifest).Outputs {
		raw, err := e.r.Blob.Get(context.Background(), o.Key)
		if err != nil {
			t.Fatal(err)
		}
		for line := range strings.SplitSeq(string(raw), "\n") {
			if line != "" {
				got = append(got, line)
			}
		}
	}
	slices.Sort(got)
	return got
}

// Real inputs on the emulator: a CSV file with quoted newlines cut into
// several splits, a gzip and a zstd file each read whole by one task
// (both are larger than a split), and JSON Lines. Every record is read
// exactly once, the records in are counted as records of the format, and
// a JSON Lines record that is not JSON fails the job with an error naming
// the object and the record's offset.
func TestInputFormats(t *testing.T) {
	t.Parallel()
	e := newEnv(t, formatTasks(), envOptions{})
	const owner = "formats"
	spec := func(name, task, prefix, format string) []byte {
		return fmt.Appendf(nil, `{"name":%q,"retry":{"maxAttempts":1},"stages":[{"name":"s","task":%q,`+
			`"partitions":{"input":{"prefix":%q,"format":%q,"splitSize":4096}}}]}`, name, task, prefix, format)
	}

	// CSV.
	table := testCSV(800)
	e.putInput(owner, "csv/t.csv", []byte(table))
	all, err := csv.NewReader(strings.NewReader(table)).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	var wantCSV []string
	for _, rec := range all[1:] {
		wantCSV = append(wantCSV, strings.TrimSuffix(string(csvRecordLine(all[0], rec)), "\n"))
	}
	slices.Sort(wantCSV)

	// Compressed lines.
	gzLines, zstLines := noisyLines("gz", 600, 1), noisyLines("zst", 600, 2)
	gz := gzipBytes(t, strings.Join(gzLines, "\n")+"\n")
	zst := zstdBytes(t, strings.Join(zstLines, "\n")) // no final newline
	if len(gz) < 2*4096 || len(zst) < 2*4096 {
		t.Fatalf("compressed inputs of %d and %d bytes: want each longer than two splits", len(gz), len(zst))
	}
	e.putInput(owner, "comp/a.gz", gz)
	e.putInput(owner, "comp/b.zst", zst)
	wantComp := slices.Concat(gzLines, zstLines)
	slices.Sort(wantComp)

	// JSON Lines, with blank lines, which are not records.
	var jsonl strings.Builder
	var wantJSONL []string
	for i := range 300 {
		fmt.Fprintf(&jsonl, "{ \"i\": %d, \"s\": \"record %d\" }\n", i, i)
		wantJSONL = append(wantJSONL, fmt.Sprintf(`{"i":%d,"s":"record %d"}`, i, i))
		if i%50 == 0 {
			jsonl.WriteString("\n")
		}
	}
	slices.Sort(wantJSONL)
	e.putInput(owner, "jsonl/a.jsonl", []byte(jsonl.String()))
	bad := "{\"ok\":1}\n{\"ok\":2}\n{\"ok\":\n"
	e.putInput(owner, "bad/x.jsonl", []byte(bad))

	jobs := []struct {
		name, task, prefix, format string
		want                       []string
		splits                     func(n int) bool
	}{
		{"csv", "formats.csv", "inputs:csv/", "csv", wantCSV, func(n int) bool { return n >= 5 }},
		{"compressed", "formats.lines", "inputs:comp/", "lines", wantComp, func(n int) bool { return n == 2 }},
		{"jsonl", "formats.jsonl", "inputs:jsonl/", "jsonl", wantJSONL, func(n int) bool { return n >= 2 }},
	}
	ids := make([]string, len(jobs))
	for i, j := range jobs {
		ids[i] = e.submitAs(owner, j.name, spec(j.name, j.task, j.prefix, j.format))
	}
	badID := e.submitAs(owner, "bad", spec("bad", "formats.jsonl", "inputs:bad/", "jsonl"))
	for i, j := range jobs {
		st := e.waitJobAs(owner, ids[i], 2*time.Minute)
		got := jobLines(t, e, st)
		if diff := cmp.Diff(j.want, got); diff != "" {
			t.Errorf("%s: output lines (-want +got):\n%s", j.name, diff)
		}
		s := st.Stages[0]
		if !j.splits(s.Total) {
			t.Errorf("%s: %d tasks", j.name, s.Total)
		}
		if s.RecordsIn != int64(len(j.want)) {
			t.Errorf("%s: %d records in, want %d", j.name, s.RecordsIn, len(j.want))
		}
	}
	st := e.waitJobAs(owner, badID, 2*time.Minute)
	wantErr := fmt.Sprintf(`x.jsonl", record at byte %d: invalid JSON: unexpected end of JSON input`, strings.LastIndex(bad, "{"))
	if st.State != string(sm.JobFailed) || !strings.Contains(st.Error, wantErr) {
		t.Fatalf("bad jsonl job %s (%s), want FAILED with %q", st.State, st.Error, wantErr)
	}
}
