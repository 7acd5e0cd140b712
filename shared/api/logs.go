package api

import (
	"errors"
	"net/http"
	"time"

	"github.com/batchwork/batchwork/shared/control"
	"github.com/batchwork/batchwork/shared/spec"
)

// logRoutes are registered with the job routes in New.
var logRoutes = []Route{{"GET", "/jobs/{id}/logs", []string{"task", "since", "limit", "cursor"}}}

func init() { Routes = append(Routes, logRoutes...) }

func (h *Handler) logHandlers() map[string]func(http.ResponseWriter, *http.Request, string) {
	return map[string]func(http.ResponseWriter, *http.Request, string){"GET /jobs/{id}/logs": h.jobLogs}
}

// jobLogs answers a page of the caller's job's lines. The job must be the
// caller's (404 otherwise, like every job route); 501 when the
// installation has no log source.
func (h *Handler) jobLogs(w http.ResponseWriter, r *http.Request, owner string) {
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
	pg, err := h.svc.JobLogs(r.Context(), control.LogsRequest{
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
