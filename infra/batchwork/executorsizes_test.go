package batchwork_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssqs"
	"github.com/google/go-cmp/cmp"

	"github.com/batchwork/batchwork/infra/batchwork"
	"github.com/batchwork/batchwork/internal/executor/procmem"
	"github.com/batchwork/batchwork/shared/lambdaenv"
)

// ExecutorSizes deploys a Lambda executor of each size beyond the default,
// each subscribed to its size's own ready queue only, with the executor's
// grants; every executor is told its size and the submitting functions the
// sizes. Without the prop the stack is as before: one executor, no size
// anywhere.
func TestExecutorSizesDeployAnExecutorPerSize(t *testing.T) {
	if batchwork.EnvExecutorMemory != procmem.EnvExecutorMemory {
		t.Fatalf("the construct sets %s, the executor reads %s", batchwork.EnvExecutorMemory, procmem.EnvExecutorMemory)
	}
	s := synth(t, "sizes", batchwork.Props{Executor: batchwork.ExecutorBoth, ExecutorSizes: []string{"4GiB", "2GiB"}}, nil)
	ids := s.functionIDs(t)
	envOf := func(id string) map[string]any {
		return s.json.Resources[id].Properties["Environment"].(map[string]any)["Variables"].(map[string]any)
	}
	queueID := func(q awssqs.Queue) string {
		return *s.stack.GetLogicalId(q.Node().DefaultChild().(awscdk.CfnElement))
	}
	priority := map[string]bool{queueID(s.b.High): true, queueID(s.b.Normal): true, queueID(s.b.Low): true}
	wantMem := map[string]struct {
		env    string
		mb     float64
		queues map[string]bool // the queues it is subscribed to
	}{
		batchwork.FnExecutor:           {"1GiB", 1024, priority},
		batchwork.FnExecutor + "@2GiB": {"2GiB", 2048, map[string]bool{queueID(s.b.SizedQueues["2GiB"]): true}},
		batchwork.FnExecutor + "@4GiB": {"4GiB", 4096, map[string]bool{queueID(s.b.SizedQueues["4GiB"]): true}},
	}
	for name, want := range wantMem {
		id, ok := ids[name]
		if !ok {
			t.Fatalf("no function %s; have %v", name, ids)
		}
		props := s.json.Resources[id].Properties
		if got := envOf(id)[batchwork.EnvExecutorMemory]; got != want.env || props["MemorySize"] != want.mb {
			t.Errorf("%s: size %v, memory %v MB; want %s, %v MB", name, got, props["MemorySize"], want.env, want.mb)
		}
		got := map[string]bool{}
		for _, m := range s.ofType("AWS::Lambda::EventSourceMapping") {
			if refID(m.Properties["FunctionName"]) == id {
				got[refID(m.Properties["EventSourceArn"])] = true
			}
		}
		if !cmp.Equal(got, want.queues) {
			t.Errorf("%s: subscribed to %v, want %v", name, keys(got), keys(want.queues))
		}
	}
	// The sized executors' grants are the default executor's actions.
	roles := s.roles(t)
	base := s.actionsOf(t, roles[batchwork.FnExecutor])
	for _, name := range []string{batchwork.FnExecutor + "@2GiB", batchwork.FnExecutor + "@4GiB"} {
		if got := s.actionsOf(t, roles[name]); !slices.Equal(got, base) {
			t.Errorf("%s may %v; the executor may %v", name, got, base)
		}
	}
	for _, td := range s.ofType("AWS::ECS::TaskDefinition") {
		for _, c := range td.Properties["ContainerDefinitions"].([]any) {
			found := false
			for _, kv := range c.(map[string]any)["Environment"].([]any) {
				kv := kv.(map[string]any)
				if kv["Name"] == batchwork.EnvExecutorMemory && slices.Contains([]any{"1GiB", "2GiB", "4GiB"}, kv["Value"]) {
					found = true
				}
			}
			if !found {
				t.Error("a Fargate executor is not told its size")
			}
		}
	}
	for _, name := range []string{batchwork.FnAPI, batchwork.FnSweep} {
		if got := envOf(ids[name])[lambdaenv.EnvExecutorSizes]; got != "1GiB,2GiB,4GiB" {
			t.Errorf("%s: %s = %v, want 1GiB,2GiB,4GiB", name, lambdaenv.EnvExecutorSizes, got)
		}
	}

	plain := synth(t, "nosizes", batchwork.Props{}, nil)
	for name, id := range plain.functionIDs(t) {
		if strings.Contains(name, "@") {
			t.Errorf("without ExecutorSizes the stack has a sized executor %s", name)
		}
		env := plain.json.Resources[id].Properties["Environment"].(map[string]any)["Variables"].(map[string]any)
		for _, k := range []string{batchwork.EnvExecutorMemory, lambdaenv.EnvExecutorSizes, lambdaenv.EnvQueueSized} {
			if _, ok := env[k]; ok {
				t.Errorf("without ExecutorSizes %s is told %s", name, k)
			}
		}
	}
	if len(plain.b.SizedQueues) != 0 {
		t.Errorf("without ExecutorSizes the stack has sized queues %v", plain.b.SizedQueues)
	}
}

func keys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

func TestExecutorSizesRefusesOtherSizes(t *testing.T) {
	defer func() {
		r := recover()
		if r == nil || !strings.Contains(r.(string), "ExecutorSizes") {
			t.Fatalf("panic %v, want one naming ExecutorSizes", r)
		}
	}()
	synth(t, "badsizes", batchwork.Props{ExecutorSizes: []string{"3GiB"}}, nil)
}
