package cli

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/batchwork/batchwork/client"
	"github.com/batchwork/batchwork/cmd/batchwork/termsafe"
	"github.com/batchwork/batchwork/shared/spec"
)

func init() {
	commands = []*command{
		{name: "submit", args: "FILE", summary: "submit a job spec (JSON or YAML); --wait follows it to the end",
			help: `Submits the job spec in FILE ("-" reads stdin) and prints the job id. The
submission carries an Idempotency-Key (a fresh one per run unless given), and
is retried with the same key on network errors, so it never creates two jobs.
With --wait it then follows the job like 'watch' and exits like it.
With --at the job starts at that time (RFC 3339, or +DURATION from now, such
as +10m): until then it is WAITING, listed and cancellable, with no stage
started. At most 366 days ahead.`,
			examples: []string{
				"batchwork submit wordcount.yaml",
				"batchwork submit wordcount.yaml --wait",
				"batchwork submit job.json --idempotency-key nightly-2026-11-21 -o json",
				"batchwork submit daily.yaml --param date=2026-11-21",
				"cat job.yaml | batchwork submit -",
				"batchwork submit report.yaml --at 2026-12-01T06:00:00Z",
				"batchwork submit report.yaml --at +10m",
			},
			flags: func(fs *flag.FlagSet, o *opts) {
				fs.BoolVar(&o.wait, "wait", false, "follow the job until it ends; exit 6 if it fails, 7 if cancelled")
				fs.StringVar(&o.key, "idempotency-key", "", "key that makes the submission safe to repeat (default: a fresh one)")
				fs.DurationVar(&o.interval, "interval", time.Second, "how often --wait polls")
				fs.Var(&o.params, "param", "NAME=VALUE: a value for the spec's ${params.NAME} (repeatable)")
				fs.StringVar(&o.at, "at", "", "start the job at this time: RFC 3339, or +DURATION from now (+10m)")
			},
			minArgs: 1, maxArgs: 1, run: runSubmit},
		{name: "status", args: "ID", summary: "show a job's state, per-stage progress, records, ETA and error",
			help: `Shows a job: its state and times, tasks done of total per stage, attempts
and failures, records in and out, the smoothed rate and ETA of running stages,
and the error that ended a failed job.`,
			examples: []string{"batchwork status j19aa5e7c2a1f3b9d0e4c7", "batchwork status j19aa5e7c2a1f3b9d0e4c7 -o json | jq .progress"},
			minArgs:  1, maxArgs: 1, run: runStatus},
		{name: "watch", args: "ID", summary: "follow a job live until it ends; non-zero exit if it fails or is cancelled",
			help: `Follows a job until it ends. On a terminal it draws a progress bar per stage
with counts, rate and ETA; otherwise it prints a line whenever progress changes
(no colour, no bar); with -o json, one JSON status per change. Exits 0 if the
job succeeded, 6 if it failed, 7 if it was cancelled.`,
			examples: []string{"batchwork watch j19aa5e7c2a1f3b9d0e4c7", "batchwork watch j19aa5e7c2a1f3b9d0e4c7 --interval 5s > progress.log"},
			flags: func(fs *flag.FlagSet, o *opts) {
				fs.DurationVar(&o.interval, "interval", time.Second, "how often to poll")
			},
			minArgs: 1, maxArgs: 1, run: runWatch},
		{name: "list", args: "", summary: "list your jobs, newest first",
			help:     `Lists your jobs, newest first, a page at a time (--all for every page).`,
			examples: []string{"batchwork list", "batchwork list --status FAILED", "batchwork list --name wordcount --all -o json"},
			flags: func(fs *flag.FlagSet, o *opts) {
				fs.StringVar(&o.status, "status", "", "only jobs in this state: WAITING, RUNNING, PUBLISHING, SUCCEEDED, FAILED or CANCELLED")
				fs.StringVar(&o.name, "name", "", "only jobs with exactly this name")
				pageFlags(fs, o)
			},
			run: runList},
		{name: "tasks", args: "ID", summary: "list a job's tasks with their attempt history",
			help: `Lists a job's tasks, by stage and partition, with every attempt's outcome
(committed, retried, lease_expired, failed, cancelled, running; permanent,
timed_out and out_of_memory for attempts ended by those errors). A failed
task's state says what ended it: FAILED (permanent error), (retries
exhausted), (timed out), (out of memory), (lease expired) or (cancelled, by
'cancel --task'); a task an
out-of-memory retry moved to a larger executor shows its size (READY @4GiB).`,
			examples: []string{"batchwork tasks j19aa5e7c2a1f3b9d0e4c7 --state FAILED", "batchwork tasks j19aa5e7c2a1f3b9d0e4c7 --stage map --all -o json"},
			flags: func(fs *flag.FlagSet, o *opts) {
				fs.StringVar(&o.stage, "stage", "", "only tasks of this stage")
				fs.StringVar(&o.state, "state", "", "only tasks in this state: READY, CLAIMED, SUCCEEDED, FAILED or CANCELLED")
				pageFlags(fs, o)
			},
			minArgs: 1, maxArgs: 1, run: runTasks},
		{name: "history", args: "ID", summary: "show a job's timeline: stages started and ended, retries, expired leases, cancel",
			help:     `Shows the ordered timeline of a job's lifecycle events.`,
			examples: []string{"batchwork history j19aa5e7c2a1f3b9d0e4c7", "batchwork history j19aa5e7c2a1f3b9d0e4c7 --all -o json"},
			flags:    pageFlags,
			minArgs:  1, maxArgs: 1, run: runHistory},
		{name: "cancel", args: "ID", summary: "cancel a running job, or one task of it (--task); committed outputs are kept",
			help: `Cancels a running job: no new task of it starts, running tasks are stopped
at their next heartbeat, and outputs already committed are kept ('result').
Cancelling a cancelled job is fine; a job that already succeeded or failed
cannot be cancelled (exit 5), nor can one that is PUBLISHING its outputs to
its output folder: its work is done, and it ends by itself.

With --task STAGE/PARTITION only that task is cancelled: its running attempt
stops at its next heartbeat and cannot commit, or, waiting, it never starts.
The task fails as cancelled, without retry; the job goes on without it if
its stage's toleratedFailures allow, and fails naming it otherwise.
Cancelling it again is fine; a task that already committed cannot be
cancelled (exit 5), and an unknown one is exit 4.`,
			examples: []string{"batchwork cancel j19aa5e7c2a1f3b9d0e4c7", "batchwork cancel j19aa5e7c2a1f3b9d0e4c7 --task map/3"},
			flags: func(fs *flag.FlagSet, o *opts) {
				// An empty value is refused rather than read as no flag:
				// it would cancel the whole job.
				fs.Func("task", "cancel only this task, STAGE/PARTITION (e.g. map/3)", func(v string) error {
					if v == "" {
						return errors.New("must be STAGE/PARTITION (e.g. map/3)")
					}
					o.task = v
					return nil
				})
			},
			minArgs: 1, maxArgs: 1, run: runCancel},
		{name: "result", args: "ID", summary: "print or download a job's outputs",
			help: `Prints the contents of a job's outputs to stdout, or lists them (--list), or
downloads them into a directory (--download DIR, one file per output as
DIR/<stage>/p<partition>-part-<n>). For a job that succeeded these are its
manifest's outputs; for a running, failed or cancelled job (or with --stage)
the outputs committed so far. --bad-records lists instead the records its
tasks rejected (Task.Reject) in attempts that committed: stage, partition,
attempt, byte offset in the task's input (-1 if unknown), reason and record.`,
			examples: []string{
				"batchwork result j19aa5e7c2a1f3b9d0e4c7 | sort -t$'\\t' -k2 -nr | head",
				"batchwork result j19aa5e7c2a1f3b9d0e4c7 --bad-records",
				"batchwork result j19aa5e7c2a1f3b9d0e4c7 --list",
				"batchwork result j19aa5e7c2a1f3b9d0e4c7 --download ./out",
				"batchwork result j19aa5e7c2a1f3b9d0e4c7 --stage map --list -o json",
			},
			flags: func(fs *flag.FlagSet, o *opts) {
				fs.BoolVar(&o.list, "list", false, "list the outputs instead of printing them")
				fs.StringVar(&o.download, "download", "", "write the outputs into this directory")
				fs.StringVar(&o.stage, "stage", "", "the committed outputs of this stage")
				fs.BoolVar(&o.badRecords, "bad-records", false, "list the records the job's tasks rejected (with --stage: that stage's)")
			},
			minArgs: 1, maxArgs: 1, run: runResult},
		{name: "validate", args: "FILE", summary: "check a job spec offline; errors point at the line and field",
			help: `Checks a job spec ("-" reads stdin) without talking to any API, and prints
every problem as FILE:LINE: field: message. Exits 3 if the spec is invalid.`,
			examples: []string{"batchwork validate wordcount.yaml", "batchwork validate job.json -o json"},
			minArgs:  1, maxArgs: 1, run: runValidate},
		scheduleCommand, // schedule.go
		whoamiCommand,   // inputs.go
		uploadCommand,   // inputs.go
		// datadelete.go
		deleteDataCommand,
		deleteCommand,                               // jobdelete.go
		initCommand,                                 // scaffold.go
		devCommand,                                  // dev.go
		uiCommand,                                   // ui.go
		logsCommand,                                 // logs.go
		failedCommand, redriveCommand, rerunCommand, // failed.go
	}
}

func pageFlags(fs *flag.FlagSet, o *opts) {
	fs.IntVar(&o.limit, "limit", 0, "page size, 1 to 200 (default 50)")
	fs.StringVar(&o.cursor, "cursor", "", "continue after a previous page (its next cursor)")
	fs.BoolVar(&o.all, "all", false, "fetch every page")
}

func readSpec(env Env, file string) ([]byte, error) {
	if file == "-" {
		return io.ReadAll(io.LimitReader(env.Stdin, spec.MaxSpecBytes+1))
	}
	return os.ReadFile(file)
}

func runSubmit(ctx context.Context, a *app, args []string) int {
	body, err := readSpec(a.env, args[0])
	if err != nil {
		return a.fail(err)
	}
	key := a.o.key
	if key == "" {
		var b [12]byte
		_, _ = rand.Read(b[:])
		key = "cli-" + hex.EncodeToString(b[:])
	}
	at, err := parseAt(a.o.at, a.env.Now()) // startat.go
	if err != nil {
		fmt.Fprintf(a.env.Stderr, "batchwork submit: %v\n", err)
		return ExitUsage
	}
	c, err := a.client(ctx)
	if err != nil {
		return a.fail(err)
	}
	res, err := c.Submit(ctx, body, client.SubmitOptions{IdempotencyKey: key, Params: a.o.params.m, At: at})
	if err != nil {
		var ae *client.APIError
		if errors.As(err, &ae) && len(ae.Errors) > 0 {
			for _, fe := range ae.Errors {
				fmt.Fprintln(a.env.Stderr, specError(args[0], fe))
			}
			fmt.Fprintf(a.env.Stderr, "batchwork submit: %s is not a valid job spec\n", args[0])
			return ExitInvalid
		}
		return a.fail(err)
	}
	if a.json() && !a.o.wait {
		_ = writeJSON(a.env.Stdout, res)
		return ExitOK
	}
	out := a.env.Stdout
	if a.json() {
		out = a.env.Stderr // stdout carries the watch's JSON lines
	}
	if res.Created && res.StartAt != nil {
		fmt.Fprintf(out, "Submitted job %s, starting at %s\n", termsafe.Text(res.JobID), res.StartAt.In(a.env.Loc).Format(time.RFC3339))
	} else if res.Created {
		fmt.Fprintf(out, "Submitted job %s\n", termsafe.Text(res.JobID))
	} else {
		fmt.Fprintf(out, "Job %s was already submitted with this idempotency key\n", termsafe.Text(res.JobID))
	}
	if !a.o.wait {
		return ExitOK
	}
	return a.watch(ctx, res.JobID)
}

func (a *app) status(ctx context.Context, id string) (client.JobStatus, error) {
	c, err := a.client(ctx)
	if err != nil {
		return client.JobStatus{}, err
	}
	return c.Status(ctx, id)
}

func runStatus(ctx context.Context, a *app, args []string) int {
	st, err := a.status(ctx, args[0])
	if err != nil {
		return a.fail(err)
	}
	if a.json() {
		_ = writeJSON(a.env.Stdout, st)
		return ExitOK
	}
	a.printStatus(a.env.Stdout, st)
	return ExitOK
}

func runWatch(ctx context.Context, a *app, args []string) int { return a.watch(ctx, args[0]) }

// exitForJob is the exit code of a job that ended in state.
func exitForJob(state string) int {
	switch state {
	case "FAILED":
		return ExitFailed
	case "CANCELLED":
		return ExitCancelled
	}
	return ExitOK
}

// pages fetches one page, or every page with --all, calling each for each.
func (a *app) pages(fetch func(cursor string) (string, error)) error {
	cursor := a.o.cursor
	for {
		next, err := fetch(cursor)
		if err != nil {
			return err
		}
		if next == "" {
			return nil
		}
		if !a.o.all {
			if !a.json() {
				fmt.Fprintf(a.env.Stderr, "(more: add --all, or --cursor %s)\n", next)
			}
			return nil
		}
		cursor = next
	}
}

// listPages fetches a list into *list: one page, or every page with
// --all, of --limit items. add appends a page to the list (items and next
// cursor) and returns the page's next cursor.
func listPages[L any](ctx context.Context, a *app, list *L, fetch func(c *client.Client, p client.Page) (L, error), add func(list, page *L) string) error {
	c, err := a.client(ctx)
	if err != nil {
		return err
	}
	return a.pages(func(cursor string) (string, error) {
		page, err := fetch(c, client.Page{Limit: a.o.limit, Cursor: cursor})
		if err != nil {
			return "", err
		}
		return add(list, &page), nil
	})
}

func runList(ctx context.Context, a *app, _ []string) int {
	all := client.JobList{Jobs: []client.JobSummary{}}
	fetch := func(c *client.Client, p client.Page) (client.JobList, error) {
		return c.ListJobs(ctx, client.JobsOptions{State: a.o.status, Name: a.o.name, Page: p})
	}
	err := listPages(ctx, a, &all, fetch, func(all, p *client.JobList) string {
		all.Jobs, all.NextCursor = append(all.Jobs, p.Jobs...), p.NextCursor
		return p.NextCursor
	})
	if err != nil {
		return a.fail(err)
	}
	if a.json() {
		_ = writeJSON(a.env.Stdout, all)
		return ExitOK
	}
	if len(all.Jobs) == 0 {
		// Named, because listing as another owner than meant (another
		// profile or role) looks just like having no jobs.
		if id, err := a.whoami(ctx); err == nil && id.Owner != "" {
			fmt.Fprintf(a.env.Stdout, "No jobs for owner %s.\n", termsafe.Text(id.Owner))
		} else {
			fmt.Fprintln(a.env.Stdout, "No jobs.")
		}
		return ExitOK
	}
	tw := table(a.env.Stdout)
	fmt.Fprintln(tw, "ID\tNAME\tSTATE\tCREATED\tTOOK")
	for _, j := range all.Jobs {
		took := "-"
		if j.Ended != nil {
			took = elapsed(j.Created, j.Ended)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", termsafe.Text(j.ID), termsafe.Text(j.Name), a.paint(j.State, termsafe.Text(j.State)), a.clock(&j.Created), took)
	}
	tw.Flush()
	return ExitOK
}

// listTasks reads a job's tasks, of one state when state is set, page by
// page (as far as a.o allows), filtered by a.o.stage.
func listTasks(ctx context.Context, a *app, job, state string) (client.TaskList, error) {
	all := client.TaskList{Tasks: []client.Task{}}
	fetch := func(c *client.Client, p client.Page) (client.TaskList, error) {
		return c.ListTasks(ctx, job, client.TasksOptions{Stage: a.o.stage, State: state, Page: p})
	}
	err := listPages(ctx, a, &all, fetch, func(all, p *client.TaskList) string {
		all.Tasks, all.NextCursor = append(all.Tasks, p.Tasks...), p.NextCursor
		return p.NextCursor
	})
	return all, err
}

func runTasks(ctx context.Context, a *app, args []string) int {
	all, err := listTasks(ctx, a, args[0], a.o.state)
	if err != nil {
		return a.fail(err)
	}
	if a.json() {
		_ = writeJSON(a.env.Stdout, all)
		return ExitOK
	}
	if len(all.Tasks) == 0 {
		fmt.Fprintln(a.env.Stdout, "No tasks.")
		return ExitOK
	}
	tw := table(a.env.Stdout)
	fmt.Fprintln(tw, "STAGE\tPART\tSTATE\tATTEMPT\tATTEMPTS\tEXECUTOR\tRECORDS IN/OUT\tLAST ERROR")
	for _, t := range all.Tasks {
		outcomes := make([]string, len(t.Attempts))
		for i, at := range t.Attempts {
			outcomes[i] = at.Outcome
		}
		io := "-"
		if t.State == "SUCCEEDED" {
			io = count(t.RecordsIn) + "/" + count(t.RecordsOut)
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\t%d/%d\t%s\t%s\t%s\t%s\n", termsafe.Text(t.Stage), t.Partition, a.paint(t.State, termsafe.Text(withCopy(t, withCheckpoint(t, taskState(t))))), t.Attempt, t.MaxAttempts, // errorclass.go, checkpoint.go, speculation.go
			termsafe.Text(orDash(strings.Join(outcomes, ", "))), termsafe.Text(attemptExecutors(t.Attempts)), io, orDash(oneLine(t.LastError, 60)))
	}
	tw.Flush()
	return ExitOK
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// oneLine is s on one line of a table: runs of white space as one space,
// what a terminal would act on escaped (termText), cut after n bytes on a
// rune boundary.
func oneLine(s string, n int) string {
	s = termsafe.Text(strings.Join(strings.Fields(s), " "))
	if len(s) <= n {
		return s
	}
	cut := n
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}

func runHistory(ctx context.Context, a *app, args []string) int {
	all := client.History{Events: []client.Event{}}
	fetch := func(c *client.Client, p client.Page) (client.History, error) { return c.ListHistory(ctx, args[0], p) }
	err := listPages(ctx, a, &all, fetch, func(all, p *client.History) string {
		all.Events, all.NextCursor = append(all.Events, p.Events...), p.NextCursor
		return p.NextCursor
	})
	if err != nil {
		return a.fail(err)
	}
	if a.json() {
		_ = writeJSON(a.env.Stdout, all)
		return ExitOK
	}
	tw := table(a.env.Stdout)
	for _, ev := range all.Events {
		subject := ev.Stage
		if ev.Partition != nil {
			subject = fmt.Sprintf("%s/%d attempt %d", ev.Stage, *ev.Partition, ev.Attempt)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", ev.At.In(a.env.Loc).Format("2006-01-02 15:04:05.000"), termsafe.Text(ev.Type), termsafe.Text(orDash(subject)), oneLine(ev.Message, 100))
	}
	tw.Flush()
	return ExitOK
}

func runCancel(ctx context.Context, a *app, args []string) int {
	if a.o.task != "" {
		return runCancelTask(ctx, a, args[0]) // taskcancel.go
	}
	c, err := a.client(ctx)
	if err != nil {
		return a.fail(err)
	}
	st, err := c.Cancel(ctx, args[0])
	if err != nil {
		return a.fail(err)
	}
	if a.json() {
		_ = writeJSON(a.env.Stdout, st)
		return ExitOK
	}
	fmt.Fprintf(a.env.Stdout, "Job %s (%s) is %s: %d of %d tasks had committed; their outputs are kept ('batchwork result %s').\n",
		termsafe.Text(st.ID), termsafe.Text(st.Name), termsafe.Text(st.State), st.Progress.TasksDone, st.Progress.TasksTotal, termsafe.Text(st.ID))
	return ExitOK
}

func runResult(ctx context.Context, a *app, args []string) int {
	if a.o.badRecords {
		return runBadRecords(ctx, a, args) // badrecords.go
	}
	c, err := a.client(ctx)
	if err != nil {
		return a.fail(err)
	}
	all, err := c.Result(ctx, args[0], client.OutputsOptions{Stage: a.o.stage, Presign: !a.o.list || a.o.download != ""})
	if err != nil {
		return a.fail(err)
	}
	if !all.Complete {
		fmt.Fprintf(a.env.Stderr, "note: job %s is %s; these are the %d outputs committed so far\n", termsafe.Text(all.Job), termsafe.Text(all.State), len(all.Outputs))
	}
	switch {
	case a.o.download != "":
		dsts, err := downloadPaths(a.o.download, all.Outputs)
		if err != nil {
			return a.fail(err)
		}
		for i, o := range all.Outputs {
			if err := a.download(ctx, o.URL, dsts[i], nil); err != nil {
				return a.fail(err)
			}
		}
		if a.json() {
			_ = writeJSON(a.env.Stdout, all)
		} else {
			fmt.Fprintf(a.env.Stdout, "Downloaded %d outputs into %s\n", len(all.Outputs), a.o.download)
		}
	case a.json():
		_ = writeJSON(a.env.Stdout, all)
	case a.o.list:
		tw := table(a.env.Stdout)
		fmt.Fprintln(tw, "STAGE\tPARTITION\tPART\tKEY")
		for _, o := range all.Outputs {
			fmt.Fprintf(tw, "%s\t%d\t%d\ts3://%s/%s\n", termsafe.Text(o.Stage), o.Partition, o.Part, termsafe.Text(all.Bucket), termsafe.Text(o.Key))
		}
		tw.Flush()
	default:
		for _, o := range all.Outputs {
			if err := a.download(ctx, o.URL, "", a.env.Stdout); err != nil {
				return a.fail(err)
			}
		}
	}
	return ExitOK
}

// downloadPaths are the files the outputs are written to under dir. The
// stage names come from the server, so a malicious or compromised endpoint
// could name "../x" or an absolute path: every name must be a stage name
// (spec.ValidName, which admits no separator, "." or ".."), checked for all
// outputs before any file is written. A Parquet stage's files end in
// .parquet, as their published names do, so tools open them as such.
func downloadPaths(dir string, outs []client.Output) ([]string, error) {
	dsts := make([]string, len(outs))
	for i, o := range outs {
		name := fmt.Sprintf("p%06d-part-%05d", o.Partition, o.Part)
		if o.Format == spec.OutputParquet {
			name += ".parquet"
		}
		rel := filepath.Join(o.Stage, name)
		if !spec.ValidName(o.Stage) || !filepath.IsLocal(rel) {
			return nil, fmt.Errorf("the server named an output's stage %q, which is not a stage name: refusing to write it under %s", o.Stage, dir)
		}
		dsts[i] = filepath.Join(dir, rel)
	}
	return dsts, nil
}

// download fetches a presigned URL into a file or a writer. Presigned URLs
// carry their own authorization, so the request is not signed again.
func (a *app) download(ctx context.Context, u, dst string, w io.Writer) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return err
	}
	resp, err := a.env.HTTP.Do(req)
	if err != nil {
		return fmt.Errorf("download an output: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("download an output: %s", resp.Status)
	}
	if w == nil {
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			return err
		}
		f, err := os.Create(dst)
		if err != nil {
			return err
		}
		defer f.Close()
		w = f
	}
	_, err = io.Copy(w, resp.Body)
	return err
}

// specError renders a spec problem as compilers do: FILE:LINE: field: msg.
func specError(file string, fe spec.FieldError) string {
	fe.Field, fe.Message = termsafe.Text(fe.Field), termsafe.Text(fe.Message)
	loc := termsafe.Text(file)
	if fe.Line > 0 {
		loc += ":" + strconv.Itoa(fe.Line)
	}
	if fe.Field != "" {
		return loc + ": " + fe.Field + ": " + fe.Message
	}
	return loc + ": " + fe.Message
}

// ValidateResult is validate's JSON output.
type ValidateResult struct {
	File   string            `json:"file"`
	Valid  bool              `json:"valid"`
	Name   string            `json:"name,omitempty"`
	Stages []string          `json:"stages,omitempty"`
	Errors []spec.FieldError `json:"errors,omitempty"`
}

func runValidate(_ context.Context, a *app, args []string) int {
	body, err := readSpec(a.env, args[0])
	if err != nil {
		return a.fail(err)
	}
	res := ValidateResult{File: args[0]}
	sp, err := spec.Parse(body)
	var ve *spec.ValidationError
	switch {
	case errors.As(err, &ve):
		res.Errors = ve.Errors
	case err != nil:
		return a.fail(err)
	default:
		res.Valid, res.Name = true, sp.Name
		for _, i := range sp.TopoOrder() {
			res.Stages = append(res.Stages, sp.Stages[i].Name)
		}
	}
	if a.json() {
		_ = writeJSON(a.env.Stdout, res)
	} else if res.Valid {
		fmt.Fprintf(a.env.Stdout, "%s: valid job %q with %d stage(s), in order: %s\n", res.File, res.Name, len(res.Stages), strings.Join(res.Stages, ", "))
	} else {
		for _, fe := range res.Errors {
			fmt.Fprintln(a.env.Stdout, specError(args[0], fe))
		}
		fmt.Fprintf(a.env.Stdout, "%s: %d problem(s)\n", res.File, len(res.Errors))
	}
	if !res.Valid {
		return ExitInvalid
	}
	return ExitOK
}
