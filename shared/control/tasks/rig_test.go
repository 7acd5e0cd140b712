package tasks

import (
	"context"
	"errors"
	"log/slog"
	"testing"

	"github.com/batchwork/batchwork/shared/control/kernel"
	"github.com/batchwork/batchwork/shared/domain"
	"github.com/batchwork/batchwork/shared/dynamo"
	"github.com/batchwork/batchwork/shared/spec"
)

// stubStore answers the few calls a unit test makes; any other call
// panics on the nil Store it embeds.
type stubStore struct {
	Store
	stage domain.Stage
}

func (f stubStore) StageGet(context.Context, string, int) (domain.Stage, error) { return f.stage, nil }

func (stubStore) ShardCountCommits(context.Context, []dynamo.CommitParams) ([]dynamo.ShardRef, error) {
	return nil, errors.New("stub store: counts refused")
}

func newStubLifecycle(cfg Config, store Store) *Lifecycle {
	log := slog.New(slog.DiscardHandler)
	return New(cfg, kernel.New(kernel.Config{}, nil, nil, nil, log), store, nil, nil, nil, log)
}

func parseSpec(t *testing.T, raw string) *spec.Job {
	t.Helper()
	sp, err := spec.Parse([]byte(raw))
	if err != nil {
		t.Fatal(err)
	}
	return sp
}
