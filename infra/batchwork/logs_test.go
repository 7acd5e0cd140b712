package batchwork_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/batchwork/batchwork/shared/lambdaenv"
)

// statementsWith returns, per role, the resources of the Allow statements
// that grant action.
func (s *synthesized) statementsWith(t *testing.T, action string) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	for _, p := range s.ofType("AWS::IAM::Policy") {
		doc := p.Properties["PolicyDocument"].(map[string]any)
		for _, st := range doc["Statement"].([]any) {
			st := st.(map[string]any)
			var acts []any
			switch a := st["Action"].(type) {
			case string:
				acts = []any{a}
			case []any:
				acts = a
			}
			if st["Effect"] != "Allow" || !slices.Contains(acts, any(action)) {
				continue
			}
			var res []string
			switch r := st["Resource"].(type) {
			case []any:
				for _, x := range r {
					res = append(res, logGroupOf(x))
				}
			default:
				res = append(res, logGroupOf(r))
			}
			for _, role := range p.Properties["Roles"].([]any) {
				out[refID(role)] = append(out[refID(role)], res...)
			}
		}
	}
	return out
}

// logGroupOf is the log group a resource's {"Fn::GetAtt": [id, "Arn"]}
// names, or the resource printed.
func logGroupOf(v any) string {
	if m, ok := v.(map[string]any); ok {
		if ga, ok := m["Fn::GetAtt"].([]any); ok && len(ga) == 2 && ga[1] == "Arn" {
			return ga[0].(string)
		}
	}
	return "not a log group's ARN"
}

// GET /jobs/{id}/logs: the api function, and no other role, may filter the
// stack's log groups (every function's and the Fargate executor's), and
// exactly those; its environment names them.
func TestAPIReadsTheStacksLogGroups(t *testing.T) {
	s := inputsStack(t) // every function and both executors
	groups := []string{}
	for id := range s.ofType("AWS::Logs::LogGroup") {
		if !strings.Contains(id, "AccessLogs") && !strings.Contains(id, "Vpc") { // not a VPC's flow logs
			groups = append(groups, id)
		}
	}
	slices.Sort(groups)
	if len(groups) != len(s.b.Functions)+1 {
		t.Fatalf("log groups %v; want one per function and the Fargate executor's", groups)
	}
	roles := s.roles(t)
	readers := s.statementsWith(t, "logs:FilterLogEvents")
	for role, res := range readers {
		if role != roles["api"] {
			t.Errorf("role %s may filter log events %v; only the api's may", role, res)
		}
	}
	got := slices.Clone(readers[roles["api"]])
	slices.Sort(got)
	if !slices.Equal(got, groups) {
		t.Fatalf("the api may filter %v; want exactly the stack's log groups %v", got, groups)
	}
	api := s.json.Resources[s.functionIDs(t)["api"]]
	env := api.Properties["Environment"].(map[string]any)["Variables"].(map[string]any)
	join, ok := env[lambdaenv.EnvLogGroups].(map[string]any)["Fn::Join"].([]any)
	if !ok || join[0] != "," {
		t.Fatalf("%s = %v; want the groups' names joined by commas", lambdaenv.EnvLogGroups, env[lambdaenv.EnvLogGroups])
	}
	var named []string
	for _, n := range join[1].([]any) {
		named = append(named, refID(n))
	}
	slices.Sort(named)
	if !slices.Equal(named, groups) {
		t.Fatalf("%s names %v; want %v", lambdaenv.EnvLogGroups, named, groups)
	}
}
