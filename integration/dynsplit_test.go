package integration

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/batchwork/batchwork/examples/wordcount"
	"github.com/batchwork/batchwork/internal/executor"
	"github.com/batchwork/batchwork/internal/faults"
	"github.com/batchwork/batchwork/shared/batchwork"
	"github.com/batchwork/batchwork/shared/control"
	"github.com/batchwork/batchwork/shared/domain"
	"github.com/batchwork/batchwork/shared/split"
	sm "github.com/batchwork/batchwork/statemachine"
)

// Dynamic splitting on the emulator: one input file much larger than the
// rest makes one task that straggles; with dynamicSplit it gives the
// unread rest of its range away as new tasks of its stage, which the
// shuffle and the reducers read like any other. The word counts equal
// the input's, every record is read once (the records counted in equal
// the lines), the big file's task ranges tile it exactly, the stage's
// task total grew, and the history says where the split was.
func TestDynamicSplit(t *testing.T) {
	t.Parallel()
	var big strings.Builder
	words := []string{"alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta", "theta"}
	for i := range 16000 {
		fmt.Fprintf(&big, "%s %s %s %s %s\n", words[i%8], words[(i/8)%8], words[(i/64)%8], words[(i/512)%8], words[(i/3)%8])
	}
	objects := map[string]string{"data/big.txt": big.String()}
	for k := range 3 {
		objects[fmt.Sprintf("data/small%d.txt", k)] = strings.Repeat("iota kappa\n", 40)
	}
	want := map[string]int{}
	lines := 0
	for _, body := range objects {
		for line := range strings.SplitSeq(strings.TrimSuffix(body, "\n"), "\n") {
			lines++
			for _, w := range wordcount.Words(line) {
				want[w]++
			}
		}
	}
	bucket := inputBucket(t, objects)

	reg := batchwork.NewRegistry()
	wordcount.Register(reg)
	// A map as slow as a real parser: the big file's task straggles.
	reg.Register("dynsplit.map", func(ctx context.Context, t *batchwork.Task) error {
		counts := map[string]int{}
		sc := bufio.NewScanner(t.Input)
		for n := 0; sc.Scan(); n++ {
			if n%40 == 39 {
				time.Sleep(time.Millisecond) // the work of forty records
			}
			for _, w := range wordcount.Words(sc.Text()) {
				counts[w]++
			}
		}
		if err := sc.Err(); err != nil {
			return err
		}
		for w, n := range counts {
			if err := t.Out.Emit(w, strconv.Itoa(n)); err != nil {
				return err
			}
		}
		return nil
	})
	e := newEnv(t, reg, envOptions{noRun: true, inputBuckets: []string{bucket}})
	r := &executor.Runner{CP: e.r.Service, Blob: e.r.Blob, Registry: executor.PublicRegistry(reg), Log: newLogCounter().logger(),
		SplitAfter: 150 * time.Millisecond}
	id := e.submitAs("tester", "dynsplit", fmt.Appendf(nil, `{"name":"dynsplit","retry":{"maxAttempts":2},"stages":[
		{"name":"map","task":"dynsplit.map","partitions":{"input":{"prefix":"s3://%s/data/","splitSize":"1MiB","dynamicSplit":true}},"shuffle":{"partitions":2}},
		{"name":"reduce","task":%q,"after":["map"]}]}`, bucket, wordcount.ReduceTask))
	work(t, e, r)
	st := e.waitJobAs("tester", id, time.Minute)
	if got := jobWordCounts(t, e, st); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("word counts %v, want %v", got, want)
	}
	m := st.Stages[0]
	if m.Total <= 4 || m.RecordsIn != int64(lines) {
		t.Fatalf("map stage: %d tasks, %d records in; want more than the 4 planned and %d records", m.Total, m.RecordsIn, lines)
	}

	// The big file's ranges, the giver's shrunk one and the pieces, tile it.
	var ranges []split.Split
	for _, tk := range stageTasks(t, e, id, 0) {
		if tk.State != sm.TaskSucceeded {
			t.Errorf("task %s is %s", tk.Ref, tk.State)
		}
		if tk.Input.Key == "data/big.txt" {
			ranges = append(ranges, *tk.Input)
		}
	}
	slices.SortFunc(ranges, func(a, b split.Split) int { return int(a.Start - b.Start) })
	next := int64(0)
	for _, s := range ranges {
		if s.Start != next || s.End <= s.Start {
			t.Fatalf("big.txt ranges %v do not tile it", ranges)
		}
		next = s.End
	}
	if next != int64(big.Len()) || len(ranges) < 2 {
		t.Fatalf("big.txt ranges %v, want several covering its %d bytes", ranges, big.Len())
	}

	h, err := e.r.Service.History(context.Background(), control.HistoryRequest{Owner: "tester", ID: id, Limit: 200})
	if err != nil {
		t.Fatal(err)
	}
	seen := false
	for _, ev := range h.Events {
		seen = seen || ev.Type == "task.split" && strings.Contains(ev.Message, "split at byte") && strings.Contains(ev.Message, "big.txt: gave")
	}
	if !seen {
		t.Fatalf("history %+v, want a task.split event", h.Events)
	}
}

// A split is one transaction guarded by the giver's claim and its stage:
// it shrinks the giver's range and adds the pieces as READY tasks with
// the stage's total and completion counters raised by as many, or it
// writes nothing. A split whose response is lost is recognised as made
// (else its giver would read on past the cut, and those bytes twice). A stale token, a range split already, or a job no
// longer running is refused; the giver's next attempt reads only the
// range it kept.
func TestDynamicSplitGuards(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	bucket := inputBucket(t, map[string]string{"data/big.txt": strings.Repeat("one line of text\n", 40000)}) // 680,000 bytes
	inj := faults.New(1)
	e := newEnv(t, batchwork.NewRegistry(), envOptions{noRun: true, inputBuckets: []string{bucket}, faults: inj})
	id := e.submitAs("tester", "guards", fmt.Appendf(nil, `{"name":"guards","retry":{"maxAttempts":3,"backoff":"10ms"},"stages":[
		{"name":"s","task":"none","partitions":{"input":{"prefix":"s3://%s/data/","splitSize":"1MiB","dynamicSplit":true}}}]}`, bucket))
	ref := domain.TaskRef{Job: id, Stage: 0, Partition: 0}
	c, err := e.r.Service.Claim(ctx, ref)
	if err != nil {
		t.Fatal(err)
	}
	in := *c.Task.Input
	at, give := split.Carve(in, 100000, 3, 1<<16)
	req := control.SplitRequest{Input: in, At: at, Give: give, Ran: time.Minute}
	totals := func() (int, int) {
		t.Helper()
		st, err := e.r.Store.StageGet(ctx, id, 0)
		if err != nil {
			t.Fatal(err)
		}
		p, err := e.r.Store.StageProgress(ctx, st)
		if err != nil {
			t.Fatal(err)
		}
		return st.Total, p.Left
	}

	stale := c
	stale.Task.Token = "not-the-holders"
	if _, err := e.r.Service.SplitTask(ctx, stale, req); !errors.Is(err, control.ErrSplitRefused) {
		t.Fatalf("split with a stale token: %v, want refused", err)
	}
	if total, left := totals(); total != 1 || left != 1 {
		t.Fatalf("after a refused split: %d tasks, %d left; want 1 and 1", total, left)
	}

	// The split applies but its response is lost: the SDK's retry finds
	// the range moved, and the store recognises its own split.
	inj.Once(faults.Rule{Service: "DynamoDB", Operation: "TransactWriteItems", Kind: faults.Lost, Match: func(_ string, in any) bool {
		tx, ok := in.(*dynamodb.TransactWriteItemsInput)
		return ok && len(tx.TransactItems) > 0 && tx.TransactItems[0].Update != nil &&
			strings.Contains(aws.ToString(tx.TransactItems[0].Update.UpdateExpression), "SET #ie = :at")
	}})
	res, err := e.r.Service.SplitTask(ctx, c, req)
	if err != nil {
		t.Fatalf("split with a lost response: %v", err)
	}
	if inj.Total() != 1 {
		t.Fatalf("%d faults injected, want 1", inj.Total())
	}
	if total, left := totals(); res.First != 1 || res.Last != 3 || total != 4 || left != 4 {
		t.Fatalf("split: tasks %d..%d, stage %d tasks with %d left; want 1..3, 4 and 4", res.First, res.Last, total, left)
	}
	for k, p := range give {
		tk, err := e.r.Store.TaskGet(ctx, domain.TaskRef{Job: id, Stage: 0, Partition: 1 + k})
		if err != nil {
			t.Fatal(err)
		}
		if tk.State != sm.TaskReady || *tk.Input != p {
			t.Fatalf("new task %d: %s %+v, want READY reading %+v", 1+k, tk.State, tk.Input, p)
		}
	}
	if _, err := e.r.Service.SplitTask(ctx, c, req); !errors.Is(err, control.ErrSplitRefused) {
		t.Fatalf("a second split of the same range: %v, want refused", err)
	}

	// The giver fails; its next attempt reads only what it kept.
	if _, err := e.r.Service.Fail(ctx, c, control.FailParams{Cause: "boom"}); err != nil {
		t.Fatal(err)
	}
	var c2 control.Claim
	for deadline := time.Now().Add(10 * time.Second); ; {
		if c2, err = e.r.Service.Claim(ctx, ref); err == nil || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond) // polling the retry's backoff
	}
	if err != nil {
		t.Fatal(err)
	}
	if c2.Task.Attempt != 2 || c2.Task.Input.Start != in.Start || c2.Task.Input.End != at {
		t.Fatalf("next attempt %d reads %+v, want attempt 2 reading [%d, %d)", c2.Task.Attempt, c2.Task.Input, in.Start, at)
	}

	kept := *c2.Task.Input
	at2, give2 := split.Carve(kept, 0, 2, 1<<10)
	req2 := control.SplitRequest{Input: kept, At: at2, Give: give2, Ran: time.Minute}

	// No split of a task that has a speculative copy: the copy reads the
	// range it was claimed with.
	other, err := e.r.Service.Claim(ctx, domain.TaskRef{Job: id, Stage: 0, Partition: 1})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.r.Store.CopyRequest(ctx, other.Task.Ref, time.Now()); err != nil {
		t.Fatal(err)
	}
	oin := *other.Task.Input
	oat, ogive := split.Carve(oin, oin.Start, 2, 1<<10)
	if _, err := e.r.Service.SplitTask(ctx, other, control.SplitRequest{Input: oin, At: oat, Give: ogive, Ran: time.Minute}); !errors.Is(err, control.ErrSplitRefused) {
		t.Fatalf("split of a copied task: %v, want refused", err)
	}

	// No split once the job has ended.
	if _, err := e.r.Service.Cancel(ctx, "tester", id); err != nil {
		t.Fatal(err)
	}
	if _, err := e.r.Service.SplitTask(ctx, c2, req2); !errors.Is(err, control.ErrSplitRefused) {
		t.Fatalf("split after cancel: %v, want refused", err)
	}
	if total, _ := totals(); total != 4 {
		t.Fatalf("after cancel: %d tasks, want 4", total)
	}
}
