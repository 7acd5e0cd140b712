package cli

import (
	"testing"

	"github.com/batchwork/batchwork/shared/control"
)

func TestTaskStateShowsWhatEndedIt(t *testing.T) {
	t.Parallel()
	tests := []struct {
		task control.TaskInfo
		want string
	}{
		{control.TaskInfo{State: "FAILED", ErrorClass: "permanent"}, "FAILED (permanent error)"},
		{control.TaskInfo{State: "FAILED", ErrorClass: "error"}, "FAILED (retries exhausted)"},
		{control.TaskInfo{State: "FAILED", ErrorClass: "timed_out"}, "FAILED (timed out)"},
		{control.TaskInfo{State: "FAILED", ErrorClass: "out_of_memory", Memory: "4GiB"}, "FAILED (out of memory)"},
		{control.TaskInfo{State: "FAILED"}, "FAILED"},
		{control.TaskInfo{State: "READY", ErrorClass: "out_of_memory", Memory: "4GiB"}, "READY @4GiB"},
		{control.TaskInfo{State: "SUCCEEDED", ErrorClass: "error"}, "SUCCEEDED"},
	}
	for _, tt := range tests {
		if got := taskState(tt.task); got != tt.want {
			t.Errorf("taskState(%+v) = %q, want %q", tt.task, got, tt.want)
		}
	}
}
