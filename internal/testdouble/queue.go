package testdouble

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/batchwork/batchwork/shared/queue"
)

// Sent is one message a caller sent.
type Sent struct {
	URL, Body string
	Delay     time.Duration
	Trace     string // queue.Send.Trace
}

// Queue is SQS in memory. Sends are journaled for the test to read (and
// to hand on, as an executor would receive them); Receive hands out the
// messages a test pushed. A test thus decides what each receiver sees,
// lost or duplicated, instead of a scheduler.
type Queue struct {
	longPoll bool
	// timed ends a long poll when the wait its caller asked for passes.
	timed    bool
	oneQueue bool

	mu         sync.Mutex
	before     Hook
	sent       []Sent
	pushed     map[string][]queue.Message
	deleted    []string
	visibility map[string][]time.Duration
	receives   int
	waits      []time.Duration
	// wake is closed, and replaced, by each push: every waiting Receive
	// looks again.
	wake chan struct{}
	// entered and left get the number of each Receive as it starts and
	// as it returns.
	entered, left chan int
}

// QueueOption shapes a Queue at construction.
type QueueOption func(*Queue)

// LongPoll makes Receive wait, as a long poll does, until a message is
// pushed or its context ends; without it Receive returns at once.
func LongPoll() QueueOption { return func(q *Queue) { q.longPoll = true } }

// TimedPoll makes Receive wait as SQS's long poll does: until a message
// is pushed, its context ends or the wait it asked for passes, when it
// returns nothing. It implies LongPoll.
func TimedPoll() QueueOption { return func(q *Queue) { q.longPoll, q.timed = true, true } }

// OneQueue reads every URL as one queue, for a receiver of one queue.
func OneQueue() QueueOption { return func(q *Queue) { q.oneQueue = true } }

// NewQueue is an empty queue.
func NewQueue(opts ...QueueOption) *Queue {
	q := &Queue{pushed: map[string][]queue.Message{}, visibility: map[string][]time.Duration{},
		wake: make(chan struct{}), entered: make(chan int, 100), left: make(chan int, 100)}
	for _, o := range opts {
		o(q)
	}
	return q
}

func (q *Queue) hook(method string) error {
	q.mu.Lock()
	before := q.before
	q.mu.Unlock()
	if before == nil {
		return nil
	}
	return before(method)
}

func (q *Queue) url(u string) string {
	if q.oneQueue {
		return ""
	}
	return u
}

func (q *Queue) SendBatch(_ context.Context, url string, msgs []queue.Send) error {
	if err := q.hook("SendBatch"); err != nil {
		return err
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	for _, m := range msgs {
		q.sent = append(q.sent, Sent{URL: url, Body: m.Body, Delay: m.Delay, Trace: m.Trace})
	}
	return nil
}

func (q *Queue) Receive(ctx context.Context, url string, maxN int, wait, _ time.Duration) ([]queue.Message, error) {
	if err := q.hook("Receive"); err != nil {
		return nil, err
	}
	q.mu.Lock()
	q.receives++
	n := q.receives
	q.waits = append(q.waits, wait)
	q.mu.Unlock()
	note(q.entered, n)
	defer note(q.left, n)
	var timeout <-chan time.Time
	if q.timed {
		timer := time.NewTimer(wait)
		defer timer.Stop()
		timeout = timer.C
	}
	for {
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("receive from %s: %w", url, err)
		}
		q.mu.Lock()
		ms := q.pushed[q.url(url)]
		if len(ms) > 0 || !q.longPoll {
			k := min(maxN, len(ms))
			q.pushed[q.url(url)] = ms[k:]
			q.mu.Unlock()
			return ms[:k:k], nil
		}
		wake := q.wake
		q.mu.Unlock()
		select {
		case <-ctx.Done():
		case <-timeout:
			return nil, nil
		case <-wake:
		}
	}
}

// note tells a test watching ch about receive n; a test not watching
// does not hold the receiver up.
func note(ch chan int, n int) {
	select {
	case ch <- n:
	default:
	}
}

func (q *Queue) ChangeVisibility(ctx context.Context, _, receipt string, d time.Duration) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := q.hook("ChangeVisibility"); err != nil {
		return err
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	q.visibility[receipt] = append(q.visibility[receipt], d)
	return nil
}

// ChangeVisibilityBatch changes each receipt's visibility; none is ever
// gone.
func (q *Queue) ChangeVisibilityBatch(ctx context.Context, url string, receipts []string, d time.Duration) ([]string, error) {
	for _, r := range receipts {
		if err := q.ChangeVisibility(ctx, url, r, d); err != nil {
			return nil, err
		}
	}
	return nil, nil
}

func (q *Queue) DeleteBatch(ctx context.Context, _ string, receipts []string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := q.hook("DeleteBatch"); err != nil {
		return err
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	q.deleted = append(q.deleted, receipts...)
	return nil
}

// ---- for tests ----

// SetFault installs the hook consulted before each call.
func (q *Queue) SetFault(before Hook) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.before = before
}

// Push queues messages for Receive on url.
func (q *Queue) Push(url string, msgs ...queue.Message) {
	q.mu.Lock()
	q.pushed[q.url(url)] = append(q.pushed[q.url(url)], msgs...)
	close(q.wake)
	q.wake = make(chan struct{})
	q.mu.Unlock()
}

// Drain returns the messages sent since the last drain and forgets them:
// what an executor would receive (or what a test loses on purpose).
func (q *Queue) Drain() []Sent {
	q.mu.Lock()
	defer q.mu.Unlock()
	out := q.sent
	q.sent = nil
	return out
}

// Sent is the messages sent since the last drain, kept.
func (q *Queue) Sent() []Sent {
	q.mu.Lock()
	defer q.mu.Unlock()
	return slices.Clone(q.sent)
}

// Deleted is the receipts deleted, in order.
func (q *Queue) Deleted() []string {
	q.mu.Lock()
	defer q.mu.Unlock()
	return slices.Clone(q.deleted)
}

// Visibility is the visibility timeouts set on receipt, in order.
func (q *Queue) Visibility(receipt string) []time.Duration {
	q.mu.Lock()
	defer q.mu.Unlock()
	return slices.Clone(q.visibility[receipt])
}

// Receives counts the Receive calls made.
func (q *Queue) Receives() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.receives
}

// Waits is the wait each Receive asked for, in order.
func (q *Queue) Waits() []time.Duration {
	q.mu.Lock()
	defer q.mu.Unlock()
	return slices.Clone(q.waits)
}

// Entered and Left yield the number of each Receive as it starts and as
// it returns (up to 100 unread).
func (q *Queue) Entered() <-chan int { return q.entered }
func (q *Queue) Left() <-chan int    { return q.left }
