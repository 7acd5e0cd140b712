package api

import (
	"context"
	"errors"
	"io"
	"net/http"

	"github.com/batchwork/batchwork/shared/control"
	"github.com/batchwork/batchwork/shared/domain"
	"github.com/batchwork/batchwork/shared/schedule"
)

// scheduleRoutes are registered with the job routes in New.
var scheduleRoutes = []Route{
	{"POST", "/schedules", nil},
	{"GET", "/schedules", []string{"limit", "cursor"}},
	{"GET", "/schedules/{id}", nil},
	{"POST", "/schedules/{id}/pause", nil},
	{"POST", "/schedules/{id}/resume", nil},
	{"DELETE", "/schedules/{id}", nil},
	{"GET", "/schedules/{id}/runs", []string{"limit", "cursor"}},
}

func (h *Handler) scheduleHandlers() map[string]func(http.ResponseWriter, *http.Request, string) {
	return map[string]func(http.ResponseWriter, *http.Request, string){
		"POST /schedules":             h.createSchedule,
		"GET /schedules":              h.listSchedules,
		"GET /schedules/{id}":         h.getSchedule,
		"POST /schedules/{id}/pause":  h.pauseSchedule,
		"POST /schedules/{id}/resume": h.resumeSchedule,
		"DELETE /schedules/{id}":      h.deleteSchedule,
		"GET /schedules/{id}/runs":    h.scheduleRuns,
	}
}

// failSchedule is fail with the not-found message naming a schedule.
func (h *Handler) failSchedule(w http.ResponseWriter, r *http.Request, err error) {
	if errors.Is(err, domain.ErrNotFound) {
		writeJSON(w, http.StatusNotFound, Error{Code: "not_found", Message: "no such schedule", Field: "id"})
		return
	}
	h.fail(w, r, err)
}

// maxScheduleBody bounds a schedule document.
const maxScheduleBody = schedule.MaxScheduleBytes + 1

func (h *Handler) createSchedule(w http.ResponseWriter, r *http.Request, owner string) {
	body, err := io.ReadAll(io.LimitReader(r.Body, maxScheduleBody))
	if err != nil {
		writeJSON(w, http.StatusBadRequest, Error{Code: "invalid_request", Message: "could not read body", Field: "body"})
		return
	}
	if len(body) >= maxScheduleBody {
		writeJSON(w, http.StatusRequestEntityTooLarge, Error{Code: "too_large", Message: "schedule is too large", Field: "body"})
		return
	}
	v, err := h.svc.CreateSchedule(r.Context(), owner, body)
	if err != nil {
		h.failSchedule(w, r, err)
		return
	}
	writeJSON(w, http.StatusCreated, v)
}

func (h *Handler) listSchedules(w http.ResponseWriter, r *http.Request, owner string) {
	q := r.URL.Query()
	limit, err := intParam(q, "limit")
	if err != nil {
		h.fail(w, r, err)
		return
	}
	res, err := h.svc.ListSchedules(r.Context(), owner, limit, q.Get("cursor"))
	if err != nil {
		h.failSchedule(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, res)
}

func (h *Handler) oneSchedule(fn func(context.Context, string, string) (control.ScheduleView, error)) func(http.ResponseWriter, *http.Request, string) {
	return func(w http.ResponseWriter, r *http.Request, owner string) {
		v, err := fn(r.Context(), owner, r.PathValue("id"))
		if err != nil {
			h.failSchedule(w, r, err)
			return
		}
		writeJSON(w, http.StatusOK, v)
	}
}

func (h *Handler) getSchedule(w http.ResponseWriter, r *http.Request, owner string) {
	h.oneSchedule(h.svc.GetSchedule)(w, r, owner)
}

func (h *Handler) pauseSchedule(w http.ResponseWriter, r *http.Request, owner string) {
	h.oneSchedule(h.svc.PauseSchedule)(w, r, owner)
}

func (h *Handler) resumeSchedule(w http.ResponseWriter, r *http.Request, owner string) {
	h.oneSchedule(h.svc.ResumeSchedule)(w, r, owner)
}

func (h *Handler) deleteSchedule(w http.ResponseWriter, r *http.Request, owner string) {
	if err := h.svc.DeleteSchedule(r.Context(), owner, r.PathValue("id")); err != nil {
		h.failSchedule(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (h *Handler) scheduleRuns(w http.ResponseWriter, r *http.Request, owner string) {
	q := r.URL.Query()
	limit, err := intParam(q, "limit")
	if err != nil {
		h.fail(w, r, err)
		return
	}
	res, err := h.svc.ScheduleRuns(r.Context(), owner, r.PathValue("id"), limit, q.Get("cursor"))
	if err != nil {
		h.failSchedule(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, res)
}
