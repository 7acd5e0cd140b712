package cli

import (
	"testing"

	"github.com/batchwork/batchwork/client"
)

func TestTaskStateShowsWhatEndedIt(t *testing.T) {
	t.Parallel()
	tests := []struct {
		task client.Task
		want string
	}{
		{client.Task{State: "FAILED", ErrorClass: "permanent"}, "FAILED (permanent error)"},
		{client.Task{State: "FAILED", ErrorClass: "error"}, "FAILED (retries exhausted)"},
		{client.Task{State: "FAILED", ErrorClass: "timed_out"}, "FAILED (timed out)"},
		{client.Task{State: "FAILED", ErrorClass: "out_of_memory", Memory: "4GiB"}, "FAILED (out of memory)"},
		{client.Task{State: "FAILED"}, "FAILED"},
		{client.Task{State: "READY", ErrorClass: "out_of_memory", Memory: "4GiB"}, "READY @4GiB"},
		{client.Task{State: "SUCCEEDED", ErrorClass: "error"}, "SUCCEEDED"},
	}
	for _, tt := range tests {
		if got := taskState(tt.task); got != tt.want {
			t.Errorf("taskState(%+v) = %q, want %q", tt.task, got, tt.want)
		}
	}
}
