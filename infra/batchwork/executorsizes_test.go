package batchwork_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/batchwork/batchwork/infra/batchwork"
	"github.com/batchwork/batchwork/internal/executor"
	"github.com/batchwork/batchwork/shared/lambdaenv"
)

// ExecutorSizes deploys a Lambda executor of each size beyond the default,
// on every ready queue, with the executor's grants; every executor is told
// its size and the submitting functions the sizes. Without the prop the
// stack is as before: one executor, no size anywhere.
func TestExecutorSizesDeployAnExecutorPerSize(t *testing.T) {
	if batchwork.EnvExecutorMemory != executor.EnvExecutorMemory {
		t.Fatalf("the construct sets %s, the executor reads %s", batchwork.EnvExecutorMemory, executor.EnvExecutorMemory)
	}
	s := synth(t, "sizes", batchwork.Props{Executor: batchwork.ExecutorBoth, ExecutorSizes: []string{"4GiB", "2GiB"}}, nil)
	ids := s.functionIDs(t)
	envOf := func(id string) map[string]any {
		return s.json.Resources[id].Properties["Environment"].(map[string]any)["Variables"].(map[string]any)
	}
	wantMem := map[string]struct {
		env string
		mb  float64
	}{
		batchwork.FnExecutor: {"1GiB", 1024}, batchwork.FnExecutor + "@2GiB": {"2GiB", 2048}, batchwork.FnExecutor + "@4GiB": {"4GiB", 4096},
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
		// Subscribed to the three ready queues.
		n := 0
		for _, m := range s.ofType("AWS::Lambda::EventSourceMapping") {
			if refID(m.Properties["FunctionName"]) == id {
				n++
			}
		}
		if n != 3 {
			t.Errorf("%s: %d event source mappings, want one per ready queue (3)", name, n)
		}
	}
	// The sized executors' grants are the default executor's.
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
				if kv["Name"] == batchwork.EnvExecutorMemory && kv["Value"] == "1GiB" {
					found = true
				}
			}
			if !found {
				t.Error("the Fargate executor is not told its size (1GiB)")
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
		if _, ok := env[batchwork.EnvExecutorMemory]; ok {
			t.Errorf("without ExecutorSizes %s is told a size", name)
		}
		if _, ok := env[lambdaenv.EnvExecutorSizes]; ok {
			t.Errorf("without ExecutorSizes %s is told sizes", name)
		}
	}
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
