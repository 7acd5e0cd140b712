package api

import (
	"errors"
	"net/http"

	"github.com/batchwork/batchwork/shared/control"
)

// cancelTask is POST /jobs/{id}/cancel?task=STAGE/PARTITION: one task's
// cancel (operations.Operator.CancelTask). Its refusals name the task.
func (h *Handler) cancelTask(w http.ResponseWriter, r *http.Request, owner string) {
	res, err := h.svc.CancelTask(r.Context(), control.CancelTaskRequest{Owner: owner, ID: r.PathValue("id"), Task: r.URL.Query().Get("task")})
	var missing *control.TaskNotFoundError
	var ended *control.TaskEndedError
	var early *control.TaskNotStartedError
	switch {
	case errors.As(err, &missing):
		writeJSON(w, http.StatusNotFound, Error{Code: "not_found", Message: missing.Error(), Field: "task"})
	case errors.As(err, &ended):
		writeJSON(w, http.StatusConflict, Error{Code: "task_ended", Message: ended.Error(), Field: "task"})
	case errors.As(err, &early):
		writeJSON(w, http.StatusConflict, Error{Code: "task_not_started", Message: early.Error(), Field: "task"})
	case err != nil:
		h.fail(w, r, err)
	default:
		writeJSON(w, http.StatusOK, res)
	}
}
