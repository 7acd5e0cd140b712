package batchwork_test

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssqs"
	"github.com/aws/constructs-go/constructs/v10"
	"github.com/aws/jsii-runtime-go"
	"github.com/google/go-cmp/cmp"

	"github.com/batchwork/batchwork/infra/batchwork"
	"github.com/batchwork/batchwork/infra/template"
	"github.com/batchwork/batchwork/shared/control"
	"github.com/batchwork/batchwork/shared/lambdaenv"
	"github.com/batchwork/batchwork/shared/spec"
)

// sizedStack has executor sizes 1GiB (default), 2GiB, 8GiB and 10GiB and
// both executors, so every size has a Lambda executor and a Fargate
// service.
func sizedStack(t *testing.T) *synthesized {
	return synth(t, "sizedqueues", batchwork.Props{Executor: batchwork.ExecutorBoth, ExecutorSizes: []string{"2GiB", "8GiB", "10GiB"}}, nil)
}

func (s *synthesized) logicalID(c constructs.IConstruct) string {
	return *s.stack.GetLogicalId(c.Node().DefaultChild().(awscdk.CfnElement))
}

// Each size beyond the default has one ready queue, configured as the
// priority ones (visibility, dead-letter queue, encryption), with an
// output the local runner's data plane also uses; the default size has
// none. Every function that sends task messages is told every size's
// queue, in the form control.ParseSizedQueues reads.
func TestSizedReadyQueues(t *testing.T) {
	s := sizedStack(t)
	for _, size := range []string{"2GiB", "8GiB", "10GiB"} {
		if s.b.SizedQueues[size] == nil {
			t.Fatalf("no %s queue: %v", size, s.b.SizedQueues)
		}
	}
	if len(s.b.SizedQueues) != 3 {
		t.Fatalf("sized queues %v, want 2GiB, 8GiB, 10GiB only", s.b.SizedQueues)
	}
	normal := s.json.Resources[s.logicalID(s.b.Normal)].Properties
	for name, q := range s.b.SizedQueues {
		id := s.logicalID(q)
		props := s.json.Resources[id].Properties
		for _, k := range []string{"VisibilityTimeout", "RedrivePolicy", "SqsManagedSseEnabled"} {
			if !cmp.Equal(props[k], normal[k]) {
				t.Errorf("%s queue: %s %v, the normal queue's %v", name, k, props[k], normal[k])
			}
		}
		out, ok := s.json.Outputs[template.OutQueueSized(name)].(map[string]any)
		if !ok || refID(out["Value"]) != id {
			t.Errorf("%s queue: output %s %v, want a Ref to %s", name, template.OutQueueSized(name), out, id)
		}
	}
	ids := s.functionIDs(t)
	for _, name := range []string{batchwork.FnAPI, batchwork.FnSweep, batchwork.FnExecutor, batchwork.FnExecutor + "@8GiB"} {
		env := s.json.Resources[ids[name]].Properties["Environment"].(map[string]any)["Variables"].(map[string]any)
		v, ok := env[lambdaenv.EnvQueueSized]
		if !ok {
			t.Errorf("%s is not told the sized queues", name)
			continue
		}
		// {"Fn::Join": ["", ["2GiB=", {"Ref": id}, ",8GiB=", ...]]}: resolve
		// each Ref to its id and parse what the function would.
		var b strings.Builder
		for _, part := range v.(map[string]any)["Fn::Join"].([]any)[1].([]any) {
			if str, ok := part.(string); ok {
				b.WriteString(str)
			} else {
				b.WriteString(refID(part))
			}
		}
		got, err := control.ParseSizedQueues(b.String())
		if err != nil {
			t.Errorf("%s: %s %q: %v", name, lambdaenv.EnvQueueSized, b.String(), err)
			continue
		}
		if len(got) != len(s.b.SizedQueues) {
			t.Errorf("%s: sized queues %q, want %d", name, b.String(), len(s.b.SizedQueues))
		}
		for n, q := range s.b.SizedQueues {
			z, err := spec.ParseSize(n)
			if err != nil {
				t.Fatal(err)
			}
			if got[z] != s.logicalID(q) {
				t.Errorf("%s: queue of %s %q, want %s", name, n, got[z], s.logicalID(q))
			}
		}
	}
}

// queueGrants maps each role granted something on queue id to the
// actions granted.
func (s *synthesized) queueGrants(id string) map[string][]string {
	out := map[string][]string{}
	for _, p := range s.ofType("AWS::IAM::Policy") {
		for _, st := range p.Properties["PolicyDocument"].(map[string]any)["Statement"].([]any) {
			st := st.(map[string]any)
			res := asAnyList(st["Resource"])
			on := false
			for _, r := range res {
				on = on || refID(r) == id
			}
			if !on || st["Effect"] != "Allow" {
				continue
			}
			for _, r := range p.Properties["Roles"].([]any) {
				for _, a := range asAnyList(st["Action"]) {
					out[refID(r)] = dedupe(sorted(out[refID(r)], []string{a.(string)}))
				}
			}
		}
	}
	return out
}

// Each executor receives from its own size's queues only: the default
// executors (Lambda and Fargate) from the priority queues, each sized one
// from its size's queue. Every role that sends task messages may send to
// every size's queue.
func TestSizedQueueGrants(t *testing.T) {
	s := sizedStack(t)
	roles := map[string]string{} // role id -> name
	for name, id := range s.functionIDs(t) {
		roles[refID(s.json.Resources[id].Properties["Role"])] = name
	}
	fargate := map[string]string{} // size -> task role id
	for _, size := range []string{"", "2GiB", "8GiB", "10GiB"} {
		td := s.b.Construct.Node().FindChild(jsii.String("FargateExecutor" + size)).Node().FindChild(jsii.String("QueueProcessingTaskDef"))
		role := *s.stack.GetLogicalId(td.Node().FindChild(jsii.String("TaskRole")).Node().DefaultChild().(awscdk.CfnElement))
		roles[role] = "fargate" + size
		fargate[size] = role
	}
	receivers := func(id string) []string {
		var out []string
		for role, acts := range s.queueGrants(id) {
			for _, a := range acts {
				if a == "sqs:ReceiveMessage" {
					out = append(out, roles[role])
				}
			}
		}
		return sorted(out)
	}
	senders := func(id string) []string {
		var out []string
		for role, acts := range s.queueGrants(id) {
			for _, a := range acts {
				if a == "sqs:SendMessage" {
					out = append(out, roles[role])
				}
			}
		}
		return sorted(out)
	}
	wantSenders := sorted([]string{batchwork.FnAPI, batchwork.FnSweep, batchwork.FnExecutor, batchwork.FnExecutor + "@2GiB", batchwork.FnExecutor + "@8GiB",
		batchwork.FnExecutor + "@10GiB", "fargate", "fargate2GiB", "fargate8GiB", "fargate10GiB"})
	for _, q := range []awssqs.Queue{s.b.High, s.b.Normal, s.b.Low} {
		if got, want := receivers(s.logicalID(q)), sorted([]string{batchwork.FnExecutor, "fargate"}); !cmp.Equal(got, want) {
			t.Errorf("priority queue %s: received by %v, want %v", s.logicalID(q), got, want)
		}
	}
	for size, q := range s.b.SizedQueues {
		id := s.logicalID(q)
		if got, want := receivers(id), sorted([]string{batchwork.FnExecutor + "@" + size, "fargate" + size}); !cmp.Equal(got, want) {
			t.Errorf("%s queue: received by %v, want %v", size, got, want)
		}
		if got := senders(id); !cmp.Equal(got, wantSenders) {
			t.Errorf("%s queue: sent to by %v, want %v", size, got, wantSenders)
		}
		for role, acts := range s.queueGrants(id) {
			name := roles[role]
			if strings.HasSuffix(name, size) {
				continue // its own queue
			}
			if !cmp.Equal(acts, []string{"sqs:SendMessage"}) {
				t.Errorf("%s queue: %s may %v; only its executors may more than send", size, name, acts)
			}
		}
	}
}

// fargateValid says whether Fargate (Linux) runs a task of cpu units and
// memoryMiB (AWS: "Amazon ECS task definition parameters for Fargate",
// task CPU and memory).
func fargateValid(cpu, memoryMiB int) bool {
	switch cpu {
	case 256:
		return memoryMiB == 512 || memoryMiB == 1024 || memoryMiB == 2048
	case 512:
		return memoryMiB >= 1024 && memoryMiB <= 4096 && memoryMiB%1024 == 0
	case 1024:
		return memoryMiB >= 2048 && memoryMiB <= 8192 && memoryMiB%1024 == 0
	case 2048:
		return memoryMiB >= 4096 && memoryMiB <= 16384 && memoryMiB%1024 == 0
	case 4096:
		return memoryMiB >= 8192 && memoryMiB <= 30720 && memoryMiB%1024 == 0
	}
	return false
}

// With a Fargate executor, each size beyond the default has a Fargate
// service of its own: a task of that memory (and a valid cpu for it), one
// slot, told its size, scaled on the backlog of its size's queue only.
func TestFargateServicePerSize(t *testing.T) {
	s := sizedStack(t)
	want := map[string]struct{ mem, slots int }{"": {2048, 4}, "2GiB": {2048, 1}, "8GiB": {8192, 1}, "10GiB": {10240, 1}}
	for size, w := range want {
		scope := s.b.Construct.Node().FindChild(jsii.String("FargateExecutor" + size))
		td := s.json.Resources[s.logicalID(scope.Node().FindChild(jsii.String("QueueProcessingTaskDef")))].Properties
		cpu, mem := atoi(t, td["Cpu"]), atoi(t, td["Memory"])
		if mem != w.mem || !fargateValid(cpu, mem) {
			t.Errorf("Fargate executor %q: cpu %d memory %d MiB; want %d MiB with a valid cpu", size, cpu, mem, w.mem)
		}
		env := map[string]any{}
		for _, kv := range td["ContainerDefinitions"].([]any)[0].(map[string]any)["Environment"].([]any) {
			kv := kv.(map[string]any)
			env[kv["Name"].(string)] = kv["Value"]
		}
		wantSize := size
		if size == "" {
			wantSize = "1GiB"
		}
		if env[batchwork.EnvExecutorMemory] != wantSize || env[batchwork.EnvSlots] != itoa(w.slots) {
			t.Errorf("Fargate executor %q: size %v, slots %v; want %s, %d", size, env[batchwork.EnvExecutorMemory], env[batchwork.EnvSlots], wantSize, w.slots)
		}
		if _, ok := env[lambdaenv.EnvQueueSized]; !ok {
			t.Errorf("Fargate executor %q is not told the sized queues (it sends retries there)", size)
		}
		// Its scaling metric reads its own queues only.
		svc := s.logicalID(scope.Node().FindChild(jsii.String("QueueProcessingFargateService")))
		var queues []string
		for _, a := range s.ofType("AWS::CloudWatch::Alarm") {
			if !strings.Contains(a.Properties["AlarmDescription"].(string), "scale the Fargate executor") {
				continue
			}
			if !dependsOnService(s, a, svc) {
				continue
			}
			for _, m := range asAnyList(a.Properties["Metrics"]) {
				ms, _ := m.(map[string]any)["MetricStat"].(map[string]any)
				if ms == nil {
					continue
				}
				for _, d := range asAnyList(ms["Metric"].(map[string]any)["Dimensions"]) {
					queues = append(queues, refID(d.(map[string]any)["Value"]))
				}
			}
		}
		wantQueues := []string{}
		if size == "" {
			for _, q := range []awssqs.Queue{s.b.High, s.b.Normal, s.b.Low} {
				wantQueues = append(wantQueues, s.logicalID(q), s.logicalID(q))
			}
		} else {
			wantQueues = []string{s.logicalID(s.b.SizedQueues[size]), s.logicalID(s.b.SizedQueues[size])}
		}
		if got := sorted(queues); !cmp.Equal(got, sorted(wantQueues)) {
			t.Errorf("Fargate executor %q scales on the queues %v, want %v", size, got, sorted(wantQueues))
		}
	}
}

// dependsOnService says whether a scaling alarm acts on svc's scalable
// target (alarm -> policy -> target -> the service's name).
func dependsOnService(s *synthesized, alarm resource, svc string) bool {
	for _, act := range asAnyList(alarm.Properties["AlarmActions"]) {
		policy, ok := s.json.Resources[refID(act)]
		if !ok {
			continue
		}
		target := s.json.Resources[refID(policy.Properties["ScalingTargetId"])]
		b, _ := json.Marshal(target.Properties["ResourceId"])
		if strings.Contains(string(b), `"`+svc+`"`) {
			return true
		}
	}
	return false
}

func atoi(t *testing.T, v any) int {
	t.Helper()
	n, err := strconv.Atoi(fmt.Sprint(v))
	if err != nil {
		t.Fatalf("%v: not a number", v)
	}
	return n
}

func itoa(n int) string { return strconv.Itoa(n) }
