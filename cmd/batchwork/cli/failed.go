package cli

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"flag"
	"fmt"
	"time"

	"github.com/batchwork/batchwork/client"
	"github.com/batchwork/batchwork/cmd/batchwork/termsafe"
	"github.com/batchwork/batchwork/shared/domain"

	sm "github.com/batchwork/batchwork/statemachine"
)

// Commands of issue 13: the failed tasks of a job, redrive and rerun.

var failedCommand = &command{
	name: "failed", args: "ID", summary: "list a job's failed tasks with their errors",
	help: `Lists the tasks of job ID that failed for good, by stage and partition: how
many attempts each had, what ended it (retries exhausted, a permanent error,
timed out, out of memory, lease expired), whether its stage tolerated the
failure (toleratedFailures: the job went on without the partition) and its
error. 'batchwork redrive ID' retries the ones not tolerated.`,
	examples: []string{"batchwork failed j19aa5e7c2a1f3b9d0e4c7", "batchwork failed j19aa5e7c2a1f3b9d0e4c7 --stage map -o json"},
	flags: func(fs *flag.FlagSet, o *opts) {
		fs.StringVar(&o.stage, "stage", "", "only failed tasks of this stage")
	},
	minArgs: 1, maxArgs: 1, run: runFailed,
}

var redriveCommand = &command{
	name: "redrive", args: "ID", summary: "retry a failed job's unfinished tasks in place, after a fix",
	help: `Redrives a FAILED job: the job, its failed stage and the stages its end
cancelled run again, and only the tasks that did not finish (failed, cancelled
or never run) are retried, each with a fresh budget of its stage's attempts.
Committed tasks never run again and completed stages stay completed. The job
keeps its id; its history shows the redrive. A cancelled job is not redriven
(rerun it); nor is a running or succeeded one (exit 5). With --wait it then
follows the job like 'watch' and exits like it.`,
	examples: []string{"batchwork redrive j19aa5e7c2a1f3b9d0e4c7", "batchwork redrive j19aa5e7c2a1f3b9d0e4c7 --wait"},
	flags: func(fs *flag.FlagSet, o *opts) {
		fs.BoolVar(&o.wait, "wait", false, "follow the job until it ends; exit 6 if it fails, 7 if cancelled")
		fs.DurationVar(&o.interval, "interval", time.Second, "how often --wait polls")
	},
	minArgs: 1, maxArgs: 1, run: runRedrive,
}

var rerunCommand = &command{
	name: "rerun", args: "ID", summary: "run an ended job again as a new job, reusing its committed outputs",
	help: `Submits a new job with the spec of ended job ID. The stages it does not run
reuse the original's committed outputs: with --from STAGE, every stage but
STAGE and the stages after it (which all must have completed); without, the
stages that completed. Prints the new job's id; with --wait follows it like
'watch'. The submission carries an Idempotency-Key (fresh per run unless
given), so a retried request never makes two jobs.`,
	examples: []string{
		"batchwork rerun j19aa5e7c2a1f3b9d0e4c7",
		"batchwork rerun j19aa5e7c2a1f3b9d0e4c7 --from reduce --wait",
	},
	flags: func(fs *flag.FlagSet, o *opts) {
		fs.StringVar(&o.stage, "from", "", "run this stage and the stages after it; reuse the others")
		fs.StringVar(&o.key, "idempotency-key", "", "key that makes the rerun safe to repeat (default: a fresh one)")
		fs.BoolVar(&o.wait, "wait", false, "follow the new job until it ends; exit 6 if it fails, 7 if cancelled")
		fs.DurationVar(&o.interval, "interval", time.Second, "how often --wait polls")
	},
	minArgs: 1, maxArgs: 1, run: runRerun,
}

func runFailed(ctx context.Context, a *app, args []string) int {
	a.o.all = true
	all, err := listTasks(ctx, a, args[0], string(sm.TaskFailed))
	if err != nil {
		return a.fail(err)
	}
	if a.json() {
		_ = writeJSON(a.env.Stdout, all)
		return ExitOK
	}
	if len(all.Tasks) == 0 {
		fmt.Fprintln(a.env.Stdout, "No failed tasks.")
		return ExitOK
	}
	tw := table(a.env.Stdout)
	fmt.Fprintln(tw, "STAGE\tPART\tATTEMPTS\tENDED BY\tTOLERATED\tERROR")
	tolerated := 0
	for _, t := range all.Tasks {
		tol := "no"
		if t.Tolerated {
			tol = "yes"
			tolerated++
		}
		fmt.Fprintf(tw, "%s\t%d\t%d/%d\t%s\t%s\t%s\n", termsafe.Text(t.Stage), t.Partition, t.Attempt, t.MaxAttempts, endedBy(t.ErrorClass), tol, orDash(oneLine(t.LastError, 100)))
	}
	tw.Flush()
	fmt.Fprintf(a.env.Stdout, "\n%d failed tasks, %d of them tolerated by their stage.\n", len(all.Tasks), tolerated)
	return ExitOK
}

// endedBy words a failed task's error class as the status does.
func endedBy(class string) string { return domain.ErrorClass(class).Ended() }

func runRedrive(ctx context.Context, a *app, args []string) int {
	// The redrive count the status shows is the request's token: the
	// client retries the POST on network errors, and a retry whose first
	// try went through is recognised and does not redrive twice.
	st, err := a.status(ctx, args[0])
	if err != nil {
		return a.fail(err)
	}
	c, err := a.client(ctx)
	if err != nil {
		return a.fail(err)
	}
	if st, err = c.Redrive(ctx, args[0], st.Redrives); err != nil {
		return a.fail(err)
	}
	if a.json() && !a.o.wait {
		_ = writeJSON(a.env.Stdout, st)
		return ExitOK
	}
	out := a.env.Stdout
	if a.json() {
		out = a.env.Stderr
	}
	fmt.Fprintf(out, "Job %s (%s) redriven (redrive %d): it is %s; %d of %d tasks had committed and are kept.\n",
		termsafe.Text(st.ID), termsafe.Text(st.Name), st.Redrives, termsafe.Text(st.State), st.Progress.TasksDone, st.Progress.TasksTotal)
	if !a.o.wait {
		return ExitOK
	}
	return a.watch(ctx, st.ID)
}

func runRerun(ctx context.Context, a *app, args []string) int {
	key := a.o.key
	if key == "" {
		var b [12]byte
		_, _ = rand.Read(b[:])
		key = "cli-rerun-" + hex.EncodeToString(b[:])
	}
	c, err := a.client(ctx)
	if err != nil {
		return a.fail(err)
	}
	res, err := c.Rerun(ctx, args[0], client.RerunOptions{From: a.o.stage, IdempotencyKey: key})
	if err != nil {
		return a.fail(err)
	}
	if a.json() && !a.o.wait {
		_ = writeJSON(a.env.Stdout, res)
		return ExitOK
	}
	out := a.env.Stdout
	if a.json() {
		out = a.env.Stderr
	}
	from := "the stages that did not complete"
	if a.o.stage != "" {
		from = "stage " + a.o.stage + " and the stages after it"
	}
	fmt.Fprintf(out, "Submitted job %s, a rerun of %s: it runs %s and reuses the other stages' committed outputs\n", termsafe.Text(res.JobID), termsafe.Text(args[0]), termsafe.Text(from))
	if !a.o.wait {
		return ExitOK
	}
	return a.watch(ctx, res.JobID)
}

// failedNote is what the status's State line adds for a job with failed
// partitions its stages tolerated: "succeeded with 2 failed partitions".
func failedNote(st client.JobStatus) string {
	var note string
	if n := st.FailedPartitions; n > 0 {
		noun := "partitions"
		if n == 1 {
			noun = "partition"
		}
		if st.State == string(sm.JobSucceeded) {
			note = fmt.Sprintf(" (succeeded with %d failed %s)", n, noun)
		} else {
			note = fmt.Sprintf(" (%d failed %s tolerated)", n, noun)
		}
	}
	if st.Redrives > 0 {
		note += fmt.Sprintf(" (redriven %d times)", st.Redrives)
	}
	if st.RerunOf != "" {
		note += " (rerun of " + st.RerunOf + ")"
	}
	return note
}
