package api

import (
	"net/http"
)

// dataRoutes are registered with the job routes in New.
var dataRoutes = []Route{{"DELETE", "/jobs/{id}/data", nil}}

func init() { Routes = append(Routes, dataRoutes...) }

func (h *Handler) dataHandlers() map[string]func(http.ResponseWriter, *http.Request, string) {
	return map[string]func(http.ResponseWriter, *http.Request, string){"DELETE /jobs/{id}/data": h.deleteData}
}

// deleteData answers 200 when nothing of the job's data is left, and 202
// when the call stopped at its budget: the caller calls again, which is
// safe (the deletion is idempotent).
func (h *Handler) deleteData(w http.ResponseWriter, r *http.Request, owner string) {
	res, err := h.svc.DeleteData(r.Context(), owner, r.PathValue("id"))
	if err != nil {
		h.fail(w, r, err)
		return
	}
	writeDeletion(w, res.Complete, res)
}

// writeDeletion answers a deletion call: 200 when nothing is left, 202
// when it stopped at its budget and the caller must call again.
func writeDeletion(w http.ResponseWriter, complete bool, body any) {
	status := http.StatusOK
	if !complete {
		status = http.StatusAccepted
	}
	writeJSON(w, status, body)
}
