package batchwork

// Executor sizes (issue 13.10): a stage may ask for an executor memory size
// (spec resources.memory) and have an attempt that ran out of memory
// retried on the next size up (resources.maxMemory). The construct deploys
// the sizes Props.ExecutorSizes lists: the default size is the executor of
// Props.Executor; each larger one is a Lambda executor of that memory
// (10GiB is Lambda's largest) on the same ready queues. Every executor is
// told its size (EnvExecutorMemory) and hands back the tasks of another
// size unclaimed; the submitting functions are told the sizes
// (lambdaenv.EnvExecutorSizes) and refuse a spec asking for any other.

import (
	"slices"
	"strconv"
	"strings"

	"github.com/aws/aws-cdk-go/awscdk/v2/awslambda"
	"github.com/aws/constructs-go/constructs/v10"
	"github.com/aws/jsii-runtime-go"

	"github.com/batchwork/batchwork/shared/control"
	"github.com/batchwork/batchwork/shared/spec"
	"github.com/batchwork/batchwork/shared/tuning"
)

// EnvExecutorMemory is executor.EnvExecutorMemory: an executor's size.
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

// sizedExecutors deploys a Lambda executor for each size beyond the
// default, subscribed to the ready queues like the default one, and tells
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
		for _, q := range b.readyQueues() {
			b.eventSource(key, q, &awslambda.EventSourceMappingOptions{
				BatchSize:      jsii.Number(tuning.ExecutorBatchSize),
				MaxConcurrency: jsii.Number(float64(p.ExecutorMaxConcurrency)),
			})
		}
	}
}
