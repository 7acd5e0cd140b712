package kernel

import (
	"context"
	"crypto/rand"
	"encoding/hex"

	"github.com/batchwork/batchwork/shared/tuning"
)

// An executor's liveness: each executor (a long-polling process, a Lambda
// invocation) has an id, renews one record for all its claims every
// tuning.ExecutorBeat, and keeps its messages hidden for only a few
// seconds at a time. When it dies, its messages come back within seconds
// and the next claim takes its tasks over (sm.TaskTakeover), instead of
// waiting out each task's lease.

type executorKey struct{}

// NewExecutorID returns a fresh executor id.
func NewExecutorID() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// WithExecutor returns ctx carrying the executor id its claims record.
func WithExecutor(ctx context.Context, id string) context.Context {
	return context.WithValue(ctx, executorKey{}, id)
}

// ExecutorOf returns the executor id ctx carries, or "" (a claim without
// one can only be taken over when its lease expires).
func ExecutorOf(ctx context.Context) string {
	id, _ := ctx.Value(executorKey{}).(string)
	return id
}

// ExecutorAlive renews executor id's liveness record: it promises to live
// tuning.ExecutorLease from now.
func (s *Kernel) ExecutorAlive(ctx context.Context, id string) error {
	return s.store.ExecutorRenew(ctx, id, s.Now().Add(tuning.ExecutorLease))
}
