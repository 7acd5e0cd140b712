package executor

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/batchwork/batchwork/internal/executor/feed"
	"github.com/batchwork/batchwork/shared/domain"
)

// A parquet stage's last record, written without its newline, is a
// record as it is with one: when it does not fit the schema the attempt
// fails permanently (its retry writes the same record) with the bad
// record's error, or the record is rejected and counts against the
// stage's maxBadRecords; never is its message left to come back after
// the lease, again and again, with no cause recorded.
func TestParquetBadLastLineWithoutNewlineFailsTheAttempt(t *testing.T) {
	t.Parallel()
	job := func(maxBad int) string {
		return `{"name":"pq","stages":[{"name":"s","task":"work","partitions":{"count":1},"maxBadRecords":` + strconv.Itoa(maxBad) + `,` +
			`"output":{"format":"parquet","schema":[{"name":"a","type":"int64"}]}}]}`
	}
	cases := []struct {
		name   string
		maxBad int
		write  string
		cause  string // "": the attempt commits
	}{
		{"none allowed", 0, `{"a":1}` + "\n" + `{"a":"not a number"}`, `column "a"`},
		{"past maxBadRecords", 1, `{"a":"x"}` + "\n" + `{"a":"not a number"}`, "maxBadRecords"},
		{"within maxBadRecords", 1, `{"a":1}` + "\n" + `{"a":"not a number"}`, ""},
	}
	for _, tc := range cases {
		for _, tail := range []string{"\n", ""} {
			cp := &fakeCP{spec: mustSpec(t, job(tc.maxBad)), lease: time.Minute}
			reg := NewRegistry()
			reg.Register("work", func(ctx context.Context, t *Task) error {
				_, err := t.Out.Write([]byte(tc.write + tail))
				_ = err // a task may ignore a refusal: the attempt fails all the same
				return nil
			})
			r := &Runner{CP: cp, Blob: newBlob(), Registry: reg, Log: discard(), HeartbeatEvery: time.Hour}
			res := r.Handle(context.Background(), feed.Delivery{Body: "j1/0/0", SentAt: time.Now()}, nil)
			_, commits, fails := cp.snapshot()
			if tc.cause == "" {
				if res.Action != feed.Delete || len(commits) != 1 || len(fails) != 0 {
					t.Errorf("%s, tail %q: result %+v, commits %v, fails %v; want the attempt committed", tc.name, tail, res, commits, fails)
				}
				continue
			}
			if res.Action == feed.Leave || len(commits) != 0 || len(fails) != 1 {
				t.Errorf("%s, tail %q: result %+v, commits %v, fails %v; want the attempt failed", tc.name, tail, res, commits, fails)
				continue
			}
			if !strings.Contains(cp.causes[0], tc.cause) || cp.classes[0] != domain.ClassPermanent {
				t.Errorf("%s, tail %q: cause %q of class %v, want the bad record's (%s), permanent", tc.name, tail, cp.causes[0], cp.classes[0], tc.cause)
			}
		}
	}
}
