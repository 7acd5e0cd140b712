package cli

import (
	"context"
	"fmt"
	"strings"

	"github.com/batchwork/batchwork/client"
	"github.com/batchwork/batchwork/cmd/batchwork/termsafe"
)

// watch follows a job until it ends and returns the exit code of its end
// state. Transient errors (the API briefly unreachable) are retried by the
// client; a persistent one ends the watch with its exit code.
func (a *app) watch(ctx context.Context, id string) int {
	c, err := a.client(ctx)
	if err != nil {
		return a.fail(err)
	}
	drawn := 0 // lines of the live display to redraw
	last := ""
	// Every poll: the live display redraws its rates and ETAs.
	for st, err := range c.Watch(ctx, id, client.WatchOptions{Interval: a.o.interval, EveryPoll: true}) {
		if err != nil {
			if ctx.Err() != nil { // interrupted, between polls or during one
				return ExitInterrupt
			}
			return a.fail(err)
		}
		switch {
		case a.json():
			if line := progressLine(st); line != last {
				last = line
				_ = writeJSON(a.env.Stdout, st)
			}
		case a.env.TTY:
			drawn = a.drawLive(st, drawn)
		default:
			if line := progressLine(st); line != last {
				last = line
				fmt.Fprintf(a.env.Stdout, "%s  %s\n", a.env.Now().In(a.env.Loc).Format("15:04:05"), line)
			}
		}
		if st.Done() {
			if !a.json() {
				a.printEnd(st)
			}
			return exitForJob(st.State)
		}
	}
	return ExitInterrupt // not reached: Watch ends with the job's end or an error
}

// progressLine is the plain one-line progress of a job: what a log or a
// CI run shows, one line per change.
func progressLine(st client.JobStatus) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s %d/%d tasks", termsafe.Text(st.State), st.Progress.TasksDone, st.Progress.TasksTotal)
	for _, s := range st.Stages {
		fmt.Fprintf(&b, " | %s %s %d/%d", termsafe.Text(s.Name), termsafe.Text(s.State), s.Committed, s.Total)
		if s.Failures > 0 {
			fmt.Fprintf(&b, " (%d failed attempts)", s.Failures)
		}
	}
	return b.String()
}

// drawLive redraws the terminal display: a header line and a bar per
// stage, in place.
func (a *app) drawLive(st client.JobStatus, drawn int) int {
	var b strings.Builder
	if drawn > 0 {
		fmt.Fprintf(&b, "\x1b[%dA", drawn)
	}
	line := func(format string, args ...any) {
		b.WriteString("\x1b[2K")
		fmt.Fprintf(&b, format, args...)
		b.WriteByte('\n')
	}
	p := st.Progress
	head := fmt.Sprintf("%s  %s  %s  %d/%d tasks", termsafe.Text(st.Name), termsafe.Text(st.ID), a.paint(st.State, termsafe.Text(st.State)), p.TasksDone, p.TasksTotal)
	if st.State == "RUNNING" {
		head += fmt.Sprintf("  %s  ETA %s", rate(p.TasksPerSec), a.eta(st.ETA))
	}
	line("%s", head)
	width := 0
	for _, s := range st.Stages {
		width = max(width, len(termsafe.Text(s.Name)))
	}
	for _, s := range st.Stages {
		extra := ""
		if s.State == "RUNNING" {
			extra = fmt.Sprintf("  %s  ETA %s", rate(s.TasksPerSec), a.eta(s.ETA))
		}
		if s.Failures > 0 {
			extra += fmt.Sprintf("  %d failed attempts", s.Failures)
		}
		line("  %-*s %s %6s  %s%s", width, termsafe.Text(s.Name), bar(s.Committed, s.Total, 30),
			fmt.Sprintf("%d/%d", s.Committed, s.Total), a.paint(s.State, termsafe.Text(s.State)), extra)
	}
	fmt.Fprint(a.env.Stdout, b.String())
	return 1 + len(st.Stages)
}

func (a *app) printEnd(st client.JobStatus) {
	took := ""
	if st.Ended != nil {
		took = " in " + elapsed(st.Created, st.Ended)
	}
	fmt.Fprintf(a.env.Stdout, "Job %s %s%s\n", termsafe.Text(st.ID), a.paint(st.State, termsafe.Text(st.State)), took)
	if st.Error != "" {
		fmt.Fprintf(a.env.Stdout, "Error: %s\n", termsafe.Block(st.Error, "  "))
	}
	if st.State == "SUCCEEDED" {
		fmt.Fprintf(a.env.Stdout, "Outputs: batchwork result %s\n", termsafe.Text(st.ID))
	}
}
