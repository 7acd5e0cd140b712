package api

import (
	"context"
	"errors"
	"net/http"

	"github.com/batchwork/batchwork/shared/control"
)

// BadRecordService is what GET /jobs/{id}/bad-records needs of the
// control plane: the records a job's committed tasks rejected, read on its
// owner's behalf. Separate from Service, like LogService, so a control
// plane without it still serves the rest.
type BadRecordService interface {
	BadRecords(ctx context.Context, req control.BadRecordsRequest) (control.BadRecordPage, error)
}

var _ BadRecordService = (*control.Service)(nil)

// badRecordRoutes are registered with the job routes in New.
var badRecordRoutes = []Route{{"GET", "/jobs/{id}/bad-records", []string{"stage", "limit", "cursor"}}}

func init() { Routes = append(Routes, badRecordRoutes...) }

func (h *Handler) badRecordHandlers() map[string]func(http.ResponseWriter, *http.Request, string) {
	return map[string]func(http.ResponseWriter, *http.Request, string){"GET /jobs/{id}/bad-records": h.badRecords}
}

var errNoBadRecordService = errors.New("the control plane behind this API cannot read bad records")

// badRecords answers a page of the records the caller's job rejected. The
// job must be the caller's (404 otherwise, like every job route).
func (h *Handler) badRecords(w http.ResponseWriter, r *http.Request, owner string) {
	bs, ok := h.svc.(BadRecordService)
	if !ok {
		h.fail(w, r, errNoBadRecordService)
		return
	}
	q := r.URL.Query()
	limit, err := intParam(q, "limit")
	if err != nil {
		h.fail(w, r, err)
		return
	}
	pg, err := bs.BadRecords(r.Context(), control.BadRecordsRequest{
		Owner: owner, ID: r.PathValue("id"), Stage: q.Get("stage"), Limit: limit, Cursor: q.Get("cursor"),
	})
	if err != nil {
		h.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, pg)
}
