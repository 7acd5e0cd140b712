package control

import (
	"errors"
	"fmt"
	"testing"

	"github.com/batchwork/batchwork/internal/testdouble"
	"github.com/batchwork/batchwork/shared/blob"
	"github.com/batchwork/batchwork/shared/control/tasks"
	"github.com/batchwork/batchwork/shared/domain"
	sm "github.com/batchwork/batchwork/statemachine"
)

// skewJob is a map stage of 4 tasks shuffling into 4 partitions and a
// reduce stage with skew: combinable.
const skewJob = `{"name":"unit","lease":"10s","retry":{"maxAttempts":3,"backoff":"2s"},"stages":[` +
	`{"name":"map","task":"work","partitions":{"count":4},"shuffle":{"partitions":4}},` +
	`{"name":"reduce","task":"work","after":["map"],"skew":{"combinable":true,"threshold":2,"minBytes":1}}]}`

// commitMap commits map task c with one indexed shuffle object whose
// partitions hold sizes bytes.
func (r *unitRig) commitMap(c Claim, sizes ...int) {
	r.t.Helper()
	parts := make([][]byte, len(sizes))
	for p, n := range sizes {
		for range n {
			parts[p] = append(parts[p], fmt.Sprintf("k%d\t1\n", p)...)
		}
	}
	body, size := blob.ShuffleBody(parts)
	raw := make([]byte, size)
	if _, err := body.ReadAt(raw, 0); err != nil {
		r.t.Fatal(err)
	}
	r.blob.Put(testdouble.DefaultBucket, blob.OutputKey(c.Task.Ref.Job, c.StageName(), c.Task.Ref.Partition, c.Task.Attempt, 0), raw)
	if err := r.svc.Commit(r.ctx, c, CommitResult{Outputs: 1}); err != nil {
		r.t.Fatalf("commit %s: %v", c.Task.Ref, err)
	}
}

// hotJob submits skewJob and commits its map tasks with partition 1 hot,
// returning the job and its reduce stage, which has at least minPieces
// pieces past its 4 partitions.
func (r *unitRig) hotJob(minPieces int) (string, domain.Stage) {
	r.t.Helper()
	job := r.submit(skewJob)
	for m := range 4 {
		r.commitMap(r.claim(taskRef(job, 0, m)), 2, 100, 2, 3) // partition 1 hot
	}
	st := r.stage(job, 1)
	if st.Total < 4+minPieces {
		r.t.Fatalf("reduce stage has %d tasks; want at least %d pieces past its 4", st.Total, minPieces)
	}
	return job, st
}

// A combinable stage's hot partition: its pieces are extra tasks past the
// shuffle's partitions; the partition's own task is not claimed (and
// spends no attempt) until every piece has committed, and then its claim
// lists their outputs; a stale piece cannot commit; a partition past the
// stage's total is never written; the manifest leaves the pieces out.
func TestSkewCombineWaitsForItsPieces(t *testing.T) {
	t.Parallel()
	r := newUnitRig(t)
	job, st := r.hotJob(1)
	pieces := make([]domain.TaskRef, 0, st.Total-4)
	for p := 4; p < st.Total; p++ {
		pieces = append(pieces, taskRef(job, 1, p))
	}

	// The combine task waits: no claim, no record, a delayed copy of its
	// message.
	r.queue.Drain()
	_, err := r.svc.Claim(r.ctx, taskRef(job, 1, 1))
	if !errors.Is(err, tasks.ErrPiecesRunning) || !errors.Is(err, domain.ErrAlreadyDone) {
		t.Fatalf("claim of the combine task before its pieces: %v, want ErrPiecesRunning", err)
	}
	if task, err := r.store.TaskGet(r.ctx, taskRef(job, 1, 1)); err == nil && (task.Attempt != 0 || task.State != sm.TaskUnwritten) {
		t.Errorf("the waiting combine task is %s at attempt %d: it was claimed", task.State, task.Attempt)
	}
	if sent := r.queue.Drain(); len(sent) != 1 || sent[0].Body != taskRef(job, 1, 1).String() || sent[0].Delay <= 0 {
		t.Errorf("messages sent while it waits: %+v; want one delayed copy of its own", sent)
	}

	// A partition past the stage's total is not written.
	if _, err := r.svc.Claim(r.ctx, taskRef(job, 1, st.Total)); !errors.Is(err, domain.ErrAlreadyDone) {
		t.Errorf("claim of partition %d of %d: %v, want refused", st.Total, st.Total, err)
	}

	// A stale piece cannot commit: its lease ran out and another attempt
	// took it.
	stale := r.claim(pieces[0])
	r.clock.Advance(3 * unitLease)
	fresh := r.claim(pieces[0])
	if fresh.Task.Attempt == stale.Task.Attempt {
		t.Fatalf("the piece was not claimed again: attempt %d", fresh.Task.Attempt)
	}
	r.output(stale, 1)
	if err := r.svc.Commit(r.ctx, stale, CommitResult{Outputs: 1}); !errors.Is(err, domain.ErrStaleClaim) {
		t.Errorf("stale piece's commit: %v, want ErrStaleClaim", err)
	}
	r.commit(fresh, 1)
	for _, p := range pieces[1:] {
		if _, err := r.svc.Claim(r.ctx, taskRef(job, 1, 1)); !errors.Is(err, tasks.ErrPiecesRunning) {
			t.Fatalf("claim of the combine task with piece %d to go: %v", p.Partition, err)
		}
		r.commit(r.claim(p), 1)
	}

	c := r.claim(taskRef(job, 1, 1))
	if len(c.Combine) != len(pieces) || c.Combine[0].Key != blob.OutputKey(job, "reduce", 4, fresh.Task.Attempt, 0) {
		t.Fatalf("the combine task's claim lists %+v; want the %d pieces' committed outputs, the first of attempt %d", c.Combine, len(pieces), fresh.Task.Attempt)
	}
	r.commit(c, 1)
	for p := range 4 {
		if p != 1 {
			r.commit(r.claim(taskRef(job, 1, p)), 1)
		}
	}
	if j := r.job(job); j.State != sm.JobSucceeded {
		t.Fatalf("job %s (%s), want SUCCEEDED", j.State, j.Error)
	}
	keys := r.manifestKeys(blob.JobManifestKey(job))
	if len(keys) != 4 {
		t.Errorf("job manifest lists %v; want the 4 partitions' outputs, no piece's", keys)
	}
}

// The commit of a hot partition's last piece sends its combine task's
// message at once, so the combine task starts without waiting out the
// delayed copy its refused claim left (tasks.PiecesWait); a piece
// committed with others still running sends nothing. Two pieces committed
// together (the other inside this one's commit) both see every piece
// committed with their reads after their own writes, so at least one sends.
func TestSkewLastPieceWakesItsCombineTask(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		// together: the last two pieces commit at once, the second inside
		// the first's commit (after its write, before its reads).
		together bool
	}{
		{name: "one after another"},
		{name: "the last two together", together: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := newUnitRig(t)
			job, st := r.hotJob(2)
			combine := taskRef(job, 1, 1).String()
			woken := func(sent []testdouble.Sent) int {
				n := 0
				for _, m := range sent {
					if m.Body == combine && m.Delay == 0 {
						n++
					}
				}
				return n
			}
			r.queue.Drain()
			last := st.Total - 1
			if tc.together {
				last--
			}
			for p := 4; p < last; p++ {
				r.commit(r.claim(taskRef(job, 1, p)), 1)
				if n := woken(r.queue.Drain()); n != 0 {
					t.Fatalf("piece %d of %d committed: %d undelayed messages of the combine task, want none", p, st.Total-1, n)
				}
			}
			final := r.claim(taskRef(job, 1, last))
			if tc.together {
				other := r.claim(taskRef(job, 1, last+1))
				r.output(other, 1)
				var once bool
				r.store.SetFaults(nil, func(method string) error {
					if method == "TaskCommit" && !once {
						once = true
						if err := r.svc.Commit(r.ctx, other, CommitResult{Outputs: 1}); err != nil {
							t.Errorf("the other piece's commit: %v", err)
						}
					}
					return nil
				})
			}
			r.commit(final, 1)
			r.store.SetFaults(nil, nil)
			if n := woken(r.queue.Drain()); n < 1 {
				t.Fatalf("the last piece committed: no undelayed message of the combine task")
			}
			if c := r.claim(taskRef(job, 1, 1)); len(c.Combine) != st.Total-4 {
				t.Errorf("the combine task's claim lists %d pieces, want %d", len(c.Combine), st.Total-4)
			}
		})
	}
}
