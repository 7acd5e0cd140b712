package executor

// Lambda stages: a stage's `lambda: <function name or ARN>` invokes an
// existing Lambda function through the contract of shared/lambdatask (its
// package doc says what the function is told, may answer and may write).
// This side keeps that contract's fencing: a response may name only this
// attempt's own output keys, each must exist before the commit, and the
// commit goes with the attempt's claim as for a Go task.

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/batchwork/batchwork/internal/executor/tagged"
	"github.com/batchwork/batchwork/shared/blob"
	"github.com/batchwork/batchwork/shared/control"
	"github.com/batchwork/batchwork/shared/domain"
	"github.com/batchwork/batchwork/shared/lambdatask"
	"github.com/batchwork/batchwork/shared/spec"
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
	deadline := time.Now().Add(lambdatask.MaxWait)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	ev.Deadline = deadline.UTC().Format(time.RFC3339)
	payload, err := json.Marshal(ev)
	if err != nil {
		return false, fmt.Errorf("event: %w", err)
	}
	if len(payload) > lambdatask.MaxEvent {
		return false, fmt.Errorf("the event is %d bytes, over Lambda's %d-byte limit on a request (a shuffle read from too many upstream tasks?)",
			len(payload), lambdatask.MaxEvent)
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
	var resp lambdatask.Response
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
func (r *Runner) lambdaEvent(ctx context.Context, c control.Claim, st spec.Stage, t *Task) (*lambdatask.Event, error) {
	ref := c.Task.Ref
	ev := &lambdatask.Event{
		Task:      lambdatask.TaskRef{Job: ref.Job, Stage: st.Name, Partition: ref.Partition, Attempt: c.Task.Attempt},
		Params:    t.Params,
		RunParams: t.RunParams,
		Format:    cmp.Or(t.Format, "lines"),
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
	switch srcs := c.Spec.ShuffleSources(ref.Stage); {
	case len(srcs) > 0:
		sh, err := tagged.LambdaShuffle(c.Spec, r.Blob.Bucket(), srcs, func(src int) ([]string, error) { return r.shuffleKeys(ctx, c.Spec, ref, src) })
		if err != nil {
			return nil, fmt.Errorf("shuffle input: %w", err)
		}
		ev.Shuffle = sh
	case c.Task.Input != nil:
		in := st.Partitions.InputAt(c.Task.Input.Source)
		if in == nil {
			return nil, fmt.Errorf("the task's split is of input %d, which stage %s does not have", c.Task.Input.Source, st.Name)
		}
		bucket, _, err := spec.ParseS3URI(in.Prefix)
		if err != nil {
			return nil, err
		}
		s := c.Task.Input
		ev.Input = &lambdatask.Input{Bucket: bucket, Key: s.Key, Start: s.Start, End: s.End, ETag: s.ETag, VersionID: s.Version}
		ev.Source = t.Source
	}
	return ev, nil
}

// checkLambdaOutputs holds a response's outputs to this attempt's own
// keys, and checks that they exist.
func (r *Runner) checkLambdaOutputs(ctx context.Context, ev *lambdatask.Event, outs []lambdatask.Output) error {
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
