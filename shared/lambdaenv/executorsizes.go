package lambdaenv

// EnvExecutorSizes lists the executor memory sizes the stack deploys
// (control.ParseExecutorSizes: "1GiB,4GiB"); optional (unset: the default
// size only). Read by the functions that submit (api, sweep), which refuse
// a stage asking for another size; the construct sets it from its
// ExecutorSizes.
const EnvExecutorSizes = "BATCHWORK_EXECUTOR_SIZES"

// EnvQueueSized names the ready queue of each executor size beyond the
// default (control.ParseSizedQueues: "4GiB=url,8GiB=url"); optional
// (unset: every task uses the priority queues). Every function that sends
// task messages routes a task to its size's queue; an executor of a size
// with a queue polls only that one (control.Queues.Polled).
const EnvQueueSized = "BATCHWORK_QUEUE_SIZED"
