package control

import "testing"

func TestExecutorIDForECSTask(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ arn, want string }{
		{"arn:aws:ecs:eu-west-1:123456789012:task/bw-cluster/0f1e2d3c4b5a", "ecs-0f1e2d3c4b5a"},
		{"arn:aws:ecs:eu-west-1:123456789012:task/0f1e2d3c4b5a", "ecs-0f1e2d3c4b5a"}, // the older format
		{"arn:aws:ecs:eu-west-1:123456789012:cluster/bw-cluster", ""},
		{"arn:aws:ecs:eu-west-1:123456789012:task/bw-cluster/", ""},
		{"", ""},
	} {
		if got := ExecutorIDForECSTask(tc.arn); got != tc.want {
			t.Errorf("ExecutorIDForECSTask(%q) = %q, want %q", tc.arn, got, tc.want)
		}
	}
}

func TestECSTaskStateChangeOutOfMemory(t *testing.T) {
	t.Parallel()
	const head = `{"source":"aws.ecs","detail-type":"ECS Task State Change","detail":{"taskArn":"arn:aws:ecs:r:1:task/c/x",`
	for _, tc := range []struct {
		name, ev string
		ok       bool
		want     string
	}{
		{"container killed", head + `"lastStatus":"STOPPED","stoppedReason":"Essential container in task exited","containers":[{"name":"sidecar","reason":""},{"name":"executor","reason":"OutOfMemoryError: Container killed due to memory usage"}]}}`,
			true, "executor: OutOfMemoryError: Container killed due to memory usage"},
		{"task's stopped reason", head + `"lastStatus":"DEPROVISIONING","stoppedReason":"OutOfMemoryError: Container killed due to memory usage"}}`,
			true, "OutOfMemoryError: Container killed due to memory usage"},
		{"scaled in", head + `"lastStatus":"STOPPED","stoppedReason":"Scaling activity initiated by (deployment ecs-svc/1)","containers":[{"name":"executor","reason":""}]}}`,
			true, ""},
		{"exited with an error", head + `"lastStatus":"STOPPED","stoppedReason":"Essential container in task exited","containers":[{"name":"executor","reason":"exit status 2"}]}}`,
			true, ""},
		{"the sweep's schedule", `{"source":"aws.events","detail-type":"Scheduled Event","detail":{}}`, false, ""},
		{"not JSON", `[`, false, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ev, ok := ParseECSTaskStateChange([]byte(tc.ev))
			if ok != tc.ok || ev.OutOfMemory() != tc.want {
				t.Fatalf("parsed %v, out of memory %q; want %v, %q", ok, ev.OutOfMemory(), tc.ok, tc.want)
			}
		})
	}
}
