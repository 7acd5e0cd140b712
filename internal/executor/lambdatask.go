package executor

// Lambda stages: a stage's `lambda: <function name or ARN>` invokes an
// existing Lambda function, in any runtime, once per attempt, synchronously
// (RequestResponse), and again from each checkpoint its response asks for
// (lambdackpt.go). The event (LambdaEvent) says which task and attempt
// this is, its parameters, where its input is and where its outputs go;
// the function reads the input from S3 itself, writes each output
// partition to the key the event gives it, and answers with the outputs
// it wrote (LambdaResponse). The executor then publishes empty objects for
// the partitions the function did not write, and commits with its claim,
// so the lease, the fencing and the commit are the same as for a Go task:
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

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/lambda"
	lambdatypes "github.com/aws/aws-sdk-go-v2/service/lambda/types"

	"github.com/batchwork/batchwork/shared/blob"
	"github.com/batchwork/batchwork/shared/control"
	"github.com/batchwork/batchwork/shared/domain"
	"github.com/batchwork/batchwork/shared/spec"
)

// LambdaInvoker invokes a Lambda function synchronously and returns its
// response payload and, when the function failed, Lambda's FunctionError
// ("Unhandled", "Handled"; the payload then describes the error).
type LambdaInvoker interface {
	Invoke(ctx context.Context, function string, payload []byte) (response []byte, functionError string, err error)
}

// SDKInvoker invokes functions with the AWS SDK.
type SDKInvoker struct{ Client *lambda.Client }

// NewLambdaInvoker returns an invoker on cfg.
func NewLambdaInvoker(cfg aws.Config) SDKInvoker {
	return SDKInvoker{Client: lambda.NewFromConfig(cfg)}
}

// Invoke implements LambdaInvoker.
func (s SDKInvoker) Invoke(ctx context.Context, function string, payload []byte) ([]byte, string, error) {
	out, err := s.Client.Invoke(ctx, &lambda.InvokeInput{
		FunctionName:   aws.String(function),
		InvocationType: lambdatypes.InvocationTypeRequestResponse,
		Payload:        payload,
	})
	if err != nil {
		return nil, "", err
	}
	return out.Payload, aws.ToString(out.FunctionError), nil
}

// LambdaEvent is what a lambda stage's function receives.
type LambdaEvent struct {
	Task LambdaTaskRef `json:"task"`
	// Params are the partition's parameters ({} when none).
	Params map[string]string `json:"params"`
	// Input is the task's split of an S3 input: the records that start in
	// the byte range [start, end) of the object (a record running through
	// start belongs to the previous split). Nil for other tasks.
	Input *LambdaInput `json:"input,omitempty"`
	// Shuffle is the task's shuffle partition: read every object, in
	// order; each holds key<TAB>value lines. Nil for other tasks. (A
	// shuffle read by a lambda stage keeps one object per partition, not
	// the indexed objects other reducers read slices of: shuffle.go.)
	Shuffle *LambdaShuffle `json:"shuffle,omitempty"`
	// Format is the input's record format: lines, jsonl or csv.
	Format string `json:"format"`
	// OutputPrefix is this attempt's own prefix, s3://bucket/jobs/...
	// /a<attempt>/; Outputs are the keys (in the same bucket) of its
	// output partitions, one per part: write part r, if at all, to
	// Outputs[r]. A stage with a shuffle has one part per downstream task,
	// and key<TAB>value line k belongs to part
	// FNV-1a-32(k) mod len(Outputs), as Emit does.
	OutputPrefix string   `json:"outputPrefix"`
	Outputs      []string `json:"outputs"`
	// Deadline is when the executor stops waiting for the response.
	Deadline string `json:"deadline"`
	// Resume and CheckpointOutputs are the task's checkpoints
	// (lambdackpt.go): where to resume, and where an invocation that
	// checkpoints writes its outputs.
	Resume            *LambdaResume `json:"resume,omitempty"`
	CheckpointOutputs []string      `json:"checkpointOutputs,omitempty"`
}

// LambdaTaskRef names the task and attempt.
type LambdaTaskRef struct {
	Job       string `json:"job"`
	Stage     string `json:"stage"`
	Partition int    `json:"partition"`
	Attempt   int    `json:"attempt"`
}

// LambdaInput is a split of one S3 object.
type LambdaInput struct {
	Bucket string `json:"bucket"`
	Key    string `json:"key"`
	Start  int64  `json:"start"`
	End    int64  `json:"end"`
	// ETag is the object's ETag when the stage was planned: a function
	// that reads with If-Match (quoted) never reads a changed object.
	ETag string `json:"etag,omitempty"`
	// VersionID, on a versioned bucket, is the object's version when the
	// stage was planned: a function that reads it (GetObject VersionId)
	// reads the planned bytes even after the key is overwritten.
	VersionID string `json:"versionId,omitempty"`
}

// LambdaShuffle lists the objects of a shuffle partition.
type LambdaShuffle struct {
	Bucket string   `json:"bucket"`
	Keys   []string `json:"keys"`
}

// LambdaResponse is what the function answers: the outputs it wrote, or
// an error, which fails the attempt (it is retried like any failure).
type LambdaResponse struct {
	Outputs []LambdaOutput `json:"outputs"`
	Error   string         `json:"error,omitempty"`
	// Permanent, with Error, says no retry can fix the error: the task
	// fails at once, without its remaining attempts (as a Go function's
	// batchwork.Permanent).
	Permanent bool `json:"permanent,omitempty"`
	// Rejects are the records the function rejected (lambdareject.go),
	// as a Go function's Task.Reject: committed with the attempt and
	// counted against the stage's maxBadRecords.
	Rejects []LambdaReject `json:"rejects,omitempty"`
	// Checkpoint asks the executor to save it and invoke the function
	// again from it (lambdackpt.go).
	Checkpoint *LambdaCheckpoint `json:"checkpoint,omitempty"`
}

// LambdaOutput is one output partition written.
type LambdaOutput struct {
	Part int    `json:"part"`
	Key  string `json:"key"`
}

const (
	// maxLambdaWait is Lambda's longest run (15 minutes) and a margin:
	// the executor waits no longer for a response.
	maxLambdaWait = 15*time.Minute + 30*time.Second
	// maxLambdaEvent is Lambda's limit on a synchronous request.
	maxLambdaEvent = 6 << 20
)

// errLambdaHost is a lambda stage's failure on a host without an invoker.
var errLambdaHost = errors.New("lambda stages need an executor that can invoke Lambda functions; this one has no Lambda client")

// lambdaFunc returns the Func that invokes claim c's function.
func (r *Runner) lambdaFunc(c control.Claim) (Func, error) {
	if r.Lambda == nil {
		return nil, errLambdaHost
	}
	st := c.Spec.Stages[c.Task.Ref.Stage]
	return func(ctx context.Context, t *Task) error {
		// Again while the function checkpoints (lambdackpt.go).
		for again := true; again; {
			var err error
			if again, err = r.invokeTask(ctx, c, st, t); err != nil {
				return fmt.Errorf("lambda %s: %w", st.Lambda, err)
			}
		}
		return nil
	}, nil
}

// invokeTask invokes the function once: true when it checkpointed and is
// to be invoked again.
func (r *Runner) invokeTask(ctx context.Context, c control.Claim, st spec.Stage, t *Task) (bool, error) {
	ev, err := r.lambdaEvent(ctx, c, st, t)
	if err != nil {
		return false, err
	}
	deadline := time.Now().Add(maxLambdaWait)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	ev.Deadline = deadline.UTC().Format(time.RFC3339)
	payload, err := json.Marshal(ev)
	if err != nil {
		return false, fmt.Errorf("event: %w", err)
	}
	if len(payload) > maxLambdaEvent {
		return false, fmt.Errorf("the event is %d bytes, over Lambda's %d-byte limit on a request (a shuffle read from too many upstream tasks?)",
			len(payload), maxLambdaEvent)
	}
	ictx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	start := time.Now()
	raw, fnErr, err := r.Lambda.Invoke(ictx, st.Lambda, payload)
	if err != nil {
		return false, fmt.Errorf("invoke: %w", err)
	}
	t.Log.Info("lambda invoked", "function", st.Lambda, "took_ms", time.Since(start).Milliseconds(), "function_error", fnErr)
	if fnErr != "" {
		return false, lambdaFunctionError(fnErr, raw) // errtext.go: out of memory or plain
	}
	var resp LambdaResponse
	if err := json.Unmarshal(raw, &resp); err != nil {
		return false, fmt.Errorf("response %s is not {\"outputs\": [{\"part\": 0, \"key\": \"...\"}]} or {\"error\": \"...\"}: %w", truncate(string(raw), 200), err)
	}
	if resp.Error != "" {
		msg := "function reported: " + truncate(resp.Error, 2000)
		if resp.Permanent {
			return false, &classedError{msg: msg, class: domain.ErrPermanent} // errtext.go
		}
		return false, errors.New(msg)
	}
	if err := lambdaRejects(t.Rejects, resp.Rejects); err != nil {
		return false, err
	}
	return r.lambdaOutcome(ctx, ev, t, &resp) // lambdackpt.go
}

// lambdaEvent describes task t's attempt to its function.
func (r *Runner) lambdaEvent(ctx context.Context, c control.Claim, st spec.Stage, t *Task) (*LambdaEvent, error) {
	ref := c.Task.Ref
	ev := &LambdaEvent{
		Task:   LambdaTaskRef{Job: ref.Job, Stage: st.Name, Partition: ref.Partition, Attempt: c.Task.Attempt},
		Params: t.Params,
		Format: cmp.Or(t.Format, "lines"),
		OutputPrefix: "s3://" + r.Blob.Bucket() + "/" +
			blob.AttemptPrefix(ref.Job, st.Name, ref.Partition, c.Task.Attempt),
	}
	if ev.Params == nil {
		ev.Params = map[string]string{}
	}
	for p := range t.Out.Parts() {
		ev.Outputs = append(ev.Outputs, blob.OutputKey(ref.Job, st.Name, ref.Partition, c.Task.Attempt, p))
	}
	lambdaCheckpointEvent(ev, t) // lambdackpt.go
	switch src, ok := c.Spec.ShuffleSource(ref.Stage); {
	case ok:
		keys, err := r.shuffleKeys(ctx, c.Spec, ref, src)
		if err != nil {
			return nil, fmt.Errorf("shuffle input: %w", err)
		}
		ev.Shuffle = &LambdaShuffle{Bucket: r.Blob.Bucket(), Keys: keys}
		if keys == nil {
			ev.Shuffle.Keys = []string{}
		}
	case c.Task.Input != nil:
		bucket, _, err := spec.ParseS3URI(st.Partitions.Input.Prefix)
		if err != nil {
			return nil, err
		}
		in := c.Task.Input
		ev.Input = &LambdaInput{Bucket: bucket, Key: in.Key, Start: in.Start, End: in.End, ETag: in.ETag, VersionID: in.Version}
	}
	return ev, nil
}

// checkLambdaOutputs holds a response's outputs to this attempt's own
// keys, and checks that they exist.
func (r *Runner) checkLambdaOutputs(ctx context.Context, ev *LambdaEvent, outs []LambdaOutput) error {
	seen := make(map[int]bool, len(outs))
	for i, o := range outs {
		field := fmt.Sprintf("response outputs[%d]", i)
		if o.Part < 0 || o.Part >= len(ev.Outputs) {
			return fmt.Errorf("%s: part %d is not one of this task's %d output partitions", field, o.Part, len(ev.Outputs))
		}
		if seen[o.Part] {
			return fmt.Errorf("%s: part %d is listed twice", field, o.Part)
		}
		seen[o.Part] = true
		key := strings.TrimPrefix(o.Key, "s3://"+r.Blob.Bucket()+"/")
		if key != ev.Outputs[o.Part] {
			// Fencing: a commit publishes only this attempt's own objects.
			return fmt.Errorf("%s: key %q is not this attempt's part %d; write it to %q (under %s)",
				field, truncate(o.Key, 300), o.Part, ev.Outputs[o.Part], ev.OutputPrefix)
		}
		rc, err := r.Blob.Open(ctx, r.Blob.Bucket(), key, 0)
		if err != nil {
			return fmt.Errorf("%s: part %d (%s) cannot be read: %w", field, o.Part, key, err)
		}
		rc.Close()
	}
	return nil
}

// functionErrorMessage is the message of a function error's payload
// ({"errorMessage": ..., "errorType": ...} in Lambda's runtimes).
func functionErrorMessage(raw []byte) string {
	var e struct {
		Message string `json:"errorMessage"`
		Type    string `json:"errorType"`
	}
	if json.Unmarshal(raw, &e) == nil && e.Message != "" {
		if e.Type != "" {
			return truncate(e.Type+": "+e.Message, 2000)
		}
		return truncate(e.Message, 2000)
	}
	return truncate(string(raw), 2000)
}
