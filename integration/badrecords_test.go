package integration

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/batchwork/batchwork/internal/executor"
	"github.com/batchwork/batchwork/internal/executor/feed"
	"github.com/batchwork/batchwork/shared/batchwork"
	"github.com/batchwork/batchwork/shared/control"
	"github.com/batchwork/batchwork/shared/domain"
	sm "github.com/batchwork/batchwork/statemachine"
)

// badRecordTasks are the task functions of the bad-record tests:
// "bad.lines" copies its input's lines and rejects each line that starts
// with "bad"; "bad.n" rejects Params["n"] made-up records, at offsets it
// gives itself.
func badRecordTasks() *batchwork.Registry {
	reg := batchwork.NewRegistry()
	reg.Register("bad.lines", func(ctx context.Context, t *batchwork.Task) error {
		sc := bufio.NewScanner(t.Input)
		for sc.Scan() {
			if strings.HasPrefix(sc.Text(), "bad") {
				if err := t.Reject(sc.Bytes(), "starts with bad"); err != nil {
					return err
				}
				continue
			}
			if _, err := fmt.Fprintln(t.Out, sc.Text()); err != nil {
				return err
			}
		}
		return sc.Err()
	})
	reg.Register("bad.n", func(ctx context.Context, t *batchwork.Task) error {
		n, err := strconv.Atoi(t.Params["n"])
		if err != nil {
			return batchwork.Permanent(fmt.Errorf("param n: %w", err))
		}
		for i := range n {
			rec := fmt.Sprintf("p%d attempt %d record %d", t.Partition, t.Attempt, i)
			if err := t.RejectAt(int64(10*i), []byte(rec), "made up"); err != nil {
				return err
			}
		}
		return nil
	})
	return reg
}

// badLinesInput is lines of which those numbered in bad start with "bad",
// and the byte offset where each bad line starts.
func badLinesInput(name string, n int, bad ...int) (string, map[string]int64) {
	var b strings.Builder
	offsets := map[string]int64{}
	for i := range n {
		line := fmt.Sprintf("%s ok %d", name, i)
		if slices.Contains(bad, i) {
			line = fmt.Sprintf("bad %s %d\t{\"x\":%d}", name, i, i)
			offsets[line] = int64(b.Len())
		}
		b.WriteString(line + "\n")
	}
	return b.String(), offsets
}

// A job whose tasks reject records within the stage's maxBadRecords
// succeeds without them; status counts them, history notes them, and
// `batchwork result --bad-records` lists each with its task and where it
// starts in the task's input.
func TestBadRecordsWithinLimitAreListed(t *testing.T) {
	t.Parallel()
	e := newEnv(t, badRecordTasks(), envOptions{})
	const owner = "badrec"
	a, offA := badLinesInput("a", 40, 3, 17)
	b, offB := badLinesInput("b", 25, 24)
	e.putInput(owner, "bad/a.txt", []byte(a))
	e.putInput(owner, "bad/b.txt", []byte(b))
	id := e.submitAs(owner, "within", []byte(`{"name":"within","retry":{"maxAttempts":2},"stages":[{"name":"parse","task":"bad.lines",`+
		`"maxBadRecords":3,"partitions":{"input":{"prefix":"inputs:bad/"}}}]}`))
	st := e.waitJobAs(owner, id, 2*time.Minute)
	if st.State != string(sm.JobSucceeded) {
		t.Fatalf("job %s: %s, want SUCCEEDED", st.State, st.Error)
	}
	if n := st.Stages[0].BadRecords; n != 3 {
		t.Errorf("status: %d bad records, want 3", n)
	}
	if got := len(jobLines(t, e, st)); got != 40+25-3 {
		t.Errorf("%d output lines, want %d", got, 40+25-3)
	}

	want := map[string]int64{}
	for k, v := range offA {
		want[k] = v
	}
	for k, v := range offB {
		want[k] = v // one split per file: the offset in the task's input is the object's
	}
	pg, err := e.r.Service.BadRecords(context.Background(), control.BadRecordsRequest{Owner: owner, ID: id})
	if err != nil {
		t.Fatal(err)
	}
	if len(pg.Records) != 3 || pg.Counts["parse"] != 3 || pg.NextCursor != "" {
		t.Fatalf("bad records: %+v", pg)
	}
	for _, r := range pg.Records {
		off, ok := want[r.Record]
		if !ok || r.Offset != off || r.Reason != "starts with bad" || r.Stage != "parse" || r.Attempt != 1 {
			t.Errorf("bad record %+v; want one of %v, at its offset", r, want)
		}
	}
	// Another owner sees nothing of it.
	if _, err := e.r.Service.BadRecords(context.Background(), control.BadRecordsRequest{Owner: "mallory", ID: id}); !errors.Is(err, domain.ErrNotFound) {
		t.Errorf("another owner's request: %v, want not found", err)
	}

	// Paging one record at a time visits each once.
	var paged []string
	cursor := ""
	for range 10 {
		pg, err := e.r.Service.BadRecords(context.Background(), control.BadRecordsRequest{Owner: owner, ID: id, Limit: 1, Cursor: cursor})
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range pg.Records {
			paged = append(paged, r.Record)
		}
		if cursor = pg.NextCursor; cursor == "" {
			break
		}
	}
	if len(paged) != 3 || len(slices.Compact(slices.Sorted(slices.Values(paged)))) != 3 {
		t.Errorf("paged one at a time: %q", paged)
	}

	ctx := context.Background()
	var out, errOut syncBuffer
	if code := e.cliRun(ctx, owner, &out, &errOut, "result", id, "--bad-records"); code != 0 {
		t.Fatalf("result --bad-records: exit %d: %s", code, errOut.String())
	}
	for rec, off := range want {
		i := slices.IndexFunc(strings.Split(out.String(), "\n"), func(l string) bool {
			return strings.HasSuffix(l, "starts with bad  "+strconv.Quote(rec)) && slices.Contains(strings.Fields(l), strconv.FormatInt(off, 10))
		})
		if i < 0 {
			t.Errorf("result --bad-records lacks %q at offset %d:\n%s", rec, off, out.String())
		}
	}
	if !strings.Contains(errOut.String(), "stage parse: 3 bad records") {
		t.Errorf("result --bad-records stderr: %s", errOut.String())
	}
	out, errOut = syncBuffer{}, syncBuffer{}
	if code := e.cliRun(ctx, owner, &out, &errOut, "status", id); code != 0 || !strings.Contains(out.String(), "stage parse: 3 bad records skipped") {
		t.Errorf("status: exit %d:\n%s%s", code, out.String(), errOut.String())
	}
	h, err := e.r.Service.History(ctx, control.HistoryRequest{Owner: owner, ID: id})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(h.Events, func(ev control.Event) bool {
		return ev.Type == "stage.completed" && strings.Contains(ev.Message, "3 bad records skipped")
	}) {
		t.Errorf("history does not note the bad records: %+v", h.Events)
	}
}

// Past maxBadRecords the task fails at once, without retries (the same
// input gives the same records), and so does the job, with an error that
// names the limit: whether one task rejects too many on its own, or its
// rejections would take the stage's committed count past the limit. Only
// the committed task's records are counted and listed.
func TestBadRecordsPastLimitFailTheJob(t *testing.T) {
	t.Parallel()
	e := newEnv(t, badRecordTasks(), envOptions{})
	const owner = "badlimit"
	in, _ := badLinesInput("c", 30, 1, 2, 3)
	e.putInput(owner, "over/c.txt", []byte(in))
	one := e.submitAs(owner, "one", []byte(`{"name":"one","retry":{"maxAttempts":3,"backoff":"1ms"},"stages":[{"name":"parse","task":"bad.lines",`+
		`"maxBadRecords":2,"partitions":{"input":{"prefix":"inputs:over/"}}}]}`))
	// Two tasks of two records each against a limit of three: whichever
	// commits second finds no room.
	stage := e.submitAs(owner, "stage", []byte(`{"name":"stage","retry":{"maxAttempts":3,"backoff":"1ms"},"stages":[{"name":"gen","task":"bad.n",`+
		`"maxBadRecords":3,"partitions":{"count":2,"params":[{"n":"2"},{"n":"2"}]}}]}`))

	st := e.waitJobAs(owner, one, 2*time.Minute)
	if st.State != string(sm.JobFailed) || !strings.Contains(st.Error, "task rejected 3 records; stage allows 2 (maxBadRecords)") {
		t.Fatalf("one task over the limit: job %s (%s), want FAILED naming the limit", st.State, st.Error)
	}
	if tasks := stageTasks(t, e, one, 0); len(tasks) != 1 || tasks[0].State != sm.TaskFailed || tasks[0].Attempt != 1 {
		t.Errorf("task %+v, want FAILED on attempt 1 (no retry)", tasks)
	}
	if st.Stages[0].BadRecords != 0 {
		t.Errorf("failed task's records counted: %d", st.Stages[0].BadRecords)
	}

	st = e.waitJobAs(owner, stage, 2*time.Minute)
	if st.State != string(sm.JobFailed) || !strings.Contains(st.Error, "2 rejected records would take the stage past its maxBadRecords (3)") {
		t.Fatalf("stage over the limit: job %s (%s), want FAILED naming the limit", st.State, st.Error)
	}
	tasks := stageTasks(t, e, stage, 0)
	committed, failed := -1, 0
	for _, tk := range tasks {
		switch tk.State {
		case sm.TaskSucceeded:
			committed = tk.Ref.Partition
		case sm.TaskFailed:
			failed++
			if tk.Attempt != 1 {
				t.Errorf("task %d failed on attempt %d, want 1 (no retry)", tk.Ref.Partition, tk.Attempt)
			}
		}
	}
	if committed < 0 || failed != 1 {
		t.Fatalf("tasks %+v: want one committed and one failed", tasks)
	}
	pg, err := e.r.Service.BadRecords(context.Background(), control.BadRecordsRequest{Owner: owner, ID: stage})
	if err != nil {
		t.Fatal(err)
	}
	if len(pg.Records) != 2 || pg.Counts["gen"] != 2 {
		t.Fatalf("bad records %+v: want the committed task's 2", pg)
	}
	for i, r := range pg.Records {
		if r.Partition != committed || r.Offset != int64(10*i) || r.Record != fmt.Sprintf("p%d attempt 1 record %d", committed, i) {
			t.Errorf("bad record %+v of the failed task, or out of order", r)
		}
	}
}

// fenceAtCommit is a control plane whose first commit finds its attempt
// taken over: just before it, the lease runs out and another claim takes
// the task (as when an executor stalls past its lease).
type fenceAtCommit struct {
	*control.Service
	clk   *testClock
	lease time.Duration
	once  sync.Once
	t     *testing.T
}

func (f *fenceAtCommit) Commit(ctx context.Context, c control.Claim, r control.CommitResult) error {
	f.once.Do(func() {
		f.clk.Advance(f.lease + sm.LeaseSkew + time.Second)
		if _, err := f.Service.Claim(ctx, c.Task.Ref); err != nil {
			f.t.Errorf("takeover claim: %v", err)
		}
		f.clk.Advance(f.lease + sm.LeaseSkew + time.Second) // and that claim's holder dies too
	})
	return f.Service.Commit(ctx, c, r)
}

// A fenced attempt's rejected records are written (before its commit) but
// never counted or shown: only the attempt that commits is.
func TestBadRecordsOfFencedAttemptNeverShown(t *testing.T) {
	t.Parallel()
	reg := badRecordTasks()
	e := newEnv(t, reg, envOptions{noRun: true})
	clk := newTestClock()
	svc := newService(e, testTimings, e.r.Store, e.r.Queue, clk, newLogCounter().logger())
	ctx := context.Background()
	id := submitTo(t, svc, "fenced", `{"name":"fenced","lease":"10s","retry":{"maxAttempts":5},"stages":[{"name":"gen","task":"bad.n",`+
		`"maxBadRecords":2,"partitions":{"count":1,"params":[{"n":"2"}]}}]}`)
	ref := domain.TaskRef{Job: id}
	stale := &executor.Runner{CP: &fenceAtCommit{Service: svc, clk: clk, lease: 10 * time.Second, t: t},
		Blob: e.r.Blob, Registry: executor.PublicRegistry(reg), Log: newLogCounter().logger(), HeartbeatEvery: time.Hour}
	res := stale.Handle(ctx, feed.Delivery{Body: ref.String()}, nil)
	if !errors.Is(res.Err, domain.ErrStaleClaim) {
		t.Fatalf("stale attempt: %+v, want its commit fenced", res)
	}
	fresh := &executor.Runner{CP: svc, Blob: e.r.Blob, Registry: executor.PublicRegistry(reg), Log: newLogCounter().logger(), HeartbeatEvery: time.Hour}
	if res := fresh.Handle(ctx, feed.Delivery{Body: ref.String()}, nil); res.Err != nil || res.Action != feed.Delete {
		t.Fatalf("fresh attempt: %+v", res)
	}
	task, err := e.r.Store.TaskGet(ctx, ref)
	if err != nil {
		t.Fatal(err)
	}
	if task.State != sm.TaskSucceeded || task.CommittedAttempt != 3 {
		t.Fatalf("task %s committed attempt %d, want SUCCEEDED by attempt 3", task.State, task.CommittedAttempt)
	}
	pg, err := svc.BadRecords(ctx, control.BadRecordsRequest{Owner: "tester", ID: id})
	if err != nil {
		t.Fatal(err)
	}
	if len(pg.Records) != 2 || pg.Counts["gen"] != 2 {
		t.Fatalf("bad records %+v: want attempt 3's two", pg)
	}
	for _, r := range pg.Records {
		if r.Attempt != 3 || !strings.Contains(r.Record, "attempt 3") {
			t.Errorf("bad record of attempt %d shown: %+v", r.Attempt, r)
		}
	}
	if st := jobState(t, svc, id); st.State != string(sm.JobSucceeded) || st.Stages[0].BadRecords != 2 {
		t.Errorf("job %s with %d bad records, want SUCCEEDED with 2", st.State, st.Stages[0].BadRecords)
	}
}

// Concurrent commits never take a stage's bad-record count past its
// maxBadRecords: the commit transaction's guard admits exactly the
// commits that fit, whatever their order, and refuses the rest as
// permanent failures.
func TestBadRecordCountGuardUnderConcurrentCommits(t *testing.T) {
	t.Parallel()
	e := newEnv(t, batchwork.NewRegistry(), envOptions{noRun: true})
	ctx := context.Background()
	cases := []struct {
		name      string
		max       int
		perTask   []int64
		wantFit   int
		wantCount int64
	}{
		{"ones", 5, []int64{1, 1, 1, 1, 1, 1, 1, 1, 1, 1}, 5, 5},
		{"twos", 7, []int64{2, 2, 2, 2, 2, 2}, 3, 6},
		{"exact", 6, []int64{3, 3}, 2, 6},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			id := e.submit("guard-"+tc.name, fmt.Appendf(nil, `{"name":"guard","stages":[{"name":"s","task":"x","maxBadRecords":%d,"partitions":{"count":%d}}]}`,
				tc.max, len(tc.perTask)))
			claims := make([]control.Claim, len(tc.perTask))
			for p := range tc.perTask {
				claims[p] = mustClaim(t, e.r.Service, domain.TaskRef{Job: id, Partition: p})
			}
			errs := make([]error, len(claims))
			var wg sync.WaitGroup
			for p, c := range claims {
				wg.Add(1)
				go func() {
					defer wg.Done()
					errs[p] = e.r.Service.Commit(ctx, c, control.CommitResult{BadRecords: tc.perTask[p]})
				}()
			}
			wg.Wait()
			fit := 0
			for p, err := range errs {
				switch {
				case err == nil:
					fit++
				case !errors.Is(err, domain.ErrTooManyBadRecords) || !errors.Is(err, domain.ErrPermanent):
					t.Errorf("task %d: %v, want committed or ErrTooManyBadRecords", p, err)
				}
			}
			counts, err := e.r.Store.StageBadRecordCounts(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			if fit != tc.wantFit || counts[0] != tc.wantCount {
				t.Fatalf("%d commits fit, count %d; want %d and %d", fit, counts[0], tc.wantFit, tc.wantCount)
			}
		})
	}
}
