package integration

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/batchwork/batchwork/shared/batchwork"
	sm "github.com/batchwork/batchwork/statemachine"
)

// An input object that is not valid for its format fails its task on the
// first attempt, with attempts left: the object is pinned, so every retry
// would read the same bytes. The job's error names the object and the
// problem. A task reads its input to the end, so a stream corrupted past
// its header fails the same way.
func TestCorruptInputFailsTaskAtOnce(t *testing.T) {
	t.Parallel()
	var calls atomic.Int32
	reg := batchwork.NewRegistry()
	reg.Register("corrupt.copy", func(ctx context.Context, tk *batchwork.Task) error {
		calls.Add(1)
		_, err := io.Copy(tk.Out, tk.Input)
		return err
	})
	e := newEnv(t, reg, envOptions{})
	gz := gzipBytes(t, strings.Repeat("a line of text\n", 2000))
	broken := slices.Clone(gz)
	for i := len(broken) / 2; i < len(broken)-8; i++ {
		broken[i] ^= 0x5a // the deflate stream, not the header or trailer
	}
	e.putInput("tester", "corrupt/pq/not.parquet", []byte("this is not a Parquet file, though it is named as one\n"))
	e.putInput("tester", "corrupt/gzhead/not.gz", []byte("plain text named .gz\n"))
	e.putInput("tester", "corrupt/gzbody/broken.gz", broken)
	cases := []struct {
		name, prefix, format, want string
	}{
		{"parquet", "corrupt/pq/", "parquet", `not.parquet": invalid magic footer of parquet file`},
		{"gzip header", "corrupt/gzhead/", "lines", `not.gz" is named .gz but is not gzip data`},
		{"gzip stream", "corrupt/gzbody/", "lines", `broken.gz": flate: corrupt input`},
	}
	ids := make([]string, len(cases))
	for i, c := range cases {
		spec := fmt.Appendf(nil, `{"name":"corrupt","retry":{"maxAttempts":3,"backoff":"1ms"},"stages":[{"name":"s","task":"corrupt.copy",`+
			`"partitions":{"input":{"prefix":"inputs:%s","format":%q}}}]}`, c.prefix, c.format)
		ids[i] = e.submit("corrupt-"+c.name, spec)
	}
	for i, c := range cases {
		st := e.waitJob(ids[i], 2*time.Minute)
		if st.State != string(sm.JobFailed) {
			t.Errorf("%s: job %s, want FAILED", c.name, st.State)
			continue
		}
		if !strings.Contains(st.Error, "on attempt 1 of 3") || !strings.Contains(st.Error, c.want) {
			t.Errorf("%s: job error %q, want it to fail on attempt 1 of 3 naming %s", c.name, st.Error, c.want)
		}
		tasks := tasksOf(t, e, ids[i])
		if len(tasks) != 1 || len(tasks[0].Attempts) != 1 {
			t.Errorf("%s: tasks %+v, want one task with one attempt", c.name, tasks)
		}
	}
}
