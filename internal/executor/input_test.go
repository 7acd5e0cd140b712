package executor

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"testing"
	"testing/iotest"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/batchwork/batchwork/internal/executor/feed"
	"github.com/batchwork/batchwork/shared/control"
	"github.com/batchwork/batchwork/shared/domain"
	"github.com/batchwork/batchwork/shared/spec"
	"github.com/batchwork/batchwork/shared/split"
)

func TestCSVRecordCount(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, in string
		want     int64
	}{
		{"empty", "", 0},
		{"records", "a,b\n1,2\n", 2},
		{"a quoted newline is not a record", "1,\"x\ny\"\n2,z\n", 2},
		{"quoted CRLF", "1,\"x\r\ny\"\r\n2,z\r\n", 2},
		{"blank lines are not records", "\n1\n\r\n\n2\n", 2},
		{"last record without newline", "1\n2", 2},
		{"escaped quotes", "\"a \"\"b\"\"\nc\"\n", 1},
		{"an empty quoted field is a record", "\"\"\n", 1},
		{"a lone carriage return is a field", "\r\r\n1\n", 2},
		{"a final lone carriage return is dropped", "1\n\r", 1},
		{"a space is a field", " \n", 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			task := &Task{Format: spec.FormatCSV, Input: iotest.OneByteReader(strings.NewReader(tc.in))}
			lc := countInput(task)
			if _, err := io.Copy(io.Discard, task.Input); err != nil {
				t.Fatal(err)
			}
			if got := lc.Records(); got != tc.want {
				t.Fatalf("records %d, want %d", got, tc.want)
			}
			// encoding/csv agrees.
			recs, err := csv.NewReader(strings.NewReader(tc.in)).ReadAll()
			if err != nil || int64(len(recs)) != tc.want {
				t.Fatalf("csv.Reader read %d records (%v), want %d", len(recs), err, tc.want)
			}
		})
	}
}

// inputCP is a control plane whose claims carry an input split, and that
// records what commits and failures it gets.
type inputCP struct {
	fakeCP
	input split.Split

	mu     sync.Mutex
	result *control.CommitResult
}

func (f *inputCP) Claim(ctx context.Context, ref domain.TaskRef) (control.Claim, error) {
	c, err := f.fakeCP.Claim(ctx, ref)
	c.Task.Input = &f.input
	return c, err
}

func (f *inputCP) Commit(ctx context.Context, c control.Claim, r control.CommitResult) error {
	f.mu.Lock()
	f.result = &r
	f.mu.Unlock()
	return f.fakeCP.Commit(ctx, c, r)
}

func gzipped(t *testing.T, s string) []byte {
	t.Helper()
	var b bytes.Buffer
	w := gzip.NewWriter(&b)
	if _, err := io.WriteString(w, s); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// The runner reads a task's split in its stage's format: the function
// sees the format, a CSV file's header and the split's records; the
// records read are counted as records of the format; and a JSON Lines
// record that is not JSON fails the attempt even when the function
// ignores the read error.
func TestRunnerInputFormats(t *testing.T) {
	t.Parallel()
	const table = "id,note\n1,\"two\nlines\"\n2,plain\n"
	objects := map[string][]byte{
		"in/t.csv":  []byte(table),
		"in/l.txt":  []byte("a\nb\nc\n"),
		"in/l.gz":   gzipped(t, "a\nb\n"),
		"in/j.json": []byte("{\"a\":1}\n{\"a\":}\n"),
	}
	// scan reads lines and, like careless code, drops the scanner's error.
	scan := func(t *Task) []string {
		var got []string
		sc := bufio.NewScanner(t.Input)
		for sc.Scan() {
			got = append(got, sc.Text())
		}
		return got
	}
	cases := []struct {
		name       string
		format     string // "" for none
		key        string
		read       func(t *Task) []string
		wantFormat string
		wantHeader []string
		want       []string
		wantIn     int64
		wantFail   string // a substring of the failure cause, if the attempt fails
	}{
		{name: "csv", format: "csv", key: "in/t.csv", wantFormat: "csv", wantHeader: []string{"id", "note"},
			read: func(t *Task) []string {
				recs, err := csv.NewReader(t.Input).ReadAll()
				if err != nil {
					return []string{err.Error()}
				}
				return []string{fmt.Sprint(recs)}
			},
			want: []string{"[[1 two\nlines] [2 plain]]"}, wantIn: 2},
		{name: "lines by default", key: "in/l.txt", read: scan, wantFormat: "lines", want: []string{"a", "b", "c"}, wantIn: 3},
		{name: "gzip", format: "lines", key: "in/l.gz", read: scan, wantFormat: "lines", want: []string{"a", "b"}, wantIn: 2},
		{name: "a bad json record fails the attempt", format: "jsonl", key: "in/j.json", read: scan, wantFormat: "jsonl",
			want: []string{`{"a":1}`}, wantFail: `read input: jsonl: object "in/j.json", record at byte 8: invalid JSON`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			format := ""
			if tc.format != "" {
				format = fmt.Sprintf(", format: %s", tc.format)
			}
			sp := mustSpec(t, fmt.Sprintf("name: j\nstages:\n  - name: s\n    task: work\n    partitions:\n      input: {prefix: s3://bucket/in/%s}\n", format))
			blob := newBlob()
			for k, v := range objects {
				blob.Put("bucket", k, v)
			}
			cp := &inputCP{fakeCP: fakeCP{spec: sp, lease: time.Minute}, input: split.Split{Key: tc.key, Start: 0, End: int64(len(objects[tc.key]))}}
			var seen *Task
			var got []string
			reg := NewRegistry()
			reg.Register("work", func(ctx context.Context, t *Task) error {
				seen = t
				got = tc.read(t)
				return nil
			})
			r := &Runner{CP: cp, Blob: blob, Registry: reg, Log: discard(), HeartbeatEvery: time.Hour}
			res := r.Handle(context.Background(), feed.Delivery{Body: "j1/0/0", SentAt: time.Now()}, nil)
			if seen == nil {
				t.Fatalf("the task did not run: %+v", res)
			}
			if seen.Format != tc.wantFormat {
				t.Errorf("Format %q, want %q", seen.Format, tc.wantFormat)
			}
			if diff := cmp.Diff(tc.wantHeader, seen.Header); diff != "" {
				t.Errorf("Header (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("records (-want +got):\n%s", diff)
			}
			_, commits, fails := cp.snapshot()
			if tc.wantFail != "" {
				if len(fails) != 1 || len(commits) != 0 || !strings.Contains(cp.causes[0], tc.wantFail) {
					t.Fatalf("commits %v, fails %v (%q), want one failure saying %q", commits, fails, cp.causes, tc.wantFail)
				}
				return
			}
			if len(commits) != 1 || cp.result == nil {
				t.Fatalf("commits %v, fails %v (%q), want a commit; result %+v", commits, fails, cp.causes, res)
			}
			if cp.result.RecordsIn != tc.wantIn {
				t.Errorf("RecordsIn %d, want %d", cp.result.RecordsIn, tc.wantIn)
			}
		})
	}
}

// Every format the spec accepts is one the reader opens.
func TestSpecFormatsOpen(t *testing.T) {
	t.Parallel()
	open := func(ctx context.Context, key string, start int64) (io.ReadCloser, error) {
		return io.NopCloser(strings.NewReader("a\n")), nil
	}
	for _, f := range spec.Formats {
		rc, _, err := split.OpenFormat(context.Background(), open, split.Split{Key: "k", End: 2}, split.Options{Format: f})
		switch {
		case err == nil:
			rc.Close()
		case errors.Is(err, split.ErrUnknownFormat), f != split.Parquet: // "a\n" is no Parquet file
			t.Errorf("format %q: %v", f, err)
		}
	}
	if !cmp.Equal(spec.Formats, split.Formats) {
		t.Errorf("spec formats %v, split formats %v", spec.Formats, split.Formats)
	}
}
