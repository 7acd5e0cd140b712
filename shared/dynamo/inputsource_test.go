package dynamo

import (
	"testing"
	"time"

	"github.com/batchwork/batchwork/shared/domain"
	"github.com/batchwork/batchwork/shared/split"
)

// A task's input source survives its record; source 0 (every stage with
// one input) writes no attribute, so such records are as they were.
func TestTaskInputSource(t *testing.T) {
	t.Parallel()
	for _, src := range []int{0, 1, 15} {
		task := domain.Task{Ref: domain.TaskRef{Job: "j", Stage: 1, Partition: 2}, Input: &split.Split{Key: "k", Start: 1, End: 9, Source: src}}
		item := encodeTask(task, time.Time{})
		if _, ok := item[aInSource]; ok != (src != 0) {
			t.Errorf("source %d: attribute written %t", src, ok)
		}
		if got := decodeTask(task.Ref, item).Input; *got != *task.Input {
			t.Errorf("source %d: decoded %+v, want %+v", src, *got, *task.Input)
		}
	}
}
