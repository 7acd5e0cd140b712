// Package lambdatask is the event a `lambda` stage's function receives and
// the response it returns: the contract between Batchwork and a user's
// Lambda function, in any runtime. docs/building.md ("Lambda stages")
// describes it for function authors; internal/executor (lambdatask.go,
// lambdackpt.go, lambdareject.go) is the side that invokes.
//
// A stage's `lambda: <function name or ARN>` invokes an existing function
// once per attempt, synchronously (RequestResponse), and again from each
// checkpoint its response asks for. The event (Event) says which task and
// attempt this is, its parameters, where its input is and where its
// outputs go; the function reads the input from S3 itself, writes each
// output partition to the key the event gives it, and answers with the
// outputs it wrote (Response). The executor then publishes empty objects
// for the partitions the function did not write, and commits with its
// claim, so the lease, the fencing and the commit are the same as for a
// Go task:
//   - the function may name only this attempt's own output keys (the
//     event's outputs): a key anywhere else, another attempt's or another
//     job's included, fails the attempt, so no response can make a commit
//     publish objects that are not this attempt's;
//   - every output it names must exist before the commit;
//   - while the function runs the executor renews the lease; if the lease
//     is lost or the job ends, the executor stops waiting and the attempt
//     is abandoned or stopped as any other. The function itself runs on
//     (Lambda cannot stop an invocation), writing only under its own
//     attempt's prefix, which is never committed.
//
// The functions a spec may name are the operator's choice: submit refuses
// any other (control.Config.TaskFunctions), and the executor roles may
// invoke only those (infra/batchwork's TaskFunctions). A function writes
// with its own role, which the operator lets write the job area
// (TaskFunctionRoleArns); the bucket takes only writes with
// If-None-Match: *, so a function treats 412 Precondition Failed on its
// own key as "already written" (Lambda may deliver one invocation twice
// when the SDK retries).
//
// The executor reads none of a lambda stage's input (the event gives the
// function the split's byte range, or the shuffle's keys, as planned: the
// function aligns the range to records itself) and none of the outputs
// the function wrote, so a lambda stage's task records no record counts:
// its records in and out stay 0 in the job's status.
//
// # Checkpoints
//
// The Go API's Task.Checkpoint and Task.Resume, for a function the
// executor invokes, so that a partition longer than one invocation
// (Lambda's 15 minutes) can finish, and a retry resumes where the last
// attempt's checkpoint was. The event carries, besides outputs:
//   - resume {offset, state} (Resume): the latest checkpoint of the task
//     (of an earlier attempt, or of this attempt's previous invocation),
//     when there is one: read the input from offset on (counted from the
//     first byte of the task's input, input.start for a split), with
//     state (base64 in JSON). Absent: start afresh.
//   - checkpointOutputs: one key per output partition, where an
//     invocation that will checkpoint writes its outputs. Once the task
//     has checkpointed (or resumed), outputs are these keys too.
//
// The response may carry checkpoint {offset, state} (Checkpoint): "save
// this and invoke me again from it". The executor then, as for a Go
// function: takes the outputs the response names (written to
// checkpointOutputs) as the task's sealed segments, writes the checkpoint
// record, and points the task at it conditional on the attempt's claim (a
// fenced attempt's checkpoint is refused and never used, and the attempt
// stops); only then does it invoke the function again, with the new
// resume point and fresh checkpointOutputs. The rejects of a response
// with a checkpoint go with it (a retry resuming from it keeps them). A
// response without a checkpoint ends the attempt: the executor publishes
// each output object as the concatenation of its segments in order (byte
// for byte what an uninterrupted run would have written) and commits.
//
// The limits are the Go API's: the offset is not negative nor behind the
// last checkpoint, the state at most domain.MaxCheckpointState bytes; and
// each checkpoint must make progress (a further offset or a new state),
// so a function cannot keep the executor invoking it for ever.
package lambdatask
