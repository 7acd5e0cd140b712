package cli

import (
	"testing"

	"github.com/batchwork/batchwork/client"
)

// `batchwork tasks` shows a task's last checkpoint and continuations in
// its STATE cell.
func TestTaskStateShowsCheckpoint(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		task client.Task
		want string
	}{
		{"none", client.Task{State: "CLAIMED"}, "CLAIMED"},
		{"checkpointed", client.Task{State: "READY", Checkpoint: &client.TaskCheckpoint{Attempt: 2, Offset: 4096}},
			"READY, checkpoint at byte 4096 (attempt 2)"},
		{"continued", client.Task{State: "SUCCEEDED", Checkpoint: &client.TaskCheckpoint{Attempt: 4, Offset: 9000, Continuations: 3}},
			"SUCCEEDED, checkpoint at byte 9000 (attempt 4), continued 3×"},
	} {
		if got := withCheckpoint(tc.task, taskState(tc.task)); got != tc.want {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
}
