package batchwork

// Executor sizes (issue 13.10): a stage may ask for an executor memory size
// (spec resources.memory) and have an attempt that ran out of memory
// retried on the next size up (resources.maxMemory). The construct deploys
// the sizes Props.ExecutorSizes lists: the default size is the executor of
// Props.Executor, on the three priority ready queues; each larger one gets
// a ready queue of its own (Ready4GiB, output Queue4GiBUrl) and executors
// polling only it: a Lambda executor of that memory (10GiB is Lambda's
// largest) when Props.Executor runs Lambda, and a Fargate service of
// that memory when it runs Fargate. The functions that send task messages
// are told every size's queue (lambdaenv.EnvQueueSized) and may send to
// all of them; an executor may receive from its own size's queues only.
// A sized queue has no priority classes (control/sizedqueues.go). Every
// executor is told its size (EnvExecutorMemory) and forwards a message of
// another size to that size's queue; the submitting functions are told
// the sizes (lambdaenv.EnvExecutorSizes) and refuse a spec asking for any
// other.

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/aws/aws-cdk-go/awscdk/v2/awsecs"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsiam"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambda"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssqs"
	"github.com/aws/constructs-go/constructs/v10"
	"github.com/aws/jsii-runtime-go"

	"github.com/batchwork/batchwork/infra/template"
	"github.com/batchwork/batchwork/shared/control"
	"github.com/batchwork/batchwork/shared/spec"
	"github.com/batchwork/batchwork/shared/tuning"
)

// EnvExecutorMemory is procmem.EnvExecutorMemory: an executor's size.
const EnvExecutorMemory = "BATCHWORK_EXECUTOR_MEMORY"

// executorSizes is Props.ExecutorSizes, checked and sorted, with the
// default size; nil when it lists none beyond the default (the stack
// synthesizes as it did without sizes).
func executorSizes(p Props) []spec.Size {
	sizes, err := control.ParseExecutorSizes(strings.Join(p.ExecutorSizes, ","))
	if err != nil {
		panic("batchwork: ExecutorSizes: " + err.Error())
	}
	if !slices.Contains(sizes, spec.DefaultExecutorSize) {
		sizes = append(sizes, spec.DefaultExecutorSize)
	}
	if len(sizes) == 1 {
		return nil
	}
	slices.Sort(sizes)
	return sizes
}

// sizeName spells a size as specs do: 4GiB.
func sizeName(z spec.Size) string { return strconv.FormatInt(int64(z)>>30, 10) + "GiB" }

// defaultSizeName is the default executor size's name (1GiB).
func defaultSizeName() string { return sizeName(spec.DefaultExecutorSize) }

// executorSizesEnv is lambdaenv.EnvExecutorSizes' value: "" without
// sizes beyond the default.
func executorSizesEnv(p Props) string {
	var names []string
	for _, z := range executorSizes(p) {
		names = append(names, sizeName(z))
	}
	return strings.Join(names, ",")
}

// sizedReadyQueues creates the ready queue of each size beyond the default
// (SizedQueues), as ready creates the priority ones.
func (b *Batchwork) sizedReadyQueues(p Props, ready func(id string) awssqs.Queue) {
	b.SizedQueues = map[string]awssqs.Queue{}
	for _, z := range executorSizes(p) {
		if z != spec.DefaultExecutorSize {
			b.SizedQueues[sizeName(z)] = ready("Ready" + sizeName(z))
		}
	}
}

// sizedQueueNames are SizedQueues' sizes, ascending.
func (b *Batchwork) sizedQueueNames() []string {
	var names []string
	for _, z := range spec.ExecutorSizes {
		if _, ok := b.SizedQueues[sizeName(z)]; ok {
			names = append(names, sizeName(z))
		}
	}
	return names
}

// sizedQueuesEnv is lambdaenv.EnvQueueSized's value ("2GiB=url,4GiB=url",
// control.ParseSizedQueues); nil without sized queues.
func (b *Batchwork) sizedQueuesEnv() *string {
	names := b.sizedQueueNames()
	if len(names) == 0 {
		return nil
	}
	parts := make([]string, len(names))
	for i, n := range names {
		parts[i] = n + "=" + *b.SizedQueues[n].QueueUrl()
	}
	return jsii.String(strings.Join(parts, ","))
}

// grantSizedSend lets a function that sends task messages send to every
// size's queue: a task goes to the queue of the size its next attempt
// needs, whichever function sends it.
func (b *Batchwork) grantSizedSend(to awsiam.IGrantable) {
	for _, n := range b.sizedQueueNames() {
		b.SizedQueues[n].Grant(to, *jsii.Strings(sendActions...)...)
	}
}

// sizedQueueOutputs adds an output per size's queue
// (template.OutQueueSized), as the local runner's data plane names its own.
func (b *Batchwork) sizedQueueOutputs(out func(key string, value *string, desc string)) {
	for _, n := range b.sizedQueueNames() {
		out(template.OutQueueSized(n), b.SizedQueues[n].QueueUrl(), "Ready queue of the "+n+" executors")
	}
}

// sizedExecutors deploys a Lambda executor for each size beyond the
// default, subscribed to its size's ready queue only when Props.Executor
// runs Lambda (as lambdaExecutor subscribes the default one), and tells
// the default executor its size.
func (b *Batchwork) sizedExecutors(c constructs.Construct, p Props) {
	sizes := executorSizes(p)
	if sizes == nil {
		return
	}
	b.Functions[FnExecutor].AddEnvironment(jsii.String(EnvExecutorMemory), jsii.String(defaultSizeName()), nil)
	for _, z := range sizes {
		if z == spec.DefaultExecutorSize {
			continue
		}
		name := sizeName(z)
		fn := b.lambdaFunction(c, p, FnExecutor, "Executor"+name, float64(z>>20), p.ExecutorTimeout)
		fn.AddEnvironment(jsii.String(EnvExecutorMemory), jsii.String(name), nil)
		key := FnExecutor + "@" + name
		b.Functions[key] = fn
		if p.Executor == ExecutorFargate {
			continue
		}
		q := b.SizedQueues[name]
		b.eventSource(key, q, &awslambda.EventSourceMappingOptions{
			BatchSize:      jsii.Number(tuning.ExecutorBatchSize),
			MaxConcurrency: jsii.Number(float64(p.ExecutorMaxConcurrency)),
		})
		// The handler hides a message until its task may run, and keeps a
		// running task's message hidden.
		q.Grant(fn, *jsii.Strings(visibilityActions...)...)
	}
}

// fargateSize is the Fargate task size of an executor size's service:
// memory the size (an attempt that needed it gets all of it, so the
// service runs one slot a task), and the least cpu, from 1 vCPU (the
// default service's) up, that Fargate allows with that memory (AWS:
// "Task CPU and memory": 1024 cpu takes 2 to 8 GiB, 2048 cpu 4 to 16
// GiB, 4096 cpu 8 to 30 GiB, each in 1 GiB steps).
func fargateSize(z spec.Size) (cpu, memoryMiB int) {
	memoryMiB = int(z >> 20)
	for _, c := range []struct{ cpu, lo, hi int }{{1024, 2048, 8192}, {2048, 4096, 16384}, {4096, 8192, 30720}} {
		if memoryMiB >= c.lo && memoryMiB <= c.hi && memoryMiB%1024 == 0 {
			return c.cpu, memoryMiB
		}
	}
	panic(fmt.Sprintf("batchwork: no Fargate cpu takes %d MiB", memoryMiB))
}

// sizedFargateExecutors deploys a Fargate service for each size beyond
// the default, polling only its size's queue, one slot a task, scaled on
// that queue's backlog like the default service.
func (b *Batchwork) sizedFargateExecutors(c constructs.Construct, p Props, cluster awsecs.Cluster) {
	for _, name := range b.sizedQueueNames() {
		z, err := spec.ParseSize(name)
		if err != nil {
			panic("batchwork: " + err.Error())
		}
		cpu, mem := fargateSize(z)
		b.fargateService(c, p, cluster, fargateService{scope: "FargateExecutor" + name, cpu: cpu, memoryMiB: mem, slots: 1,
			queues: []awssqs.Queue{b.SizedQueues[name]}, queueNames: []string{"Sized"}, size: name})
	}
}
