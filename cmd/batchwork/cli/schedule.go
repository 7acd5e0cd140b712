package cli

import (
	"context"
	"fmt"
	"io"
	"os"

	"github.com/batchwork/batchwork/client"
	"github.com/batchwork/batchwork/cmd/batchwork/termsafe"
	"github.com/batchwork/batchwork/shared/schedule"
)

// scheduleCommand is `batchwork schedule ACTION [ARG]`: one command with
// verbs, so `batchwork help` lists schedules on one line.
var scheduleCommand = &command{
	name: "schedule", args: "ACTION [ARG]", summary: "recurring jobs: create FILE | list | get ID | pause ID | resume ID | delete ID | runs ID",
	help: `Manages schedules: jobs that fire on a cron expression (five fields, read
in the schedule's time zone) or a rate ("rate(5 minutes)"). Each scheduled
time creates one job, never two. Actions:

  create FILE   create a schedule from a JSON file ("-" reads stdin): name, spec
                (a job spec object), expression, and optionally timeZone, start,
                end, overlap (skip|allow|cancelPrevious), catchUp (fireOnce|skipMissed)
  list          list your schedules
  get ID        show one schedule
  pause ID      stop its firings until resumed
  resume ID     fire again from now on (paused times are not caught up)
  delete ID     delete it; its jobs and history are kept
  runs ID       its history: scheduled time, start, job, status

An invalid schedule exits 3 with the field at fault; an unknown id exits 4.`,
	examples: []string{
		"batchwork schedule create nightly.json",
		`echo '{"name":"hourly","expression":"0 * * * *","spec":{...}}' | batchwork schedule create -`,
		"batchwork schedule list -o json",
		"batchwork schedule pause s19aa5e7c2a1f3b9d0e4c7",
		"batchwork schedule runs s19aa5e7c2a1f3b9d0e4c7 --all",
	},
	flags:   pageFlags,
	minArgs: 1, maxArgs: 2, run: runSchedule,
}

func runSchedule(ctx context.Context, a *app, args []string) int {
	action, rest := args[0], args[1:]
	want := 1
	if action == "list" {
		want = 0
	}
	switch action {
	case "create", "list", "get", "pause", "resume", "delete", "runs":
	default:
		return a.fail(&usageError{fmt.Sprintf("unknown action %q; want create, list, get, pause, resume, delete or runs", action)})
	}
	if len(rest) != want {
		return a.fail(&usageError{fmt.Sprintf("%s takes %d argument(s); usage: batchwork schedule %s", action, want, map[string]string{
			"create": "create FILE", "list": "list", "get": "get ID", "pause": "pause ID",
			"resume": "resume ID", "delete": "delete ID", "runs": "runs ID",
		}[action])})
	}
	switch action {
	case "create":
		return scheduleCreate(ctx, a, rest[0])
	case "list":
		return scheduleList(ctx, a)
	case "runs":
		return scheduleRuns(ctx, a, rest[0])
	}
	c, err := a.client(ctx)
	if err != nil {
		return a.fail(err)
	}
	if action == "delete" {
		if err := c.DeleteSchedule(ctx, rest[0]); err != nil {
			return a.fail(err)
		}
		if a.json() {
			_ = writeJSON(a.env.Stdout, map[string]any{"id": rest[0], "deleted": true})
		} else {
			fmt.Fprintf(a.env.Stdout, "Schedule %s deleted; its jobs and history are kept.\n", rest[0])
		}
		return ExitOK
	}
	op := map[string]func(context.Context, string) (client.Schedule, error){
		"get": c.GetSchedule, "pause": c.PauseSchedule, "resume": c.ResumeSchedule,
	}[action]
	v, err := op(ctx, rest[0])
	if err != nil {
		return a.fail(err)
	}
	return a.printSchedule(v)
}

func scheduleCreate(ctx context.Context, a *app, file string) int {
	var body []byte
	var err error
	if file == "-" {
		body, err = io.ReadAll(io.LimitReader(a.env.Stdin, schedule.MaxScheduleBytes+1))
	} else {
		body, err = os.ReadFile(file)
	}
	if err != nil {
		return a.fail(err)
	}
	c, err := a.client(ctx)
	if err != nil {
		return a.fail(err)
	}
	v, err := c.CreateSchedule(ctx, body)
	if err != nil {
		return a.fail(err)
	}
	return a.printSchedule(v)
}

func (a *app) printSchedule(v client.Schedule) int {
	if a.json() {
		_ = writeJSON(a.env.Stdout, v)
		return ExitOK
	}
	tw := table(a.env.Stdout)
	state := "active"
	if v.Paused {
		state = "paused"
	}
	when := v.Expression
	if v.TimeZone != "" {
		when += " (" + v.TimeZone + ")"
	}
	fmt.Fprintf(tw, "ID\t%s\nNAME\t%s\nWHEN\t%s\nSTATE\t%s\nOVERLAP\t%s\nCATCH-UP\t%s\n", termsafe.Text(v.ID), termsafe.Text(v.Name), termsafe.Text(when), state, termsafe.Text(string(v.Overlap)), termsafe.Text(string(v.CatchUp)))
	if !v.Start.IsZero() {
		fmt.Fprintf(tw, "START\t%s\n", a.clock(&v.Start))
	}
	if !v.End.IsZero() {
		fmt.Fprintf(tw, "END\t%s\n", a.clock(&v.End))
	}
	fmt.Fprintf(tw, "LAST FIRED\t%s\nNEXT\t%s\n", a.clock(v.LastFired), a.clock(v.Next))
	if v.LastJobID != "" {
		fmt.Fprintf(tw, "LAST JOB\t%s\n", termsafe.Text(v.LastJobID))
	}
	tw.Flush()
	return ExitOK
}

func scheduleList(ctx context.Context, a *app) int {
	all := client.ScheduleList{Schedules: []client.Schedule{}}
	fetch := func(c *client.Client, p client.Page) (client.ScheduleList, error) { return c.ListSchedules(ctx, p) }
	err := listPages(ctx, a, &all, fetch, func(all, p *client.ScheduleList) string {
		all.Schedules, all.NextCursor = append(all.Schedules, p.Schedules...), p.NextCursor
		return p.NextCursor
	})
	if err != nil {
		return a.fail(err)
	}
	if a.json() {
		_ = writeJSON(a.env.Stdout, all)
		return ExitOK
	}
	if len(all.Schedules) == 0 {
		fmt.Fprintln(a.env.Stdout, "No schedules.")
		return ExitOK
	}
	tw := table(a.env.Stdout)
	fmt.Fprintln(tw, "ID\tNAME\tEXPRESSION\tZONE\tSTATE\tNEXT")
	for _, v := range all.Schedules {
		state := "active"
		if v.Paused {
			state = "paused"
		}
		zone := v.TimeZone
		if zone == "" {
			zone = "-"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", termsafe.Text(v.ID), termsafe.Text(v.Name), termsafe.Text(v.Expression), termsafe.Text(zone), state, a.clock(v.Next))
	}
	tw.Flush()
	return ExitOK
}

func scheduleRuns(ctx context.Context, a *app, id string) int {
	all := client.RunList{Runs: []client.ScheduleRun{}}
	fetch := func(c *client.Client, p client.Page) (client.RunList, error) { return c.ListScheduleRuns(ctx, id, p) }
	err := listPages(ctx, a, &all, fetch, func(all, p *client.RunList) string {
		all.Runs, all.NextCursor = append(all.Runs, p.Runs...), p.NextCursor
		return p.NextCursor
	})
	if err != nil {
		return a.fail(err)
	}
	if a.json() {
		_ = writeJSON(a.env.Stdout, all)
		return ExitOK
	}
	if len(all.Runs) == 0 {
		fmt.Fprintln(a.env.Stdout, "No runs yet.")
		return ExitOK
	}
	tw := table(a.env.Stdout)
	fmt.Fprintln(tw, "SCHEDULED\tACTION\tSTARTED\tJOB\tSTATUS\tNOTE")
	for _, r := range all.Runs {
		job, status := r.JobID, r.Status
		if job == "" {
			job, status = "-", "-"
		}
		note := r.Note
		if note == "" {
			note = "-"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", a.clock(&r.Scheduled), termsafe.Text(r.Action), a.clock(r.StartedAt), termsafe.Text(job), a.paint(status, termsafe.Text(status)), oneLine(note, 200))
	}
	tw.Flush()
	return ExitOK
}
