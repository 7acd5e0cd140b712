package control

import (
	"errors"
	"strings"
	"testing"

	"github.com/batchwork/batchwork/shared/spec"
)

// A task whose size has no ready queue of its own (a size removed from
// the stack while its jobs ran, an executor told of no sized queues) is
// not forwarded: the forward would land on the priority queues the
// executor received it from, at once, and the executors of the wrong size
// would pass it around without pause and without its receive count ever
// growing. Forward refuses, and the executor hands the message back (its
// handBackDelay, its receive count), as before sized queues.
func TestForwardRefusesASizeWithoutItsQueue(t *testing.T) {
	for _, tt := range []struct {
		name    string
		sized   map[spec.Size]string
		wantErr bool
	}{
		{name: "size with its queue", sized: map[spec.Size]string{2 << 30: "q-2GiB", 4 << 30: "q-4GiB"}},
		{name: "size without its queue", sized: map[spec.Size]string{2 << 30: "q-2GiB"}, wantErr: true},
		{name: "no sized queues", sized: nil, wantErr: true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r := newUnitRig(t, func(cfg *Config) {
				cfg.ExecutorSizes = []spec.Size{1 << 30, 2 << 30, 4 << 30}
				cfg.Queues.High, cfg.Queues.Normal, cfg.Queues.Low = "h", "n", "l"
				cfg.Queues.Sized = tt.sized
			})
			job := r.submit(strings.Replace(oneStage(1, 2, ""), `"task":"work",`, `"task":"work","resources":{"memory":"4GiB"},`, 1))
			r.queue.Drain()
			err := r.svc.Forward(r.ctx, taskRef(job, 0, 0).String(), 0)
			sent := r.queue.Drain()
			if !tt.wantErr {
				if err != nil || len(sent) != 1 || sent[0].URL != "q-4GiB" {
					t.Fatalf("Forward = %v, sent %+v; want one message to q-4GiB", err, sent)
				}
				return
			}
			if !errors.Is(err, ErrNoSizedQueue) || len(sent) != 0 {
				t.Fatalf("Forward = %v, sent %+v; want ErrNoSizedQueue and nothing sent", err, sent)
			}
		})
	}
}
