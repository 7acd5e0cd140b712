package api

import (
	"net/http"
)

// whoamiRoutes are registered with the job routes in New.
var whoamiRoutes = []Route{{"GET", "/whoami", nil}}

func init() { Routes = append(Routes, whoamiRoutes...) }

func (h *Handler) whoamiHandlers() map[string]func(http.ResponseWriter, *http.Request, string) {
	return map[string]func(http.ResponseWriter, *http.Request, string){"GET /whoami": h.whoami}
}

func (h *Handler) whoami(w http.ResponseWriter, r *http.Request, owner string) {
	id, err := h.svc.WhoAmI(r.Context(), owner)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, id)
}
