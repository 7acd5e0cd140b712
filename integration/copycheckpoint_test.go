package integration

import (
	"context"
	"errors"
	"testing"

	"github.com/batchwork/batchwork/shared/control"
	"github.com/batchwork/batchwork/shared/domain"
	sm "github.com/batchwork/batchwork/statemachine"
)

// A speculative copy's checkpoints are fenced by its own token. While its
// holder runs beside it, the task's one checkpoint pointer stays the
// holder's: the copy's checkpoint is a no-op that neither moves it nor
// stops the copy. Once the holder failed and yielded the task to the
// copy, the copy's checkpoints are recorded, and a retry after the copy
// fails resumes from them. A copy that lost its claim is told so.
func TestCopyCheckpointsFencedByItsOwnToken(t *testing.T) {
	t.Parallel()
	r := newSpeculationRig(t, 4, 16)
	ctx := context.Background()
	r.straggle(t, 1)
	orig := r.claims[3]
	if err := r.svc.Checkpoint(ctx, orig, 1, 100); err != nil {
		t.Fatalf("holder's checkpoint: %v", err)
	}
	cp := r.claimCopy(t, 3)
	if cp.Task.Checkpoint.Attempt != orig.Task.Attempt || cp.Task.Checkpoint.Offset != 100 {
		t.Fatalf("copy starts from checkpoint %+v, want the holder's (attempt %d, offset 100)", cp.Task.Checkpoint, orig.Task.Attempt)
	}

	// Beside the live holder: not recorded, not refused.
	if err := r.svc.Checkpoint(ctx, cp, 1, 50); err != nil {
		t.Fatalf("copy's checkpoint beside its holder: %v, want a no-op", err)
	}
	if ck := r.task(t, 3).Checkpoint; ck.Attempt != orig.Task.Attempt || ck.Offset != 100 {
		t.Fatalf("task points at checkpoint %+v after the copy's, want still the holder's (attempt %d, offset 100)", ck, orig.Task.Attempt)
	}
	if err := r.svc.Checkpoint(ctx, orig, 2, 200); err != nil {
		t.Fatalf("holder's second checkpoint: %v", err)
	}

	// The holder fails: it yields the task to the copy, whose next
	// checkpoint is the task's.
	if _, err := r.svc.Fail(ctx, orig, control.FailParams{Cause: "holder boom"}); err != nil {
		t.Fatalf("holder's failure beside its copy: %v", err)
	}
	if err := r.svc.Checkpoint(ctx, orig, 3, 250); !errors.Is(err, domain.ErrStaleClaim) {
		t.Fatalf("the yielded holder's checkpoint: %v, want ErrStaleClaim", err)
	}
	if err := r.svc.Checkpoint(ctx, cp, 2, 300); err != nil {
		t.Fatalf("copy's checkpoint after its holder yielded: %v, want recorded", err)
	}
	if ck := r.task(t, 3).Checkpoint; ck.Attempt != cp.Task.Attempt || ck.Seq != 2 || ck.Offset != 300 {
		t.Fatalf("task points at checkpoint %+v, want the copy's (attempt %d, seq 2, offset 300)", ck, cp.Task.Attempt)
	}

	// The copy fails too: the retry resumes from the copy's checkpoint,
	// and the fenced copy's later checkpoint is refused.
	if d, err := r.svc.Fail(ctx, cp, control.FailParams{Cause: "copy boom"}); err != nil || !d.Retry {
		t.Fatalf("copy's failure as the task's holder: %+v %v, want a retry", d, err)
	}
	if err := r.svc.Checkpoint(ctx, cp, 3, 400); !errors.Is(err, domain.ErrStaleClaim) {
		t.Fatalf("the failed copy's checkpoint: %v, want ErrStaleClaim", err)
	}
	r.clk.Advance(r.svc.JobStateTTL() + sm.LeaseSkew + 10*testTimings.StuckAfter) // past any backoff
	next := mustClaim(t, r.svc, domain.TaskRef{Job: r.job, Partition: 3})
	if next.Task.Attempt <= cp.Task.Attempt || next.Task.Checkpoint.Attempt != cp.Task.Attempt || next.Task.Checkpoint.Offset != 300 {
		t.Fatalf("retry is attempt %d resuming from %+v; want past %d, from the copy's checkpoint at offset 300",
			next.Task.Attempt, next.Task.Checkpoint, cp.Task.Attempt)
	}
	r.commit(t, next)
	if st := jobState(t, r.svc, r.job); st.State != string(sm.JobSucceeded) {
		t.Fatalf("job %s, want SUCCEEDED", st.State)
	}
}
