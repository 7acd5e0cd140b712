package control

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/batchwork/batchwork/shared/domain"
	"github.com/batchwork/batchwork/shared/queue"
	"github.com/batchwork/batchwork/shared/spec"
)

func TestParseSizedQueues(t *testing.T) {
	tests := []struct {
		in      string
		want    map[spec.Size]string
		wantErr string
	}{
		{in: ""},
		{in: "4GiB=q4, 2GiB=q2", want: map[spec.Size]string{2 << 30: "q2", 4 << 30: "q4"}},
		{in: "10GiB=https://sqs/x?a=b", want: map[spec.Size]string{10 << 30: "https://sqs/x?a=b"}},
		{in: "4GiB", wantErr: "want SIZE=URL"},
		{in: "4GiB=", wantErr: "want SIZE=URL"},
		{in: "1GiB=q1", wantErr: "must be one of 2GiB"},
		{in: "3GiB=q3", wantErr: "must be one of 2GiB"},
		{in: "lots=q", wantErr: `sized queue "lots=q"`},
		{in: "2GiB=a,2GiB=b", wantErr: "named twice"},
	}
	for _, tt := range tests {
		got, err := ParseSizedQueues(tt.in)
		if tt.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("ParseSizedQueues(%q) = %v, %v; want an error containing %q", tt.in, got, err, tt.wantErr)
			}
			continue
		}
		if err != nil || !cmp.Equal(got, tt.want) {
			t.Errorf("ParseSizedQueues(%q) = %v, %v; want %v", tt.in, got, err, tt.want)
		}
		if back, err := ParseSizedQueues(FormatSizedQueues(got)); err != nil || !cmp.Equal(back, tt.want) {
			t.Errorf("round trip of %q: %v, %v", tt.in, back, err)
		}
	}
}

func TestQueuesForTaskAndPolled(t *testing.T) {
	q := Queues{High: "h", Normal: "n", Low: "l", Sized: map[spec.Size]string{2 << 30: "q2", 8 << 30: "q8"}}
	for _, tt := range []struct {
		p    spec.Priority
		z    spec.Size
		want string
	}{
		{spec.PriorityHigh, 0, "h"},
		{spec.PriorityHigh, 1 << 30, "h"},
		{spec.PriorityLow, 1 << 30, "l"},
		{spec.PriorityHigh, 2 << 30, "q2"}, // a sized queue ignores priority
		{spec.PriorityLow, 8 << 30, "q8"},
		{spec.PriorityLow, 4 << 30, "l"}, // a size without a queue of its own
	} {
		if got := q.ForTask(tt.p, tt.z); got != tt.want {
			t.Errorf("ForTask(%v, %d MiB) = %s, want %s", tt.p, tt.z>>20, got, tt.want)
		}
	}
	for _, tt := range []struct {
		z    spec.Size
		want []string
	}{
		{0, []string{"h", "n", "l", "q2", "q8"}}, // the local runner's: every size
		{1 << 30, []string{"h", "n", "l"}},
		{2 << 30, []string{"q2"}},
		{4 << 30, []string{"h", "n", "l"}}, // no queue of its own: as before sized queues
	} {
		if got := q.Polled(tt.z); !cmp.Equal(got, tt.want) {
			t.Errorf("Polled(%d MiB) = %v, want %v", tt.z>>20, got, tt.want)
		}
	}
}

// Every path that sends a task's message sends it to the queue of the
// size its next attempt needs: materialization (the stage's size), an
// out-of-memory retry's forward, the sweep's resend and a speculative
// copy (the raised size), and a redrive (each task's raised size).
func TestSendsGoToTheTasksSizeQueue(t *testing.T) {
	r := newUnitRig(t, func(cfg *Config) {
		cfg.ExecutorSizes = []spec.Size{1 << 30, 2 << 30, 4 << 30}
		cfg.Queues.Sized = map[spec.Size]string{2 << 30: "q-2GiB", 4 << 30: "q-4GiB"}
	})
	sp := strings.Replace(oneStage(2, 2, ""), `"task":"work",`, `"task":"work","resources":{"memory":"2GiB","maxMemory":"4GiB"},`, 1)
	job := r.submit(sp)
	sent := func() map[string][]string { // url -> bodies, since the last look
		out := map[string][]string{}
		for _, m := range r.queue.Drain() {
			out[m.URL] = append(out[m.URL], m.Body)
		}
		return out
	}
	ref0, ref1 := taskRef(job, 0, 0), taskRef(job, 0, 1)
	if got, want := sent(), map[string][]string{"q-2GiB": {ref0.String(), ref1.String()}}; !cmp.Equal(got, want) {
		t.Fatalf("materialization sent %v, want %v", got, want)
	}

	d, err := r.svc.Fail(r.ctx, r.claim(ref0), FailParams{Cause: "oom", Class: domain.ClassOutOfMemory})
	if err != nil || !d.Retry || d.Memory != 4<<30 {
		t.Fatalf("out of memory: %+v, %v; want a retry at 4GiB", d, err)
	}
	if err := r.svc.Forward(r.ctx, ref0.String(), d.Delay); err != nil {
		t.Fatal(err)
	}
	if err := r.svc.Resend(r.ctx, ref0, "", 0); err != nil {
		t.Fatal(err)
	}
	jsp, err := r.svc.CachedSpec(r.ctx, job)
	if err != nil {
		t.Fatal(err)
	}
	// A copy's message, as the sweep sends it (tasks.Copies.Speculate).
	if err := r.svc.queue.SendBatch(r.ctx, r.svc.ReadyQueue(r.ctx, jsp, ref0), []queue.Send{{Body: ref0.String() + domain.CopyMarker}}); err != nil {
		t.Fatal(err)
	}
	if err := r.svc.Resend(r.ctx, ref1, "", 0); err != nil {
		t.Fatal(err)
	}
	want := map[string][]string{"q-4GiB": {ref0.String(), ref0.String(), ref0.String() + domain.CopyMarker}, "q-2GiB": {ref1.String()}}
	if got := sent(); !cmp.Equal(got, want) {
		t.Fatalf("forward, resends and copy sent %v, want %v", got, want)
	}

	// A redrive (whose store the fakes lack) groups the tasks it resends
	// by the size each was raised to: task 0 to 4GiB, task 1 (never
	// raised) at its stage's 2GiB.
	msgs := []queue.Send{{Body: ref0.String()}, {Body: ref1.String()}}
	urls, groups := r.svc.GroupBySize(jsp, 0, msgs, []spec.Size{r.task(ref0).Memory, r.task(ref1).Memory})
	if !cmp.Equal(urls, []string{"q-2GiB", "q-4GiB"}) || !cmp.Equal(groups, map[string][]queue.Send{"q-4GiB": msgs[:1], "q-2GiB": msgs[1:]}) {
		t.Fatalf("redrive groups %v %v; want task 0 to q-4GiB, task 1 to q-2GiB", urls, groups)
	}
}
