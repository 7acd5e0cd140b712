package control

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/batchwork/batchwork/shared/lazylog"
)

// TestTaskLines checks the control plane's lines of a claimed and
// committed task, through the lazy handler the runner and the functions
// install: the claim's debug line only when debug lines are written (it
// is not even built otherwise), the commit's line always, each with the
// task's ids, its attempt and the executor, in that order.
func TestTaskLines(t *testing.T) {
	noTime := func(groups []string, a slog.Attr) slog.Attr {
		if len(groups) == 0 && a.Key == slog.TimeKey {
			return slog.Attr{}
		}
		return a
	}
	for _, tc := range []struct {
		level slog.Level
		want  []string
	}{
		{slog.LevelDebug, []string{
			`{"level":"DEBUG","msg":"task claimed","job_id":"JOB","stage":0,"task":"JOB/0/1","partition":1,"attempt":1,"executor_id":"e-1"}`,
			`{"level":"INFO","msg":"task committed","job_id":"JOB","stage":0,"task":"JOB/0/1","partition":1,"attempt":1,"executor_id":"e-1","outputs":1}`,
		}},
		{slog.LevelInfo, []string{
			`{"level":"INFO","msg":"task committed","job_id":"JOB","stage":0,"task":"JOB/0/1","partition":1,"attempt":1,"executor_id":"e-1","outputs":1}`,
		}},
	} {
		t.Run(tc.level.String(), func(t *testing.T) {
			r := newUnitRig(t)
			var buf bytes.Buffer
			r.svc = New(unitTimings, r.store, r.queue, r.blob,
				lazylog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: tc.level, ReplaceAttr: noTime})))
			r.svc.Now = r.clock.Now
			r.svc.Jitter = func(time.Duration) time.Duration { return 0 }
			r.svc.Sleep = r.sleep
			job := r.submit(oneStage(2, 3, ""))
			buf.Reset() // the submit's lines
			r.ctx = WithExecutor(r.ctx, "e-1")
			r.commit(r.claim(taskRef(job, 0, 1)), 1)
			var got []string
			for _, l := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
				if strings.Contains(l, `"task claimed"`) || strings.Contains(l, `"task committed"`) {
					got = append(got, strings.ReplaceAll(l, job, "JOB"))
				}
			}
			if strings.Join(got, "\n") != strings.Join(tc.want, "\n") {
				t.Errorf("lines:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(tc.want, "\n"))
			}
		})
	}
}
