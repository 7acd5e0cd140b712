package split

import (
	"context"
	"errors"
	"io"
	"os"
	"strings"
	"testing"
	"testing/iotest"
)

// Every reader's error about an object's own bytes wraps ErrCorruptInput,
// and names the object; an error of reading it (I/O, a cancelled context)
// does not, so it stays retryable.
func TestCorruptInputErrors(t *testing.T) {
	t.Parallel()
	pq, err := os.ReadFile("parquet/testdata/zstd.parquet")
	if err != nil {
		t.Fatal(err)
	}
	boom := errors.New("connection reset")
	// failAfter serves the first n bytes of data from any offset, then fails.
	failAfter := func(data []byte, n int) RangeOpener {
		return func(_ context.Context, _ string, start int64) (io.ReadCloser, error) {
			rest := data[start:]
			if int64(n)-start < int64(len(rest)) {
				rest = rest[:max(0, int64(n)-start)]
			}
			return io.NopCloser(io.MultiReader(strings.NewReader(string(rest)), iotest.ErrReader(boom))), nil
		}
	}
	lines := strings.Repeat("a line of text\n", 2000)
	broken := []byte(gz(t, lines))
	for i := len(broken) / 2; i < len(broken)-8; i++ {
		broken[i] ^= 0x5a
	}
	brokenZst := []byte(zst(t, lines))
	for i := len(brokenZst) / 2; i < len(brokenZst)-4; i++ {
		brokenZst[i] ^= 0x5a
	}
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	tests := []struct {
		name, key string
		data      []byte
		open      RangeOpener // default: data from memory
		ctx       context.Context
		opt       Options
		corrupt   bool
	}{
		{name: "not parquet", key: "x.parquet", data: []byte("plain text, not Parquet\n"), opt: Options{Format: Parquet}, corrupt: true},
		{name: "parquet unknown column", key: "x.parquet", data: pq, opt: Options{Format: Parquet, Columns: []string{"nope"}}, corrupt: true},
		{name: "parquet named compressed", key: "x.parquet.gz", data: pq, opt: Options{Format: Parquet}, corrupt: true},
		{name: "gzip header", key: "x.gz", data: []byte("plain text named .gz\n"), corrupt: true},
		{name: "gzip stream", key: "x.gz", data: broken, corrupt: true},
		{name: "zstd stream", key: "x.zst", data: brokenZst, corrupt: true},
		{name: "zstd jsonl stream", key: "x.jsonl.zst", data: brokenZst, opt: Options{Format: JSONL}, corrupt: true},
		{name: "invalid json", key: "x.jsonl", data: []byte("{\"a\":1}\n{\"a\":\n"), opt: Options{Format: JSONL}, corrupt: true},
		{name: "json record too long", key: "x.jsonl", data: []byte(`"` + strings.Repeat("a", MaxJSONRecord) + "\"\n"), opt: Options{Format: JSONL}, corrupt: true},
		{name: "csv header does not parse", key: "x.csv", data: []byte("a,\"b\n"), opt: Options{Format: CSV}, corrupt: true},
		{name: "csv header too long", key: "x.csv", data: []byte(strings.Repeat("h", MaxHeader+1) + "\n1\n"), opt: Options{Format: CSV}, corrupt: true},

		{name: "parquet footer read fails", key: "x.parquet", data: pq, open: failAfter(pq, 0), opt: Options{Format: Parquet}},
		{name: "parquet page read fails", key: "x.parquet", data: pq, open: failAfter(pq, len(pq)/2), opt: Options{Format: Parquet}},
		{name: "parquet cancelled", key: "x.parquet", data: pq, ctx: cancelled, opt: Options{Format: Parquet}},
		{name: "gzip read fails", key: "x.gz", data: []byte(gz(t, lines)), open: failAfter([]byte(gz(t, lines)), 100)},
		{name: "zstd read fails", key: "x.zst", data: []byte(zst(t, lines)), open: failAfter([]byte(zst(t, lines)), 100)},
		{name: "jsonl read fails", key: "x.jsonl", data: []byte("{}\n{}\n"), open: failAfter([]byte("{}\n{}\n"), 4), opt: Options{Format: JSONL}},
		{name: "csv header read fails", key: "x.csv", data: []byte("a,b\n1,2\n"), open: failAfter([]byte("a,b\n1,2\n"), 2), opt: Options{Format: CSV}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			open := tc.open
			if open == nil {
				open = memOpener(tc.data, nil)
			}
			ctx := tc.ctx
			if ctx == nil {
				ctx = context.Background()
			}
			o := tc.opt
			o.Size = memSize(tc.data)
			sp := Split{Key: tc.key, Start: 0, End: int64(len(tc.data))}
			rc, _, err := OpenFormat(ctx, open, sp, o)
			if err == nil {
				_, err = io.ReadAll(rc)
				rc.Close()
			}
			if err == nil {
				t.Fatal("read the whole split without an error")
			}
			if got := errors.Is(err, ErrCorruptInput); got != tc.corrupt {
				t.Errorf("errors.Is(%v, ErrCorruptInput) = %t, want %t", err, got, tc.corrupt)
			}
			if tc.corrupt && !strings.Contains(err.Error(), tc.key) {
				t.Errorf("error %q does not name the object %q", err, tc.key)
			}
		})
	}
}
