package cli

import (
	"context"
	"fmt"
	"strings"

	"github.com/batchwork/batchwork/cmd/batchwork/termsafe"
)

// runCancelTask is `batchwork cancel ID --task STAGE/PARTITION`: one
// task's cancel (client.Client.CancelTask).
func runCancelTask(ctx context.Context, a *app, id string) int {
	c, err := a.client(ctx)
	if err != nil {
		return a.fail(err)
	}
	tc, err := c.CancelTask(ctx, id, a.o.task)
	if err != nil {
		return a.fail(err)
	}
	if a.json() {
		_ = writeJSON(a.env.Stdout, tc)
		return ExitOK
	}
	var then string
	switch {
	case tc.Tolerated:
		then = fmt.Sprintf("its stage tolerates the failure, and the job goes on without it (%s)", termsafe.Text(tc.JobState))
	case tc.JobState == "FAILED":
		then = "the job failed: " + termsafe.Text(tc.Error)
	default:
		then = "the job is " + termsafe.Text(tc.JobState)
	}
	fmt.Fprintf(a.env.Stdout, "Task %s of job %s is cancelled (%s); %s.\n", termsafe.Text(tc.Task), termsafe.Text(tc.JobID), termsafe.Text(strings.ToUpper(tc.State)), then)
	return ExitOK
}
