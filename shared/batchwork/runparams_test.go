package batchwork_test

import (
	"context"
	"testing"

	"github.com/batchwork/batchwork/shared/batchwork"
)

// RunTask hands a function the run parameters it is given, as an
// executor hands it its job's.
func TestRunTaskRunParams(t *testing.T) {
	t.Parallel()
	var got string
	fn := func(_ context.Context, t *batchwork.Task) error {
		got = t.RunParams["date"]
		return nil
	}
	if _, err := batchwork.RunTask(context.Background(), fn, batchwork.TaskInput{RunParams: map[string]string{"date": "2026-03-01"}}); err != nil {
		t.Fatal(err)
	}
	if got != "2026-03-01" {
		t.Errorf("t.RunParams[date] = %q", got)
	}
}
