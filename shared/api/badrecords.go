package api

import (
	"net/http"

	"github.com/batchwork/batchwork/shared/control"
)

// badRecordRoutes are registered with the job routes in New.
var badRecordRoutes = []Route{{"GET", "/jobs/{id}/bad-records", []string{"stage", "limit", "cursor"}}}

func init() { Routes = append(Routes, badRecordRoutes...) }

func (h *Handler) badRecordHandlers() map[string]func(http.ResponseWriter, *http.Request, string) {
	return map[string]func(http.ResponseWriter, *http.Request, string){"GET /jobs/{id}/bad-records": h.badRecords}
}

// badRecords answers a page of the records the caller's job rejected. The
// job must be the caller's (404 otherwise, like every job route).
func (h *Handler) badRecords(w http.ResponseWriter, r *http.Request, owner string) {
	q := r.URL.Query()
	limit, err := intParam(q, "limit")
	if err != nil {
		h.fail(w, r, err)
		return
	}
	pg, err := h.svc.BadRecords(r.Context(), control.BadRecordsRequest{
		Owner: owner, ID: r.PathValue("id"), Stage: q.Get("stage"), Limit: limit, Cursor: q.Get("cursor"),
	})
	if err != nil {
		h.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, pg)
}
