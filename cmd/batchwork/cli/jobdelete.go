package cli

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/batchwork/batchwork/client"
	"github.com/batchwork/batchwork/shared/control"
)

// deleteCommand is `batchwork delete ID`.
var deleteCommand = &command{
	name: "delete", args: "ID", summary: "delete an ended job: its records and its data, for good",
	help: `Deletes a job that ended (SUCCEEDED, FAILED or CANCELLED): its status,
stages, tasks, attempts and history, its entry in 'list', and every object
under its area of the data bucket (outputs, plans, manifests). Afterwards
every command answers that there is no such job (exit 4), and a submit with
its Idempotency-Key creates a new job. A running or publishing job cannot be
deleted (exit 5): cancel it first, or wait for it to end.

The job disappears from 'list' and 'status' as soon as the deletion starts.
The API deletes up to 10,000 objects and 5,000 records a call; this command
calls until nothing is left. If it is interrupted, run it again: it finishes
the deletion. Inputs are never deleted, and neither is the folder the job
published its outputs to (its "output"): that folder is yours, in your
outputs area or an output bucket; delete it there when you no longer want
it. To delete only the data and keep the job's history, use 'delete-data'.`,
	examples: []string{"batchwork delete j19aa5e7c2a1f3b9d0e4c7", "batchwork delete j19aa5e7c2a1f3b9d0e4c7 -o json"},
	minArgs:  1, maxArgs: 1, run: runDelete,
}

func runDelete(ctx context.Context, a *app, args []string) int {
	c, err := a.client(ctx)
	if err != nil {
		return a.fail(err)
	}
	var total control.JobDeletion
	for call := 0; ; call++ {
		d, lost, err := deleteCall(ctx, c, args[0])
		var ae *client.APIError
		if (call > 0 || lost) && errors.As(err, &ae) && ae.Status == http.StatusNotFound {
			// Gone: another caller, or a try of this command whose answer
			// was lost, finished the deletion.
			total.Job, total.Complete = args[0], true
			break
		}
		if err != nil {
			return a.fail(err)
		}
		objects, records := total.Objects+d.Objects, total.Records+d.Records
		total, total.Objects, total.Records = d, objects, records
		if d.Complete {
			break
		}
		if d.Objects == 0 && d.Records == 0 {
			return a.fail(fmt.Errorf("job %s: %w", args[0], errNoProgress))
		}
	}
	if a.json() {
		_ = writeJSON(a.env.Stdout, total)
		return ExitOK
	}
	if total.State == "" { // the only answer was lost
		fmt.Fprintf(a.env.Stdout, "Deleted job %s.\n", args[0])
		return ExitOK
	}
	fmt.Fprintf(a.env.Stdout, "Deleted job %s (%s): %s records and %s objects.\n",
		termText(args[0]), termText(total.State), count(int64(total.Records)), count(int64(total.Objects)))
	return ExitOK
}

// deleteCall sends one DELETE of job id, retrying what the client retries
// (network errors, throttling, gateway errors), and says whether a try's
// answer may have been lost after the API acted on it (a network error, a
// gateway's 502 or 504): that try may have finished the deletion, so a
// later 404 means the job is gone, not that there was none. The client
// cannot tell, so this call does its own retries.
func deleteCall(ctx context.Context, c *client.Client, id string) (d control.JobDeletion, lost bool, err error) {
	once := *c
	once.Retries = 0
	for try := 0; ; try++ {
		if try > 0 {
			if err := c.Sleep(ctx, client.Backoff(try)); err != nil {
				return d, lost, err
			}
		}
		err = once.Call(ctx, http.MethodDelete, jobPath(id), nil, nil, nil, &d)
		var ae *client.APIError
		var ne *client.NetError
		switch {
		case err == nil:
			return d, lost, nil
		case errors.As(err, &ne), errors.As(err, &ae) && (ae.Status == http.StatusBadGateway || ae.Status == http.StatusGatewayTimeout):
			lost = true
		case errors.As(err, &ae) && (ae.Status == http.StatusTooManyRequests || ae.Status == http.StatusServiceUnavailable):
		default:
			return d, lost, err
		}
		if try >= c.Retries {
			return d, lost, err
		}
	}
}
