package integration

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/batchwork/batchwork/cmd/batchwork/cli"
	"github.com/batchwork/batchwork/shared/batchwork"
	sm "github.com/batchwork/batchwork/statemachine"
)

// What went wrong in a job, on the console's job page: a job whose stage
// tolerates one failed task, where one task fails with a permanent error,
// one fails once and is retried, and the committed ones reject records.
// The page must say the job succeeded with a failed partition, list the
// failed task with its error, its error class and its log lines, list the
// bad records, and mark the failure and the retry on the timeline.
func TestConsoleShowsFailures(t *testing.T) {
	t.Parallel()
	start := time.Now()
	wait := func(within time.Duration, what string, cond func() bool) {
		t.Helper()
		waitFor(t, within, what, cond)
		t.Logf("%5.1fs %s", time.Since(start).Seconds(), what)
	}
	wd := startBrowser(t)

	const permanent, transient = "injected: partition 2 is corrupt", "injected: a transient error"
	reg := batchwork.NewRegistry()
	reg.Register("cf.parse", func(ctx context.Context, tk *batchwork.Task) error {
		switch tk.Params["fail"] {
		case "perm":
			return batchwork.Permanent(errors.New(permanent))
		case "once":
			if tk.Attempt == 1 {
				return errors.New(transient)
			}
		}
		for i := range 2 {
			if err := tk.RejectAt(int64(10*i), []byte(fmt.Sprintf("rec %d of p%d", i, tk.Partition)), "made up"); err != nil {
				return err
			}
		}
		_, err := fmt.Fprintf(tk.Out, "p%d\n", tk.Partition)
		return err
	})
	e := newEnv(t, reg, envOptions{logFile: filepath.Join(t.TempDir(), "runner.log")})
	consoleURL := startConsole(t, e, "tester")

	id := e.submitAs("tester", "console-failures", []byte(`{"name":"failing","stages":[{"name":"parse","task":"cf.parse",
		"partitions":{"count":4,"params":[{"fail":"no"},{"fail":"once"},{"fail":"perm"},{"fail":"no"}]},
		"retry":{"maxAttempts":3,"backoff":"50ms"},"maxBadRecords":10,"toleratedFailures":{"count":1}}]}`))
	if st := e.waitJobAs("tester", id, time.Minute); st.State != string(sm.JobSucceeded) || st.FailedPartitions != 1 {
		t.Fatalf("job %s (%s) with %d failed partitions; want SUCCEEDED with 1", st.State, st.Error, st.FailedPartitions)
	}
	wd.navigate(consoleURL + "#/job/" + id)
	text := func(css string) string {
		return wd.script(`const n = document.querySelector('` + css + `'); return n ? n.textContent : ''`)
	}

	wait(20*time.Second, "the job's page to say it succeeded with a failed partition", func() bool {
		return text("#job-state") == "SUCCEEDED" && strings.HasPrefix(text("#job-tolerated"), "Succeeded with 1 failed partition:")
	})
	// What the job cost, under its header (docs/operations.md).
	if c := text("#job-cost"); !strings.HasPrefix(c, "Cost: $") || !strings.Contains(c, "in AWS requests (DynamoDB $") {
		t.Errorf("the job's cost line: %q", c)
	}
	if p := text(`#dag g.stage[data-stage="parse"] text.progress`); p != "3/4 tasks · 2 failed · 1 tolerated" {
		t.Errorf("the stage's progress: %q", p)
	}
	// The failed task, with its error and what ended it.
	wait(10*time.Second, "the failed task with its error and class", func() bool {
		row := text(`#failed-tasks tr[data-task="parse/2"]`)
		return strings.Contains(row, permanent) && strings.Contains(row, "permanent error") && strings.Contains(row, "tolerated")
	})
	if n := wd.script(`return String(document.querySelectorAll('#failed-tasks tbody tr').length)`); n != "1" {
		t.Errorf("%s failed tasks listed, want 1 (parse/1 was retried and committed)", n)
	}
	// Its log lines, from GET /jobs/{id}/logs.
	wd.script(`document.querySelector('#failed-tasks button.logs[data-logs="parse/2"]').click(); return ''`)
	wait(10*time.Second, "the failed task's log lines", func() bool {
		logs := text(`#failed-tasks tr[data-logs-of="parse/2"] pre`)
		return strings.Contains(logs, "task failed") && strings.Contains(logs, permanent)
	})

	// The bad records of the committed tasks: two each of parse/0, 1 and 3.
	wait(10*time.Second, "the bad records", func() bool {
		return wd.script(`return String(document.querySelectorAll('#bad-records tbody tr').length)`) == "6"
	})
	for _, want := range []string{"6 records rejected", "rec 1 of p3", "made up"} {
		if b := text("#bad-records"); !strings.Contains(b, want) {
			t.Errorf("the bad records section %q lacks %q", b, want)
		}
	}

	// The timeline marks the failure (the task's end) and the retry.
	marks := wd.script(`return [...document.querySelectorAll('#timeline text.mark')].map(m => m.dataset.mark + ':' + m.dataset.task + '/' + m.dataset.attempt).sort().join(',')`)
	if marks != "failed:parse/2/1,retry:parse/1/1" {
		t.Errorf("the timeline's marks: %q, want the failure of parse/2 and the retry of parse/1", marks)
	}
	if o := wd.script(`const r = document.querySelector('#timeline rect.attempt[data-task="parse/2"]'); return r ? r.dataset.outcome : ''`); o != "permanent" && o != "tolerated" {
		t.Errorf("parse/2's bar: outcome %q, want its permanent failure", o)
	}
	// Marks the job above cannot produce, from the attempts the task list
	// shows of speculative copies and continuations (failures.js alone,
	// with stub DOM builders).
	if got := wd.script(`const F = window.BatchworkFailures({ s: (tag, attrs) => attrs, num: String });
		const kinds = (t, a) => F.marks(t, a, 0, 1, 0, 1).map(m => m['data-mark']).join('+') || '-';
		const copied = (state, attempt) => ({ stage: 'm', partition: 0, state, attempt, copy: { attempt: 2, holderAttempt: 1 } });
		return [kinds(copied('SUCCEEDED', 2), { attempt: 1, outcome: 'speculation_lost' }), kinds(copied('SUCCEEDED', 2), { attempt: 2, outcome: 'committed' }),
			kinds(copied('SUCCEEDED', 2), { attempt: 1, outcome: 'committed' }), kinds(copied('SUCCEEDED', 2), { attempt: 2, outcome: 'speculation_lost' }),
			kinds({ state: 'SUCCEEDED', attempt: 2 }, { attempt: 1, outcome: 'continued' }), kinds({ state: 'SUCCEEDED', attempt: 2 }, { attempt: 2, outcome: 'committed' }),
			kinds({ state: 'FAILED', attempt: 2 }, { attempt: 1, outcome: 'timed_out' }), kinds({ state: 'FAILED', attempt: 2 }, { attempt: 2, outcome: 'out_of_memory' }),
		].join(',')`); got != "lost,copy+won,won,copy+lost,continued,-,retry,failed" {
		t.Errorf("timeline marks of copies, continuations and error classes: %q", got)
	}
	if shot := os.Getenv("BATCHWORK_CONSOLE_FAILURES_SCREENSHOT"); shot != "" {
		wd.screenshot(shot)
	}
	if msg := text("#error"); msg != "" && wd.script(`return String(document.getElementById('error').hidden)`) != "true" {
		t.Errorf("the page shows an error: %s", msg)
	}
}

// startConsole runs `batchwork ui` for owner against e's runner until the
// test ends, and returns the console's URL.
func startConsole(t *testing.T, e *env, owner string) string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var out, errOut syncBuffer
	code := make(chan int, 1)
	go func() { code <- e.cliRun(ctx, owner, &out, &errOut, "ui", "--listen", "127.0.0.1:0") }()
	t.Cleanup(func() {
		cancel()
		select {
		case c := <-code:
			if c != cli.ExitOK {
				t.Errorf("batchwork ui: exit %d: %s", c, errOut.String())
			}
		case <-time.After(10 * time.Second):
			t.Error("batchwork ui did not stop")
		}
	})
	var u string
	urlRE := regexp.MustCompile(`http://127\.0\.0\.1:\d+/[0-9a-f]{32}/`)
	waitFor(t, 10*time.Second, "batchwork ui to print its URL", func() bool {
		u = urlRE.FindString(out.String())
		return u != "" || strings.Contains(errOut.String(), "batchwork ui")
	})
	if u == "" {
		t.Fatalf("batchwork ui: %s%s", out.String(), errOut.String())
	}
	return u
}
