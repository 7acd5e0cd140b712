package api

import (
	"context"
	"errors"
	"net/http"

	"github.com/batchwork/batchwork/shared/control"
)

// JobDeleteService is what DELETE /jobs/{id} needs of the control plane.
// Separate from Service, like DataService, so a control plane without it
// still serves the rest.
type JobDeleteService interface {
	DeleteJob(ctx context.Context, owner, id string) (control.JobDeletion, error)
}

var _ JobDeleteService = (*control.Service)(nil)

// jobDeleteRoutes are registered with the job routes in New.
var jobDeleteRoutes = []Route{{"DELETE", "/jobs/{id}", nil}}

func init() { Routes = append(Routes, jobDeleteRoutes...) }

func (h *Handler) jobDeleteHandlers() map[string]func(http.ResponseWriter, *http.Request, string) {
	return map[string]func(http.ResponseWriter, *http.Request, string){"DELETE /jobs/{id}": h.deleteJob}
}

var errNoJobDeleteService = errors.New("the control plane behind this API cannot delete jobs")

// deleteJob answers 200 when nothing of the job is left, and 202 when the
// call stopped at its budget: the caller calls again, which is safe (the
// deletion is idempotent). A job already deleted, like another owner's,
// is a 404; one that has not ended a 409.
func (h *Handler) deleteJob(w http.ResponseWriter, r *http.Request, owner string) {
	ds, ok := h.svc.(JobDeleteService)
	if !ok {
		h.fail(w, r, errNoJobDeleteService)
		return
	}
	res, err := ds.DeleteJob(r.Context(), owner, r.PathValue("id"))
	var notEnded *control.JobNotEndedError
	if errors.As(err, &notEnded) {
		writeJSON(w, http.StatusConflict, Error{Code: "job_running", Message: notEnded.Error(), Field: "id"})
		return
	}
	if err != nil {
		h.fail(w, r, err)
		return
	}
	writeDeletion(w, res.Complete, res)
}
