package integration

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/batchwork/batchwork/cmd/batchwork/cli"
	"github.com/batchwork/batchwork/shared/control"
)

// `batchwork status` counts a stage's speculative copies: launched
// (claimed), won (committed first) and running (at the sweep's last
// look). A stage that never had a copy shows none.
func TestStatusCountsSpeculativeCopies(t *testing.T) {
	t.Parallel()
	r := newSpeculationRig(t, 8, 4)
	ctx := context.Background()
	copies := func() *control.CopyCounts {
		t.Helper()
		st, err := r.svc.Status(ctx, "tester", r.job)
		if err != nil {
			t.Fatal(err)
		}
		return st.Stages[0].Copies
	}
	if c := copies(); c != nil {
		t.Fatalf("copies %+v before any, want none", c)
	}
	if c := r.straggle(t, 2); c.Speculated != 2 {
		t.Fatalf("sweep launched %d copies, want 2", c.Speculated)
	}
	if c := copies(); c == nil || *c != (control.CopyCounts{Launched: 0, Won: 0, Running: 2}) {
		t.Fatalf("copies %+v after 2 were requested, want 0 launched, 2 running", c)
	}
	cp6, cp7 := r.claimCopy(t, 6), r.claimCopy(t, 7)
	if c := copies(); c == nil || c.Launched != 2 || c.Won != 0 {
		t.Fatalf("copies %+v after 2 were claimed, want 2 launched, 0 won", c)
	}
	// One copy wins; the other's holder commits first.
	r.commit(t, cp6)
	r.commit(t, r.claims[7])
	if err := r.svc.Commit(ctx, cp7, control.CommitResult{Outputs: 1}); err == nil {
		t.Fatal("the losing copy's commit was accepted")
	}
	r.clk.Advance(time.Second)
	mustSweep(t, r.svc)
	c := copies()
	if c == nil || *c != (control.CopyCounts{Launched: 2, Won: 1, Running: 0}) {
		t.Fatalf("copies %+v after the stage ended, want 2 launched, 1 won, 0 running", c)
	}
	var out, errOut syncBuffer
	if code := r.e.cliRun(ctx, "tester", &out, &errOut, "status", r.job); code != cli.ExitOK {
		t.Fatalf("status: exit %d %s", code, errOut.String())
	}
	if want := "stage s: speculative copies: 2 launched, 1 won, 0 running"; !strings.Contains(out.String(), want) {
		t.Fatalf("batchwork status does not say %q:\n%s", want, out.String())
	}
}
