// Package feed holds the executor's hosts, which feed task messages to a
// Handler (executor.Runner) and act on its verdicts: the long-polling
// Poller (Fargate, local runs) and the Lambda host, LambdaHandler. It owns
// what a host does around a task and the runner cannot see: receiving by
// slots and weights (arbiter.go), keeping messages hidden beside the
// executor's liveness record (held.go, holdbatch.go), the memory report on
// each beat (memreport.go), and deleting messages only once their tasks'
// counts are written (countflush.go).
//
// It imports nothing of internal/executor: the runner imports it for the
// types a host and the runner share (Delivery, Result), and its callers
// wire the two together.
package feed

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/batchwork/batchwork/shared/control"
	"github.com/batchwork/batchwork/shared/queue"
)

// ErrUnsupported is returned, wrapped with what is unsupported, by a
// control plane or a blob store that lacks a capability; the hosts and the
// runner run without it (each port's comment says how). It is declared
// here, the lowest package that checks it; executor.ErrUnsupported is the
// same value.
var ErrUnsupported = errors.New("not supported")

// Handler runs the task a message names and says what to do with the
// message (executor.Runner).
type Handler interface {
	Handle(ctx context.Context, d Delivery, extend Extender) Result
}

// Extender extends the message's visibility by d from now.
type Extender func(ctx context.Context, d time.Duration) error

// Delivery is a received task message.
type Delivery struct {
	Body   string
	SentAt time.Time
	// Trace is the traceparent the message carried (queue.Message.Trace).
	Trace string
	// Visibility is what the message was received with, if the host set
	// it (0: the queue's default, unknown here).
	Visibility time.Duration
	// Claimed, if set, runs once the claim is granted, before the task
	// runs: a host that keeps its messages hidden itself hides this one.
	Claimed func(context.Context)
}

// Action is what a host does with a message after the runner handled it.
type Action int

const (
	// Delete: the task is done (or will never run); delete the message.
	Delete Action = iota
	// Hide: keep the message and make it visible again after Delay (a
	// retry's backoff, a live claim's remaining lease).
	Hide
	// Leave: do nothing; the message returns when its visibility lapses.
	// Used when this executor lost its lease: the message is not its own
	// to delete any more.
	Leave
)

func (a Action) String() string {
	switch a {
	case Delete:
		return "delete"
	case Hide:
		return "hide"
	case Leave:
		return "leave"
	}
	return fmt.Sprintf("action(%d)", int(a))
}

// Result is the runner's verdict on one message.
type Result struct {
	Action Action
	Delay  time.Duration
	Err    error
}

// Queue is what the hosts need of SQS.
type Queue interface {
	Receive(ctx context.Context, url string, maxN int, wait, visibility time.Duration) ([]queue.Message, error)
	ChangeVisibility(ctx context.Context, url, receipt string, d time.Duration) error
	// ChangeVisibilityBatch returns the receipts that can never change
	// again (their message was received anew, or deleted).
	ChangeVisibilityBatch(ctx context.Context, url string, receipts []string, d time.Duration) (gone []string, err error)
	DeleteBatch(ctx context.Context, url string, receipts []string) error
}

// ControlPlane is what the hosts call on the control plane. Every method
// may be unsupported (ErrUnsupported), each with the effect its comment
// says.
type ControlPlane interface {
	Liveness
	// FlushCounts writes the counts the control plane batched (countflush.go).
	// Unsupported: no counts are batched, and messages are deleted at once.
	FlushCounts(ctx context.Context) error
	// JobOwner says a job's owner, so a Lambda batch runs one owner's tasks
	// (lambda.go). Unsupported: each job counts as an owner of its own.
	JobOwner(ctx context.Context, job string) (string, error)
}

// Liveness keeps the executor's liveness record, which lets the sweep
// recover a dead executor's claims before their leases end (held.go,
// memreport.go). ExecutorAlive may be unsupported: the host runs without
// a record, its claims recovered by their leases. ExecutorAliveMemory may
// be unsupported: the beat then carries no memory report.
type Liveness interface {
	ExecutorAlive(ctx context.Context, id string) error
	ExecutorAliveMemory(ctx context.Context, id string, m control.MemoryReport) error
}

// Activity hears the slots' tasks start and end.
type Activity interface {
	TaskStarted()
	TaskEnded()
}

var _ ControlPlane = (*control.Service)(nil)
