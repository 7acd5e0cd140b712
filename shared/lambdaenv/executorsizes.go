package lambdaenv

// EnvExecutorSizes lists the executor memory sizes the stack deploys
// (control.ParseExecutorSizes: "1GiB,4GiB"); optional (unset: the default
// size only). Read by the functions that submit (api, sweep), which refuse
// a stage asking for another size; the construct sets it from its
// ExecutorSizes.
const EnvExecutorSizes = "BATCHWORK_EXECUTOR_SIZES"
