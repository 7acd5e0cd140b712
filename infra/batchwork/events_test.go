package batchwork_test

import (
	"testing"

	"github.com/aws/aws-cdk-go/awscdk/v2"

	"github.com/batchwork/batchwork/shared/lambdaenv"
)

// The construct creates the event bus, names it per stack, tells every
// function its name, and grants events:PutEvents on that bus only.
func TestEventBus(t *testing.T) {
	s := remoteStack(t) // every function
	buses := s.ofType("AWS::Events::EventBus")
	if len(buses) != 1 {
		t.Fatalf("%d event buses, want 1", len(buses))
	}
	busID := *s.stack.GetLogicalId(s.b.EventBus.Node().DefaultChild().(awscdk.CfnElement))
	name, ok := buses[busID].Properties["Name"].(map[string]any)
	if !ok || name["Fn::Join"] == nil {
		t.Errorf("bus name %v, want one joined from the stack's name (unique per stack)", buses[busID].Properties["Name"])
	}
	for fn, id := range s.functionIDs(t) {
		env := s.json.Resources[id].Properties["Environment"].(map[string]any)["Variables"].(map[string]any)
		v, _ := env[lambdaenv.EnvEventBus].(map[string]any)
		if got, _ := v["Fn::GetAtt"].([]any); len(got) != 2 || got[0] != busID || got[1] != "Name" {
			t.Errorf("%s: %s = %v, want the bus's name", fn, lambdaenv.EnvEventBus, env[lambdaenv.EnvEventBus])
		}
	}
	// PutEvents is granted on the bus's ARN alone.
	for pid, p := range s.ofType("AWS::IAM::Policy") {
		doc := p.Properties["PolicyDocument"].(map[string]any)
		for _, st := range doc["Statement"].([]any) {
			st := st.(map[string]any)
			acts, _ := st["Action"].([]any)
			if a, ok := st["Action"].(string); ok {
				acts = []any{a}
			}
			for _, a := range acts {
				if a != "events:PutEvents" {
					continue
				}
				res, _ := st["Resource"].(map[string]any)
				if get, _ := res["Fn::GetAtt"].([]any); len(get) != 2 || get[0] != busID || get[1] != "Arn" {
					t.Errorf("policy %s grants events:PutEvents on %v, want the bus only", pid, st["Resource"])
				}
			}
		}
	}
}
