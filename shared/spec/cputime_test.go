package spec

import (
	"strings"
	"testing"
	"time"
)

// resources.cpuTime is the CPU time an exec stage's program may use:
// whole seconds within bounds, on exec stages only; a bad value is
// refused with an error naming the field and the problem.
func TestResourcesCPUTime(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, stage, res string
		want             time.Duration
		wantErr          string
	}{
		{name: "exec stage", stage: "exec: [prog]", res: "{cpuTime: 90s}", want: 90 * time.Second},
		{name: "with memory", stage: "exec: [prog]", res: "{memory: 2GiB, cpuTime: 1h}", want: time.Hour},
		{name: "under a second", stage: "exec: [prog]", res: "{cpuTime: 500ms}",
			wantErr: "stages[0].resources.cpuTime: must be whole seconds between 1s and 168h0m0s"},
		{name: "not whole seconds", stage: "exec: [prog]", res: "{cpuTime: 1500ms}", wantErr: "stages[0].resources.cpuTime: must be whole seconds"},
		{name: "over the bound", stage: "exec: [prog]", res: "{cpuTime: 200h}", wantErr: "stages[0].resources.cpuTime: must be whole seconds"},
		{name: "not a duration", stage: "exec: [prog]", res: "{cpuTime: 2}", wantErr: "stages[0].resources.cpuTime"},
		{name: "a task stage", stage: "task: noop", res: "{cpuTime: 1m}",
			wantErr: "stages[0].resources.cpuTime: applies to exec stages only"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			src := "name: t\nstages:\n  - name: a\n    " + tt.stage + "\n    partitions: {count: 1}\n    resources: " + tt.res + "\n"
			j, err := Parse([]byte(src))
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := time.Duration(j.Stages[0].Resources.CPUTime); got != tt.want {
				t.Errorf("cpuTime %v, want %v", got, tt.want)
			}
		})
	}
}
