package api

import (
	"context"
	"errors"
	"net/http"

	"github.com/batchwork/batchwork/shared/control"
)

// IdentityService is what GET /whoami needs of the control plane: the
// caller's owner and inputs area. Separate from Service, like
// ScheduleService, so a control plane without it still serves the rest.
type IdentityService interface {
	WhoAmI(ctx context.Context, owner string) (control.Identity, error)
}

var _ IdentityService = (*control.Service)(nil)

// whoamiRoutes are registered with the job routes in New.
var whoamiRoutes = []Route{{"GET", "/whoami", nil}}

func init() { Routes = append(Routes, whoamiRoutes...) }

func (h *Handler) whoamiHandlers() map[string]func(http.ResponseWriter, *http.Request, string) {
	return map[string]func(http.ResponseWriter, *http.Request, string){"GET /whoami": h.whoami}
}

var errNoIdentityService = errors.New("the control plane behind this API cannot tell an owner's inputs area")

func (h *Handler) whoami(w http.ResponseWriter, r *http.Request, owner string) {
	is, ok := h.svc.(IdentityService)
	if !ok {
		h.fail(w, r, errNoIdentityService)
		return
	}
	id, err := is.WhoAmI(r.Context(), owner)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, id)
}
