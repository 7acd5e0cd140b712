package api

import (
	"errors"
	"net/http"

	"github.com/batchwork/batchwork/shared/control"
)

// jobDeleteRoutes are registered with the job routes in New.
var jobDeleteRoutes = []Route{{"DELETE", "/jobs/{id}", nil}}

func init() { Routes = append(Routes, jobDeleteRoutes...) }

func (h *Handler) jobDeleteHandlers() map[string]func(http.ResponseWriter, *http.Request, string) {
	return map[string]func(http.ResponseWriter, *http.Request, string){"DELETE /jobs/{id}": h.deleteJob}
}

// deleteJob answers 200 when nothing of the job is left, and 202 when the
// call stopped at its budget: the caller calls again, which is safe (the
// deletion is idempotent). A job already deleted, like another owner's,
// is a 404; one that has not ended a 409.
func (h *Handler) deleteJob(w http.ResponseWriter, r *http.Request, owner string) {
	res, err := h.svc.DeleteJob(r.Context(), owner, r.PathValue("id"))
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
