package batchwork_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/batchwork/batchwork/infra/batchwork"
)

// With a Fargate executor, ECS's events of its cluster's tasks stopped
// for memory go to the sweep function (which marks the executor's
// liveness record: shared/control/ecsoom.go), and EventBridge may invoke
// it. Without one there is no such rule.
func TestFargateOutOfMemoryEventsReachTheSweep(t *testing.T) {
	s := synth(t, "fargate-100x8", batchwork.Props{Executor: batchwork.ExecutorFargate, FargateMaxTasks: 100, FargateSlots: 8}, nil)
	sweep := s.functionIDs(t)[batchwork.FnSweep]
	clusters := s.ofType("AWS::ECS::Cluster")
	var found bool
	for id, r := range s.ofType("AWS::Events::Rule") {
		p := r.Properties
		pattern, _ := p["EventPattern"].(map[string]any)
		if pattern == nil || !strings.Contains(strings.Join(strs(pattern["source"]), ","), "aws.ecs") {
			continue
		}
		found = true
		if got := strs(pattern["detail-type"]); len(got) != 1 || got[0] != "ECS Task State Change" {
			t.Errorf("rule %s: detail-type %v", id, got)
		}
		detail, _ := pattern["detail"].(map[string]any)
		arns, _ := detail["clusterArn"].([]any)
		if len(arns) != 1 || clusters[refID(arns[0])].Type != "AWS::ECS::Cluster" {
			t.Errorf("rule %s: clusterArn %v, want the executor cluster's", id, detail["clusterArn"])
		}
		raw, _ := json.Marshal(detail["$or"])
		if !strings.Contains(string(raw), `"stoppedReason":[{"prefix":"OutOfMemoryError"}]`) ||
			!strings.Contains(string(raw), `"containers":{"reason":[{"prefix":"OutOfMemoryError"}]}`) {
			t.Errorf("rule %s: $or %s, want the stopped reason or a container's reason starting OutOfMemoryError", id, raw)
		}
		targets, _ := p["Targets"].([]any)
		if len(targets) != 1 || refID(targets[0].(map[string]any)["Arn"]) != sweep {
			t.Errorf("rule %s: targets %v, want the sweep function (%s)", id, targets, sweep)
		}
		// EventBridge may invoke the sweep for this rule.
		var allowed bool
		for _, perm := range s.ofType("AWS::Lambda::Permission") {
			if refID(perm.Properties["FunctionName"]) == sweep && perm.Properties["Principal"] == "events.amazonaws.com" && refID(perm.Properties["SourceArn"]) == id {
				allowed = true
			}
		}
		if !allowed {
			t.Errorf("rule %s: no permission for EventBridge to invoke the sweep", id)
		}
	}
	if !found {
		t.Fatal("no rule for ECS's stopped-for-memory events")
	}
	for id, r := range defaultStack(t).ofType("AWS::Events::Rule") {
		if pattern, _ := r.Properties["EventPattern"].(map[string]any); pattern != nil && strings.Contains(strings.Join(strs(pattern["source"]), ","), "aws.ecs") {
			t.Errorf("a stack without a Fargate executor has the ECS rule %s", id)
		}
	}
}

func strs(v any) []string {
	l, _ := v.([]any)
	var out []string
	for _, x := range l {
		s, _ := x.(string)
		out = append(out, s)
	}
	return out
}
