package kernel

// Per-size ready queues (issue 13.10). Each executor size beyond the
// default has one ready queue of its own (Queues.Sized), polled only by
// the executors of that size, so a task's message goes straight to an
// executor that can run it instead of bouncing between executors of the
// wrong size. Every path that sends a task's message (materialization,
// splits, redrive, the sweep's resends, speculative copies, an
// out-of-memory retry, a hand-back) picks the queue of the size the task's
// next attempt needs (ReadyQueue). A sized queue has no priority classes:
// the few tasks that need a large executor share it in arrival order,
// while the default size, which runs nearly everything, keeps its three
// priority queues. A message that still lands on the wrong size (sent
// before an out-of-memory retry raised its task) is forwarded by the
// executor that receives it (Forward), or handed back if that fails.

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/batchwork/batchwork/shared/domain"
	"github.com/batchwork/batchwork/shared/queue"
	"github.com/batchwork/batchwork/shared/spec"
	"github.com/batchwork/batchwork/shared/tracing"
)

// ForTask returns the ready queue of a task of priority class p whose next
// attempt needs an executor of size z: the size's own queue when it has
// one, else the priority class's (the default size, a size without a
// queue of its own, an unknown size 0).
func (q Queues) ForTask(p spec.Priority, z spec.Size) string {
	if z != spec.DefaultExecutorSize {
		if url := q.Sized[z]; url != "" {
			return url
		}
	}
	return q.For(p)
}

// Polled are the ready queues an executor of size z receives from: its
// size's own queue when it has one, else the three priority queues. An
// executor without a size (z 0: the local runner's, which runs tasks of
// every size) polls them all, the priority queues first.
func (q Queues) Polled(z spec.Size) []string {
	if z != 0 && z != spec.DefaultExecutorSize {
		if url := q.Sized[z]; url != "" {
			return []string{url}
		}
	}
	out := []string{q.High, q.Normal, q.Low}
	if z == 0 {
		for _, s := range sortedSizes(q.Sized) {
			out = append(out, q.Sized[s])
		}
	}
	return out
}

func sortedSizes(m map[spec.Size]string) []spec.Size {
	sizes := make([]spec.Size, 0, len(m))
	for z := range m {
		sizes = append(sizes, z)
	}
	slices.Sort(sizes)
	return sizes
}

// FormatSizedQueues spells Queues.Sized as lambdaenv.EnvQueueSized does:
// "2GiB=url,4GiB=url", by size.
func FormatSizedQueues(m map[spec.Size]string) string {
	var parts []string
	for _, z := range sortedSizes(m) {
		parts = append(parts, SizeString(z)+"="+m[z])
	}
	return strings.Join(parts, ",")
}

// ParseSizedQueues parses FormatSizedQueues' form; "" is none. Each size
// must be one of spec.ExecutorSizes other than the default (whose tasks
// use the priority queues), named once, with a URL.
func ParseSizedQueues(s string) (map[spec.Size]string, error) {
	var out map[spec.Size]string
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		name, url, ok := strings.Cut(f, "=")
		if !ok || strings.TrimSpace(url) == "" {
			return nil, fmt.Errorf("sized queue %q: want SIZE=URL", f)
		}
		z, err := spec.ParseSize(strings.TrimSpace(name))
		if err != nil {
			return nil, fmt.Errorf("sized queue %q: %w", f, err)
		}
		if !slices.Contains(spec.ExecutorSizes, z) || z == spec.DefaultExecutorSize {
			return nil, fmt.Errorf("sized queue %q: size must be one of 2GiB, 4GiB, 8GiB, 10GiB", f)
		}
		if out == nil {
			out = map[spec.Size]string{}
		}
		if _, dup := out[z]; dup {
			return nil, fmt.Errorf("sized queue %q: size named twice", f)
		}
		out[z] = strings.TrimSpace(url)
	}
	return out, nil
}

// SizeOf is the size a task's next attempt needs given the size recorded
// on it (domain.Task.Memory, raised by out-of-memory retries; 0: never
// raised): the larger of that and its stage's.
func SizeOf(sp *spec.Job, stage int, recorded spec.Size) spec.Size {
	return max(sp.StageMemory(stage), recorded)
}

// ReadyQueue is the ready queue of the task ref names: the queue of the
// size its next attempt needs (TaskMemory, which reads the task only for a
// stage that may climb). A size that cannot be read falls back to the
// stage's: the executor that receives the message forwards it if the
// task has been raised.
func (s *Kernel) ReadyQueue(ctx context.Context, sp *spec.Job, ref domain.TaskRef) string {
	url, _ := s.readyQueueSize(ctx, sp, ref)
	return url
}

// readyQueueSize is ReadyQueue and the size it sent by.
func (s *Kernel) readyQueueSize(ctx context.Context, sp *spec.Job, ref domain.TaskRef) (string, spec.Size) {
	z := sp.StageMemory(ref.Stage)
	if len(s.cfg.Queues.Sized) > 0 && sp.StageMaxMemory(ref.Stage) > z {
		if m, err := s.TaskMemory(ctx, ref); err == nil {
			z = m
		} else {
			s.Logger(ref).Warn("task's executor size unread; sending to its stage's", "err", err)
		}
	}
	return s.cfg.Queues.ForTask(sp.StagePriority(ref.Stage), z), z
}

// StageQueue is the ready queue of a stage's tasks that were never raised
// (materialization, splits).
func (s *Kernel) StageQueue(sp *spec.Job, stage int) string {
	return s.cfg.Queues.ForTask(sp.StagePriority(stage), sp.StageMemory(stage))
}

// ErrNoSizedQueue is a forward refused because the size the task needs
// has no ready queue of its own here: the message would go to the
// priority queues, where executors of the wrong size would receive it
// again at once and forward it on without pause, its receive count reset
// each time. The executor hands it back instead (a delay, and a receive
// count that grows toward the dead-letter queue).
var ErrNoSizedQueue = errors.New("the size the task needs has no ready queue of its own")

// Forward sends a fresh message for the task a message's body names (a
// copy's marker kept) to the ready queue of the size the task's next
// attempt needs, after delay. An executor calls it for a message it must
// not keep on the queue it came from: one of a size it cannot run, or an
// attempt of its own that ran out of memory and climbed to the next size.
// It then deletes the message it received instead of handing it back to
// executors of the same, wrong size; if Forward fails, it hands it back,
// so nothing is lost.
func (s *Kernel) Forward(ctx context.Context, body string, delay time.Duration) error {
	ref, err := domain.ParseTaskRef(strings.TrimSuffix(body, domain.CopyMarker))
	if err != nil {
		return err
	}
	sp, err := s.CachedSpec(ctx, ref.Job)
	if err != nil {
		return err
	}
	url, z := s.readyQueueSize(ctx, sp, ref)
	if z != spec.DefaultExecutorSize && s.cfg.Queues.Sized[z] == "" {
		return fmt.Errorf("forward %s (%s): %w", ref, SizeString(z), ErrNoSizedQueue)
	}
	if err := s.queue.SendBatch(ctx, url, []queue.Send{{Body: body, Delay: min(max(delay, 0), queue.MaxDelay)}}); err != nil {
		return fmt.Errorf("forward %s to its size's queue: %w", ref, err)
	}
	return nil
}

// GroupBySize splits a stage's messages by the ready queue of each task's
// size (sizes parallel to msgs), keeping their order within a queue.
func (s *Kernel) GroupBySize(sp *spec.Job, stage int, msgs []queue.Send, sizes []spec.Size) (urls []string, groups map[string][]queue.Send) {
	groups = map[string][]queue.Send{}
	for i, m := range msgs {
		url := s.cfg.Queues.ForTask(sp.StagePriority(stage), SizeOf(sp, stage, sizes[i]))
		if _, ok := groups[url]; !ok {
			urls = append(urls, url)
		}
		groups[url] = append(groups[url], m)
	}
	sort.Strings(urls)
	return urls, groups
}

// Resend sends a task's message again, to the ready queue of its next
// attempt's size, after delay. span is the task's span id (its record's
// TraceSpan; "" where the caller has no record): the message carries that
// span's traceparent in the job's trace, as materialization's does, so
// the attempt it starts joins the task's trace from its message. The
// job's trace is in the meta the queue is chosen by: no request more.
func (s *Kernel) Resend(ctx context.Context, ref domain.TaskRef, span string, delay time.Duration) error {
	m, err := s.Meta(ctx, ref.Job)
	if err != nil {
		return err
	}
	msg := queue.Send{Body: ref.String(), Delay: delay, Trace: tracing.Join(m.Trace, span)}
	return s.queue.SendBatch(ctx, s.ReadyQueue(ctx, m.Spec, ref), []queue.Send{msg})
}
