// Package batchwork is the API for writing Batchwork task functions in Go
// and for building the executor that runs them.
//
// A job spec names, for each stage, the task function that runs its
// partitions (a stage's "task"). An executor is a Go program that
// registers the functions under those names and calls [Main]:
//
//	package main
//
//	import (
//		"bufio"
//		"context"
//		"fmt"
//		"strings"
//
//		"github.com/batchwork/batchwork/shared/batchwork"
//	)
//
//	func main() {
//		batchwork.Register("upper", func(ctx context.Context, t *batchwork.Task) error {
//			sc := bufio.NewScanner(t.Input)
//			for sc.Scan() {
//				fmt.Fprintln(t.Out, strings.ToUpper(sc.Text()))
//			}
//			return sc.Err()
//		})
//		batchwork.Main()
//	}
//
// # Writing a task
//
// A task function is a [Func]: it gets a context and a [Task] and returns
// nil when the task's work is done. It may run more than once for the same
// partition (a retry after an error, or after its executor died), and only
// one attempt's outputs are ever published: the first to commit. So a
// function must write its results to [Task.Out] and nowhere else that
// matters, and must give the same output for the same input if downstream
// stages are to see one consistent result. A returned error fails the
// attempt, and the job's retry policy decides whether it runs again; a
// panic is an error too. An error wrapped with [Permanent] (bad data that
// no retry fixes) fails the task at once, without its remaining attempts.
// A stage's timeout cancels ctx when the attempt has run that long; the
// attempt is then failed and retried, and a function that ignores ctx is
// abandoned (it keeps running, but nothing it does can commit).
//
// # Input
//
// [Task.Input] streams the task's records:
//
//   - for a stage over an S3 prefix ("partitions": {"input": ...}), one
//     split of one object, cut at record boundaries, in [Task.Format]:
//     "lines" (the default) gives whole text lines, "jsonl" whole JSON
//     lines, and "csv" whole CSV records (a quoted field may hold
//     newlines), with the file's column names in [Task.Header]; a
//     compressed object (.gz, .zst) is one split, decompressed as read;
//     a stage over several prefixes ("inputs": [...]) reads a split of
//     one of them, in that input's format, and [Task.Source] names it;
//   - for the stage after a shuffle, its shuffle partition: the
//     "key<TAB>value" lines every upstream task emitted for it, which
//     [Records] reads; after a range shuffle ("by": "range"), sorted by
//     key;
//   - for a stage after several shuffles (a join), its partition of each:
//     "source<TAB>key<TAB>value" lines, source the upstream stage's name,
//     which [TaggedRecords] reads;
//   - nil for a stage with a fixed partition count ("partitions":
//     {"count": n}); such a task reads its [Task.Params] instead.
//
// # Output
//
// [Task.Out] holds the task's outputs, published only if the attempt
// commits. A stage without a shuffle has one output: write it with
// [Output.Write] (Out is an [io.Writer]). A stage with "shuffle":
// {"partitions": n} has n, one per downstream task: [Output.Emit] writes a
// key/value record to the partition the key hashes to ([PartitionOf]), so
// all the records of one key reach the same downstream task, and
// [Output.Part] writes to a partition of the function's choosing. With
// "by": "range" the task has one output, [Output.Parts] is 1: Emit and
// Write put records there, and they are sorted and sent to the
// partitions whose key ranges hold them when the function returns (a
// reducer that writes its records in the order it reads them keeps the
// total order).
//
// # Parameters, logging and cancellation
//
// [Task.Params] are the partition's parameters from the spec
// ("partitions": {"params": [...]}). [Task.Log] is a structured logger
// whose lines already name the job, stage, task and attempt. The context
// is cancelled when the attempt's lease is lost (another executor took
// the task over) or its job ended (cancelled, failed, past its deadline):
// a function that runs for long should watch ctx.Done and return, since
// whatever it writes afterwards is discarded anyway.
//
// # Testing
//
// [RunTask] runs a function on given input in this process, without AWS,
// and returns what it wrote, so task functions can be unit tested like
// any other Go code.
//
// # Running an executor
//
// [Main] runs the functions registered with [Register] (the
// [DefaultRegistry]) as a host chosen by the environment:
//
//   - with BATCHWORK_LIST_TASKS=1 it prints the registered task names as a
//     JSON array and exits (the CDK construct runs the executor this way
//     at synth time to learn its task names);
//   - on AWS Lambda (AWS_LAMBDA_RUNTIME_API set) it serves the ready
//     queues' SQS events, reporting partial batch failures;
//   - anywhere else (Fargate, a laptop) it long-polls the ready queues
//     with BATCHWORK_SLOTS concurrent tasks (default 4), and on SIGTERM or
//     an interrupt stops receiving and lets running tasks finish and
//     commit.
//
// Either host is configured by the environment the Batchwork stack gives
// its functions (the table, bucket and queues: see shared/lambdaenv), and
// publishes its task names to the control plane when it starts, so that a
// spec naming a task no executor has is refused at submit.
package batchwork
