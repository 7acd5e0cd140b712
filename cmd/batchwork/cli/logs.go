package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/batchwork/batchwork/client"
	"github.com/batchwork/batchwork/cmd/batchwork/termsafe"
)

// logsCommand is `batchwork logs ID`.
var logsCommand = &command{
	name: "logs", args: "ID", summary: "print a job's log lines: its tasks', its executors' and the control plane's",
	help: `Prints the log lines every Batchwork process wrote about job ID, oldest first:
the executors' (each with its task, attempt and executor id), your task
functions' own (Task.Log) and the control plane's. With --task, only one
task's lines (STAGE/PARTITION: a stage name or index and a partition). With
--follow, keeps printing new lines until the job has ended.

The API reads the lines on your behalf, for your own jobs only: from
CloudWatch Logs on a deployed stack (by the job's id), from the log file of
the local runner. You need no access to the log groups. CloudWatch Logs
takes a few seconds to make a line readable, so --follow lags by that much.
-o json prints each line as its process logged it, one JSON object a line.`,
	examples: []string{
		"batchwork logs j19aa5e7c2a1f3b9d0e4c7",
		"batchwork logs j19aa5e7c2a1f3b9d0e4c7 --task count/3",
		"batchwork logs j19aa5e7c2a1f3b9d0e4c7 --follow",
		"batchwork logs j19aa5e7c2a1f3b9d0e4c7 --since 10m -o json | jq -r .msg",
	},
	flags: func(fs *flag.FlagSet, o *opts) {
		fs.StringVar(&o.task, "task", "", "only this task's lines: STAGE/PARTITION, e.g. count/3")
		fs.BoolVar(&o.follow, "follow", false, "keep printing new lines until the job has ended")
		fs.StringVar(&o.since, "since", "", "only lines since this long ago (10m) or this time (RFC 3339)")
		fs.DurationVar(&o.interval, "interval", 2*time.Second, "how often --follow polls")
	},
	minArgs: 1, maxArgs: 1, run: runLogs,
}

// logsPage is how many lines a request asks for.
const logsPage = 1000

// followDrain is how many polls --follow makes after it saw the job end:
// lines logged at its end may be readable a little later (CloudWatch
// Logs' ingestion).
const followDrain = 2

func runLogs(ctx context.Context, a *app, args []string) int {
	id := args[0]
	if a.o.task != "" {
		if st, p, ok := strings.Cut(a.o.task, "/"); !ok || st == "" || !isPartition(p) {
			return a.fail(&usageError{fmt.Sprintf("--task %q: want STAGE/PARTITION, e.g. count/3", a.o.task)})
		}
	}
	var since time.Time
	if a.o.since != "" {
		var err error
		if since, err = parseSince(a.o.since, a.env.Now()); err != nil {
			return a.fail(&usageError{fmt.Sprintf("--since %q: %v", a.o.since, err)})
		}
	}
	// The job first: it is the caller's (the API answers 404 for anyone
	// else's, and so does the logs route), and it names the stages.
	st, err := a.status(ctx, id)
	if err != nil {
		return a.fail(err)
	}
	interval := a.o.interval
	if interval <= 0 {
		interval = 2 * time.Second
	}
	c, err := a.client(ctx)
	if err != nil {
		return a.fail(err)
	}
	q := client.LogsOptions{Task: a.o.task, Since: since, Page: client.Page{Limit: logsPage}}
	ended := 0 // polls since the job was seen ended
	for {
		pg, err := c.ListLogs(ctx, id, q)
		if err != nil {
			return a.fail(err)
		}
		for _, l := range pg.Lines {
			a.printLogLine(st, l)
		}
		q.Cursor = pg.Next
		if len(pg.Lines) >= logsPage {
			continue // more to read now
		}
		if !a.o.follow || ended >= followDrain {
			return ExitOK
		}
		if err := a.env.Sleep(ctx, interval); err != nil {
			return ExitInterrupt
		}
		if ended > 0 {
			ended++
			continue
		}
		if st, err = a.status(ctx, id); err != nil {
			return a.fail(err)
		}
		if st.Done() {
			ended = 1
		}
	}
}

func isPartition(s string) bool {
	n, err := strconv.Atoi(s)
	return err == nil && n >= 0
}

// parseSince reads --since: a duration before now, or a time.
func parseSince(s string, now time.Time) (time.Time, error) {
	if d, err := time.ParseDuration(s); err == nil && d >= 0 {
		return now.Add(-d), nil
	}
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return t, nil
	}
	return time.Time{}, fmt.Errorf("want a duration (10m) or an RFC 3339 time")
}

// logKnown are the fields printLogLine shows in its own columns, or not
// at all (the job's id is the command's argument).
var logKnown = []string{"time", "level", "msg", "job_id", "stage", "stage_name", "partition", "task", "attempt", "executor_id"}

// printLogLine prints a line as TIME LEVEL TASK MSG key=value...: the task
// as stage/partition#attempt@executor, "-" for a line of no task.
func (a *app) printLogLine(st client.JobStatus, l client.LogLine) {
	if a.json() {
		var buf bytes.Buffer
		if json.Compact(&buf, l.Fields) == nil {
			buf.WriteByte('\n')
			_, _ = a.env.Stdout.Write(termsafe.JSON(buf.Bytes())) // escape.go
		}
		return
	}
	fmt.Fprintln(a.env.Stdout, formatLogLine(st, l, a.env.Loc))
}

func formatLogLine(st client.JobStatus, l client.LogLine, loc *time.Location) string {
	var f map[string]json.RawMessage
	_ = json.Unmarshal(l.Fields, &f)
	str := func(k string) string {
		var s string
		if json.Unmarshal(f[k], &s) == nil {
			return s
		}
		return strings.TrimSpace(string(f[k]))
	}
	if loc == nil {
		loc = time.UTC
	}
	var b strings.Builder
	b.WriteString(l.Time.In(loc).Format("2006-01-02 15:04:05.000"))
	fmt.Fprintf(&b, " %-5s ", termsafe.Text(orDash(str("level"))))
	b.WriteString(termsafe.Text(taskTag(st, str("task"), str("attempt"), str("executor_id"))))
	b.WriteString(" " + termsafe.Text(str("msg")))
	keys := make([]string, 0, len(f))
	for k := range f {
		if !slices.Contains(logKnown, k) {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	for _, k := range keys {
		// A value is quoted when it holds what would blur where it ends, or
		// what a terminal would act on (strconv.Quote escapes those as
		// termText does).
		v := str(k)
		if strings.ContainsAny(v, " \t\"=") || v == "" || termsafe.NeedsEscape(v) {
			v = strconv.Quote(v)
		}
		fmt.Fprintf(&b, " %s=%s", termsafe.Text(k), v)
	}
	return b.String()
}

// taskTag names a line's task by its stage's name: "count/3#2@0af3..."
// for partition 3 of stage count, attempt 2, on executor 0af3...
func taskTag(st client.JobStatus, task, attempt, executor string) string {
	parts := strings.Split(task, "/")
	if len(parts) != 3 {
		return "-"
	}
	stage := parts[1]
	if i, err := strconv.Atoi(stage); err == nil && i >= 0 && i < len(st.Stages) {
		stage = st.Stages[i].Name
	}
	tag := stage + "/" + parts[2]
	if attempt != "" {
		tag += "#" + attempt
	}
	if executor != "" {
		tag += "@" + executor
	}
	return tag
}

// attemptExecutors is the EXECUTOR column of `batchwork tasks`: the
// executor of each attempt, in order ("-" where unknown), and one id when
// every attempt ran on the same executor.
func attemptExecutors(atts []client.Attempt) string {
	ids := make([]string, len(atts))
	same := true
	for i, at := range atts {
		ids[i] = orDash(at.Executor)
		same = same && ids[i] == ids[0]
	}
	if len(ids) == 0 {
		return "-"
	}
	if same {
		return ids[0]
	}
	return strings.Join(ids, ", ")
}
