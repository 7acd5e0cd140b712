package cli

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/batchwork/batchwork/client"
	"github.com/batchwork/batchwork/cmd/batchwork/termsafe"
	sm "github.com/batchwork/batchwork/statemachine"
)

func writeJSON(w io.Writer, v any) error {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		return err
	}
	_, err := w.Write(termsafe.JSON(buf.Bytes())) // escape.go
	return err
}

func table(w io.Writer) *tabwriter.Writer { return tabwriter.NewWriter(w, 0, 0, 2, ' ', 0) }

// count writes n with thousands separators.
func count(n int64) string {
	s := strconv.FormatInt(n, 10)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	for i, r := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(r)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}

func rate(r *float64) string {
	if r == nil {
		return "-"
	}
	switch {
	case *r >= 100:
		return fmt.Sprintf("%.0f/s", *r)
	case *r >= 10:
		return fmt.Sprintf("%.1f/s", *r)
	}
	return fmt.Sprintf("%.2f/s", *r)
}

// clock formats an absolute time in the user's zone.
func (a *app) clock(t *time.Time) string {
	if t == nil {
		return "-"
	}
	return t.In(a.env.Loc).Format("2006-01-02 15:04:05")
}

// eta formats an ETA relative to now.
func (a *app) eta(t *time.Time) string {
	if t == nil {
		return "-"
	}
	d := t.Sub(a.env.Now()).Round(time.Second)
	if d <= 0 {
		return "any moment"
	}
	return "in " + d.String()
}

func elapsed(from time.Time, to *time.Time) string {
	if to == nil {
		return ""
	}
	return to.Sub(from).Round(time.Millisecond).String()
}

func percent(done, total int) string {
	if total == 0 {
		return "-"
	}
	return fmt.Sprintf("%d%%", done*100/total)
}

// printStatus writes a job's status for people.
func (a *app) printStatus(w io.Writer, st client.JobStatus) {
	tw := table(w)
	fmt.Fprintf(tw, "Job:\t%s\t(%s)\n", termsafe.Text(st.ID), termsafe.Text(st.Name))
	fmt.Fprintf(tw, "State:\t%s%s\n", a.paint(st.State, termsafe.Text(st.State)), failedNote(st)) // failed.go
	fmt.Fprintf(tw, "Created:\t%s\n", a.clock(&st.Created))
	if st.StartAt != nil { // submit --at
		fmt.Fprintf(tw, "Starts at:\t%s\n", a.clock(st.StartAt))
	}
	fmt.Fprintf(tw, "Started:\t%s\n", a.clock(st.Started))
	ended := a.clock(st.Ended)
	if st.Ended != nil {
		ended += " (took " + elapsed(st.Created, st.Ended) + ")"
	}
	fmt.Fprintf(tw, "Ended:\t%s\n", ended)
	if st.Output != "" {
		note := ""
		if st.State == string(sm.JobPublishing) {
			note = " (publishing: every stage completed; the job succeeds once the folder's _SUCCESS is written)"
		}
		fmt.Fprintf(tw, "Output:\t%s%s\n", termsafe.Text(st.Output), note)
	}
	printParams(tw, st.Params) // params.go
	p := st.Progress
	fmt.Fprintf(tw, "Tasks:\t%s of %s done (%s)\n", count(int64(p.TasksDone)), count(int64(p.TasksTotal)), percent(p.TasksDone, p.TasksTotal))
	fmt.Fprintf(tw, "Records:\t%s in, %s out\n", count(p.RecordsIn), count(p.RecordsOut))
	printCost(tw, st.Cost) // cost.go
	if st.State == "RUNNING" {
		fmt.Fprintf(tw, "Rate:\t%s tasks, %s records\n", rate(p.TasksPerSec), rate(p.RecordsPerSec))
		fmt.Fprintf(tw, "ETA:\t%s\n", a.eta(st.ETA))
		for _, l := range st.Limits {
			full := ""
			if l.Running >= l.Max {
				full = " (full: tasks wait for a slot)"
			}
			fmt.Fprintf(tw, "Limit (%s):\t%d of %d running%s\n", termsafe.Text(l.Kind), l.Running, l.Max, full)
		}
	}
	if st.Manifest != "" {
		fmt.Fprintf(tw, "Manifest:\t%s\n", termsafe.Text(st.Manifest))
	}
	if st.DataDeleted != nil {
		fmt.Fprintf(tw, "Data:\tdeleted %s (its outputs are gone)\n", a.clock(st.DataDeleted))
	}
	oneLine := !strings.ContainsAny(st.Error, "\r\n")
	if st.Error != "" && oneLine {
		fmt.Fprintf(tw, "Error:\t%s\n", termsafe.Text(st.Error))
	}
	tw.Flush()
	if st.Error != "" && !oneLine {
		// Outside the table: a multi-line error's lines would set its
		// column's width.
		fmt.Fprintf(w, "Error: %s\n", termsafe.Block(st.Error, "  "))
	}
	fmt.Fprintln(w)
	tw = table(w)
	fmt.Fprintln(tw, "STAGE\tSTATE\tDONE\tATTEMPTS\tFAILURES\tRECORDS IN\tRECORDS OUT\tRATE\tETA\tTOOK")
	for _, s := range st.Stages {
		took := "-"
		if s.Started != nil && s.Ended != nil {
			took = elapsed(*s.Started, s.Ended)
		}
		fmt.Fprintf(tw, "%s\t%s\t%d/%d\t%d\t%d\t%s\t%s\t%s\t%s\t%s\n", termsafe.Text(s.Name), a.paint(s.State, termsafe.Text(s.State)), s.Committed, s.Total,
			s.Attempts, s.Failures, count(s.RecordsIn), count(s.RecordsOut), rate(s.TasksPerSec), a.eta(s.ETA), took)
	}
	tw.Flush()
	for _, s := range st.Stages {
		name := termsafe.Text(s.Name)
		if s.Error != "" {
			fmt.Fprintf(w, "\nstage %s: %s\n", name, termsafe.Block(s.Error, "  "))
		}
		if s.FailedTasks > 0 {
			fmt.Fprintf(w, "\nstage %s: %d failed tasks tolerated (batchwork failed %s lists them)\n", name, s.FailedTasks, termsafe.Text(st.ID))
		}
		if s.BadRecords > 0 {
			fmt.Fprintf(w, "\nstage %s: %s bad records skipped (batchwork result %s --bad-records lists them)\n", name, count(s.BadRecords), termsafe.Text(st.ID))
		}
		if c := s.Copies; c != nil {
			fmt.Fprintf(w, "\nstage %s: speculative copies: %d launched, %d won, %d running\n", name, c.Launched, c.Won, c.Running)
		}
	}
}

// ANSI colours, used only on a terminal.
const (
	red    = "\x1b[31m"
	green  = "\x1b[32m"
	yellow = "\x1b[33m"
	dim    = "\x1b[2m"
	reset  = "\x1b[0m"
)

// paint colours text by a state, on a terminal. tabwriter counts the
// escape bytes as width, so colour is only used where every cell of a
// column has some (states always do).
func (a *app) paint(state, text string) string {
	if !a.colour() {
		return text
	}
	switch state {
	case "SUCCEEDED", "COMPLETED":
		return green + text + reset
	case "FAILED", "CANCELLED":
		return red + text + reset
	case "RUNNING", "PUBLISHING", "WAITING":
		return yellow + text + reset
	}
	return dim + text + reset
}

// bar draws a progress bar of width cells.
func bar(done, total, width int) string {
	if total <= 0 {
		return "[" + strings.Repeat("·", width) + "]"
	}
	n := min(done*width/total, width)
	return "[" + strings.Repeat("█", n) + strings.Repeat("░", width-n) + "]"
}
