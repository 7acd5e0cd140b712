package cli

import (
	"context"
	"fmt"

	"github.com/batchwork/batchwork/cmd/batchwork/termsafe"
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
	total, err := c.DeleteJob(ctx, args[0])
	if err != nil {
		return a.fail(err)
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
		termsafe.Text(args[0]), termsafe.Text(total.State), count(int64(total.Records)), count(int64(total.Objects)))
	return ExitOK
}
