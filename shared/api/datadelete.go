package api

import (
	"context"
	"errors"
	"net/http"

	"github.com/batchwork/batchwork/shared/control"
)

// DataService is what DELETE /jobs/{id}/data needs of the control plane.
// Separate from Service, like IdentityService, so a control plane without
// it still serves the rest.
type DataService interface {
	DeleteData(ctx context.Context, owner, id string) (control.DataDeletion, error)
}

var _ DataService = (*control.Service)(nil)

// dataRoutes are registered with the job routes in New.
var dataRoutes = []Route{{"DELETE", "/jobs/{id}/data", nil}}

func init() { Routes = append(Routes, dataRoutes...) }

func (h *Handler) dataHandlers() map[string]func(http.ResponseWriter, *http.Request, string) {
	return map[string]func(http.ResponseWriter, *http.Request, string){"DELETE /jobs/{id}/data": h.deleteData}
}

var errNoDataService = errors.New("the control plane behind this API cannot delete a job's data")

// deleteData answers 200 when nothing of the job's data is left, and 202
// when the call stopped at its budget: the caller calls again, which is
// safe (the deletion is idempotent).
func (h *Handler) deleteData(w http.ResponseWriter, r *http.Request, owner string) {
	ds, ok := h.svc.(DataService)
	if !ok {
		h.fail(w, r, errNoDataService)
		return
	}
	res, err := ds.DeleteData(r.Context(), owner, r.PathValue("id"))
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
