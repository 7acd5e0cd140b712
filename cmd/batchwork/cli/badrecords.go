package cli

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"

	"github.com/batchwork/batchwork/client"
	"github.com/batchwork/batchwork/cmd/batchwork/termsafe"
	"github.com/batchwork/batchwork/shared/domain"
)

// runBadRecords is `batchwork result ID --bad-records`: every record the
// job's committed tasks rejected, one a line, the record quoted so that a
// record holding tabs or newlines stays on its line.
func runBadRecords(ctx context.Context, a *app, args []string) int {
	if a.o.list || a.o.download != "" {
		fmt.Fprintf(a.env.Stderr, "batchwork result: --bad-records lists the rejected records; it takes neither --list nor --download\n")
		return ExitUsage
	}
	all := client.BadRecordPage{}
	a.o.all = true
	fetch := func(c *client.Client, p client.Page) (client.BadRecordPage, error) {
		return c.ListBadRecords(ctx, args[0], client.BadRecordsOptions{Stage: a.o.stage, Page: p})
	}
	err := listPages(ctx, a, &all, fetch, func(all, p *client.BadRecordPage) string {
		recs := append(all.Records, p.Records...)
		*all = *p
		all.Records = recs
		return p.NextCursor
	})
	if err != nil {
		return a.fail(err)
	}
	all.NextCursor = ""
	if a.json() {
		_ = writeJSON(a.env.Stdout, all)
		return ExitOK
	}
	for _, stage := range slices.Sorted(maps.Keys(all.Counts)) {
		fmt.Fprintf(a.env.Stderr, "stage %s: %s bad records\n", termsafe.Text(stage), count(all.Counts[stage]))
	}
	if len(all.Records) == 0 {
		fmt.Fprintf(a.env.Stderr, "job %s has no bad records in committed tasks\n", termsafe.Text(all.Job))
		return ExitOK
	}
	tw := table(a.env.Stdout)
	fmt.Fprintln(tw, "STAGE\tPARTITION\tATTEMPT\tOFFSET\tREASON\tRECORD")
	for _, r := range all.Records {
		if r.Omitted > 0 {
			fmt.Fprintf(tw, "%s\t%d\t%d\t-\t(%s more rejected records of this task, counted but not kept)\t\n", termsafe.Text(r.Stage), r.Partition, r.Attempt, count(r.Omitted))
			continue
		}
		off := "-"
		if r.Offset >= 0 {
			off = strconv.FormatInt(r.Offset, 10)
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%s\t%s\t%s\n", termsafe.Text(r.Stage), r.Partition, r.Attempt, off, reasonText(r.Reason), strconv.Quote(r.Record))
	}
	tw.Flush()
	return ExitOK
}

// reasonText is a rejection's reason on one table line: the task wrote it,
// possibly from the record, so line ends, tabs and control characters
// (terminal escape sequences) are escaped. Reasons are short
// (domain.MaxBadReasonBytes).
func reasonText(s string) string {
	return oneLine(s, 4*domain.MaxBadReasonBytes) // escaped as every print path is (escape.go)
}
