package integration

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/batchwork/batchwork/shared/batchwork"
	"github.com/batchwork/batchwork/shared/control"
	"github.com/batchwork/batchwork/shared/domain"
	"github.com/batchwork/batchwork/shared/split"
	sm "github.com/batchwork/batchwork/statemachine"
)

// The tasks quota counts what a job plans, not what its spec declares: an
// input stage counts 1 at submit and its real number of splits once
// planned, and a dynamic split counts the tasks it adds, each by a
// conditional update of the owner's counter. A job whose plan passes the
// quota fails at planning with the quota's error; a split that would
// pass it is refused; and a job's end gives back all it was charged.
func TestTasksQuotaChargesPlannedAndSplitTasks(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	objs := map[string]string{"big/one.txt": strings.Repeat("one line of text\n", 40000)}
	for i := range 100 {
		objs[fmt.Sprintf("many/%03d.txt", i)] = "a line\n"
	}
	for i := range 4 {
		objs[fmt.Sprintf("few/%d.txt", i)] = "a line\n"
	}
	bucket := inputBucket(t, objs)
	cfg := testTimings
	cfg.Quotas = control.Quotas{Tasks: control.OwnerLimits{Default: 10}}
	e := newEnv(t, batchwork.NewRegistry(), envOptions{noRun: true, control: &cfg, inputBuckets: []string{bucket}})
	use := func(owner string) int {
		t.Helper()
		u, err := e.r.Store.OwnerQuotaUse(ctx, owner)
		if err != nil {
			t.Fatal(err)
		}
		return u.Tasks
	}
	input := func(name, prefix, extra string) []byte {
		return fmt.Appendf(nil, `{"name":%q,"stages":[{"name":"s","task":"none","partitions":{"input":{"prefix":"s3://%s/%s"%s}}}]}`, name, bucket, prefix, extra)
	}

	t.Run("a plan over the quota fails its job", func(t *testing.T) {
		id := e.submitAs("alice", "many", input("many", "many/", ""))
		st, err := e.r.Service.Status(ctx, "alice", id) // planned at submit
		if err != nil {
			t.Fatal(err)
		}
		if st.State != string(sm.JobFailed) || !strings.Contains(st.Error, "tasks quota of 10") || !strings.Contains(st.Error, "100 tasks") {
			t.Fatalf("job %s (%q), want FAILED by the tasks quota, naming the 100 tasks planned", st.State, st.Error)
		}
		if n := use("alice"); n != 0 {
			t.Fatalf("alice's counted tasks after the job ended: %d, want 0", n)
		}
	})
	t.Run("a plan within the quota is charged in full", func(t *testing.T) {
		id := e.submitAs("bob", "few", input("few", "few/", ""))
		if n := use("bob"); n != 4 {
			t.Fatalf("bob's counted tasks with a job of 4 planned tasks: %d, want 4", n)
		}
		if _, err := e.r.Service.Cancel(ctx, "bob", id); err != nil {
			t.Fatal(err)
		}
		if n := use("bob"); n != 0 {
			t.Fatalf("bob's counted tasks after the cancel: %d, want 0", n)
		}
	})
	t.Run("a dynamic split is charged, and refused past the quota", func(t *testing.T) {
		id := e.submitAs("carol", "split", input("split", "big/", `,"splitSize":"1MiB","dynamicSplit":true`))
		c, err := e.r.Service.Claim(ctx, domain.TaskRef{Job: id, Stage: 0, Partition: 0})
		if err != nil {
			t.Fatal(err)
		}
		in := *c.Task.Input
		at, give := split.Carve(in, 100000, 3, 1<<16)
		if _, err := e.r.Service.SplitTask(ctx, c, control.SplitRequest{Input: in, At: at, Give: give, Ran: time.Minute}); err != nil {
			t.Fatalf("split into 3 more tasks within the quota: %v", err)
		}
		if n := use("carol"); n != 1+len(give) {
			t.Fatalf("carol's counted tasks after a split adding %d: %d, want %d", len(give), n, 1+len(give))
		}
		c, err = e.r.Service.Claim(ctx, domain.TaskRef{Job: id, Stage: 0, Partition: 1})
		if err != nil {
			t.Fatal(err)
		}
		in = *c.Task.Input
		at, give = split.Carve(in, in.Start+1000, 7, 1<<12)
		if len(give) != 7 {
			t.Fatalf("carved %d pieces, want 7", len(give))
		}
		_, err = e.r.Service.SplitTask(ctx, c, control.SplitRequest{Input: in, At: at, Give: give, Ran: time.Minute})
		if !errors.Is(err, control.ErrSplitRefused) || !strings.Contains(err.Error(), "tasks quota of 10") {
			t.Fatalf("split past the quota: %v, want refused naming the tasks quota", err)
		}
		if n := use("carol"); n != 4 {
			t.Fatalf("carol's counted tasks after a refused split: %d, want 4", n)
		}
		if _, err := e.r.Service.Cancel(ctx, "carol", id); err != nil {
			t.Fatal(err)
		}
		if n := use("carol"); n != 0 {
			t.Fatalf("carol's counted tasks after the cancel: %d, want 0", n)
		}
	})
}
