package batchwork_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/batchwork/batchwork/examples/join"
	"github.com/batchwork/batchwork/examples/wordcount"
	"github.com/batchwork/batchwork/shared/batchwork"
)

// A task of a stage that reads nothing (partitioned by count, no input
// prefix, no shuffle) has a nil Input. A function that reads records from
// it fails once, permanently, saying the stage has no input: a panic would
// be retried, and no retry can give the task an input.
func TestTaskWithoutInputFailsPermanently(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		fn   batchwork.Func
	}{
		{"Records", func(ctx context.Context, t *batchwork.Task) error {
			return batchwork.Records(t.Input, func(k, v string) error { return nil })
		}},
		{"wordcount.Map", wordcount.Map},
		{"wordcount.Reduce", wordcount.Reduce},
		{"join.Join", join.Join},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := batchwork.RunTask(context.Background(), tt.fn, batchwork.TaskInput{Stage: "reduce"})
			if err == nil {
				t.Fatal("no error; want the task to fail for want of an input")
			}
			if strings.Contains(err.Error(), "panic") {
				t.Errorf("error %q: the function panicked", err)
			}
			if !batchwork.IsPermanent(err) || !errors.Is(err, batchwork.ErrNoInput) {
				t.Errorf("error %q: want a permanent ErrNoInput", err)
			}
			if !strings.Contains(err.Error(), "stage has no input") {
				t.Errorf("error %q does not say the stage has no input", err)
			}
		})
	}
}
