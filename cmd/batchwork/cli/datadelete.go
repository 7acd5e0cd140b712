package cli

import (
	"context"
	"fmt"

	"github.com/batchwork/batchwork/cmd/batchwork/termsafe"
)

// deleteDataCommand is `batchwork delete-data ID`.
var deleteDataCommand = &command{
	name: "delete-data", args: "ID", summary: "delete an ended job's data (its outputs, plans and manifests) for good",
	help: `Deletes every object of a job that ended (SUCCEEDED, FAILED or CANCELLED):
its outputs, plans and manifests in the data bucket. Its status, tasks and
history stay, and say when its data was deleted; 'result' answers that the
outputs are gone. A running job cannot be deleted (exit 5): cancel it first.
The API deletes up to 10,000 objects a call; this command calls until nothing
is left. Running it again is safe. Inputs are never deleted, and neither is
the folder the job published its outputs to (its "output"): that folder is
yours, in your outputs area or an output bucket, and stays whole; delete it
there when you no longer want it.`,
	examples: []string{"batchwork delete-data j19aa5e7c2a1f3b9d0e4c7", "batchwork delete-data j19aa5e7c2a1f3b9d0e4c7 -o json"},
	minArgs:  1, maxArgs: 1, run: runDeleteData,
}

func runDeleteData(ctx context.Context, a *app, args []string) int {
	c, err := a.client(ctx)
	if err != nil {
		return a.fail(err)
	}
	total, err := c.DeleteData(ctx, args[0])
	if err != nil {
		return a.fail(err)
	}
	if a.json() {
		_ = writeJSON(a.env.Stdout, total)
		return ExitOK
	}
	fmt.Fprintf(a.env.Stdout, "Deleted the data of job %s (%s): %s objects; its outputs are gone.\n", termsafe.Text(total.Job), termsafe.Text(total.State), count(int64(total.Deleted)))
	return ExitOK
}
