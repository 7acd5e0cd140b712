// Package api is Batchwork's HTTP API: the same handler serves API Gateway
// (through functions/api) and the local runner.
package api

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"regexp"

	"github.com/batchwork/batchwork/shared/batch"
	"github.com/batchwork/batchwork/shared/control"
	"github.com/batchwork/batchwork/shared/spec"
)

// Service is what the API needs of the control plane.
type Service interface {
	Submit(context.Context, control.SubmitRequest) (control.SubmitResult, error)
	Status(ctx context.Context, owner, id string) (control.JobStatus, error)
}

// OwnerFunc extracts the caller's identity from a request. API Gateway
// gives the IAM principal; the local runner trusts a header on loopback.
type OwnerFunc func(*http.Request) (string, bool)

// Handler serves the API.
type Handler struct {
	svc   Service
	owner OwnerFunc
	log   *slog.Logger
	mux   *http.ServeMux
}

// MaxBody bounds request bodies; a spec is at most spec.MaxSpecBytes.
const MaxBody = spec.MaxSpecBytes + 1

// New returns the API handler.
func New(svc Service, owner OwnerFunc, log *slog.Logger) *Handler {
	h := &Handler{svc: svc, owner: owner, log: log, mux: http.NewServeMux()}
	h.mux.HandleFunc("POST /jobs", h.submit)
	h.mux.HandleFunc("GET /jobs/{id}", h.status)
	return h
}

func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) { h.mux.ServeHTTP(w, r) }

// Error is the API's error body. Message never carries internal errors.
type Error struct {
	Code    string `json:"code"`
	Message string `json:"message"`
	Field   string `json:"field,omitempty"`
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func (h *Handler) fail(w http.ResponseWriter, r *http.Request, err error) {
	var ve *spec.ValidationError
	var fe *spec.FieldError
	switch {
	case errors.As(err, &ve) && len(ve.Errors) > 0:
		writeJSON(w, http.StatusBadRequest, struct {
			Error
			Errors []spec.FieldError `json:"errors"`
		}{Error{Code: "invalid_spec", Message: ve.Error(), Field: ve.Errors[0].Field}, ve.Errors})
	case errors.As(err, &fe):
		writeJSON(w, http.StatusBadRequest, Error{Code: "invalid_request", Message: fe.Error(), Field: fe.Field})
	case errors.Is(err, batch.ErrNotFound):
		writeJSON(w, http.StatusNotFound, Error{Code: "not_found", Message: "no such job"})
	case errors.Is(err, batch.ErrIdempotencyConflict):
		writeJSON(w, http.StatusConflict, Error{Code: "idempotency_conflict", Message: "this Idempotency-Key was used with a different spec", Field: "Idempotency-Key"})
	default:
		h.log.Error("api request failed", "method", r.Method, "path", r.URL.Path, "err", err)
		writeJSON(w, http.StatusInternalServerError, Error{Code: "internal", Message: "internal error; see the service logs"})
	}
}

func (h *Handler) caller(w http.ResponseWriter, r *http.Request) (string, bool) {
	owner, ok := h.owner(r)
	if !ok || owner == "" {
		writeJSON(w, http.StatusUnauthorized, Error{Code: "unauthenticated", Message: "no caller identity"})
		return "", false
	}
	return owner, true
}

func (h *Handler) submit(w http.ResponseWriter, r *http.Request) {
	owner, ok := h.caller(w, r)
	if !ok {
		return
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, MaxBody))
	if err != nil {
		writeJSON(w, http.StatusBadRequest, Error{Code: "invalid_request", Message: "could not read body"})
		return
	}
	if len(body) >= MaxBody {
		writeJSON(w, http.StatusRequestEntityTooLarge, Error{Code: "too_large", Message: "spec is larger than 256 KiB", Field: "body"})
		return
	}
	res, err := h.svc.Submit(r.Context(), control.SubmitRequest{
		Owner: owner, IdempotencyKey: r.Header.Get("Idempotency-Key"), Spec: body,
	})
	if err != nil {
		var fe *spec.FieldError
		if errors.As(err, &fe) && fe.Field == "idempotencyKey" {
			fe.Field = "Idempotency-Key"
		}
		h.fail(w, r, err)
		return
	}
	status := http.StatusCreated
	if !res.Created {
		status = http.StatusOK
	}
	writeJSON(w, status, res)
}

var idRE = regexp.MustCompile(`^j[0-9a-f]{11}[0-9a-f]{10}$`)

func (h *Handler) status(w http.ResponseWriter, r *http.Request) {
	owner, ok := h.caller(w, r)
	if !ok {
		return
	}
	id := r.PathValue("id")
	if !idRE.MatchString(id) {
		writeJSON(w, http.StatusBadRequest, Error{Code: "invalid_request", Message: "not a job id", Field: "id"})
		return
	}
	st, err := h.svc.Status(r.Context(), owner, id)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, st)
}
