package readside

import (
	"github.com/batchwork/batchwork/shared/domain"
	"github.com/batchwork/batchwork/shared/tracing"
)

// traceIDs sets the trace id of each task that has a span: its job's
// trace (job, the job's traceparent), which its span is in.
func traceIDs(infos []TaskInfo, rows []domain.TaskRow, job string) {
	id := tracing.TraceID(job)
	if id == "" {
		return
	}
	for i := range infos {
		if i < len(rows) && rows[i].TraceSpan != "" {
			infos[i].TraceID = id
		}
	}
}
