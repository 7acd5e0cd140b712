package control

import (
	"testing"

	"github.com/batchwork/batchwork/shared/domain"
	sm "github.com/batchwork/batchwork/statemachine"
)

// Review: the job's manifest leaves a combinable skewed stage's pieces
// out (their outputs are partial sums, reduced again by their partition's
// task), but the outputs API listing of that stage (OutputsRequest.Stage,
// readside.committedPage, read from the task records) lists the pieces'
// partial outputs beside the partition's combined one: a client that
// downloads the stage's outputs counts the hot key twice.
func TestSkewStageOutputsLeaveThePiecesOut(t *testing.T) {
	t.Parallel()
	r := newUnitRig(t)
	job, st := r.hotJob(1)
	for p := 4; p < st.Total; p++ {
		r.commit(r.claim(taskRef(job, 1, p)), 1)
	}
	for p := range 4 {
		r.commit(r.claim(taskRef(job, 1, p)), 1)
	}
	if j := r.job(job); j.State != sm.JobSucceeded {
		t.Fatalf("job %s (%s), want SUCCEEDED", j.State, j.Error)
	}
	out, err := r.svc.Outputs(r.ctx, OutputsRequest{Owner: "tester", ID: job, Stage: "reduce", Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	var pieces []domain.Output
	for _, o := range out.Outputs {
		if o.Partition >= 4 {
			pieces = append(pieces, o.Output)
		}
	}
	if len(out.Outputs) != 4 || len(pieces) != 0 {
		t.Errorf("stage reduce's outputs list %d outputs, %d of them pieces' partial results (%+v); want its 4 partitions' only, as its manifest",
			len(out.Outputs), len(pieces), pieces)
	}
}
