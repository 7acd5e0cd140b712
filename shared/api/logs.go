package api

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/batchwork/batchwork/shared/control"
	"github.com/batchwork/batchwork/shared/logs"
	"github.com/batchwork/batchwork/shared/spec"
)

// LogService is what GET /jobs/{id}/logs needs of the control plane: a
// job's log lines, read on its owner's behalf. Separate from Service, like
// IdentityService, so a control plane without it still serves the rest.
type LogService interface {
	JobLogs(ctx context.Context, req control.LogsRequest) (logs.Page, error)
}

var _ LogService = (*control.Service)(nil)

// logRoutes are registered with the job routes in New.
var logRoutes = []Route{{"GET", "/jobs/{id}/logs", []string{"task", "since", "limit", "cursor"}}}

func init() { Routes = append(Routes, logRoutes...) }

func (h *Handler) logHandlers() map[string]func(http.ResponseWriter, *http.Request, string) {
	return map[string]func(http.ResponseWriter, *http.Request, string){"GET /jobs/{id}/logs": h.jobLogs}
}

var errNoLogService = errors.New("the control plane behind this API cannot read logs")

// jobLogs answers a page of the caller's job's lines. The job must be the
// caller's (404 otherwise, like every job route); 501 when the
// installation has no log source.
func (h *Handler) jobLogs(w http.ResponseWriter, r *http.Request, owner string) {
	ls, ok := h.svc.(LogService)
	if !ok {
		h.fail(w, r, errNoLogService)
		return
	}
	q := r.URL.Query()
	limit, err := intParam(q, "limit")
	if err != nil {
		h.fail(w, r, err)
		return
	}
	var since time.Time
	if _, sent := q["since"]; sent { // sent empty is an error too, not "since ever"
		if since, err = time.Parse(time.RFC3339Nano, q.Get("since")); err != nil {
			h.fail(w, r, &spec.FieldError{Field: "since", Message: "must be an RFC 3339 time, e.g. 2026-01-02T15:04:05Z"})
			return
		}
	}
	pg, err := ls.JobLogs(r.Context(), control.LogsRequest{
		Owner: owner, ID: r.PathValue("id"), Task: q.Get("task"), Since: since, Cursor: q.Get("cursor"), Limit: limit,
	})
	if errors.Is(err, control.ErrLogsUnavailable) {
		writeJSON(w, http.StatusNotImplemented, Error{Code: "logs_unavailable", Message: err.Error()})
		return
	}
	if err != nil {
		h.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, pg)
}
