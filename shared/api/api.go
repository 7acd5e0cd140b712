// Package api is Batchwork's HTTP API: the same handler serves API Gateway
// (through functions/api) and the local runner. openapi.yaml in this
// directory is its contract; the tests hold the handlers to it.
package api

import (
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/batchwork/batchwork/shared/control"
	"github.com/batchwork/batchwork/shared/domain"
	"github.com/batchwork/batchwork/shared/logs"
	"github.com/batchwork/batchwork/shared/principal"
	"github.com/batchwork/batchwork/shared/spec"
	sm "github.com/batchwork/batchwork/statemachine"
)

// OpenAPI is the API's OpenAPI 3 document, served at GET /openapi.yaml.
//
//go:embed openapi.yaml
var OpenAPI []byte

// Service is the control plane as the API's routes need it: every method
// a route calls, so a handler never asks whether a capability exists.
type Service interface {
	// Jobs: submit, read, and the reads a job's owner pages through.
	Submit(context.Context, control.SubmitRequest) (control.SubmitResult, error)
	Status(ctx context.Context, owner, id string) (control.JobStatus, error)
	ListJobs(context.Context, control.ListJobsRequest) (control.JobList, error)
	ListTasks(context.Context, control.ListTasksRequest) (control.TaskList, error)
	History(context.Context, control.HistoryRequest) (control.History, error)
	Outputs(context.Context, control.OutputsRequest) (control.OutputList, error)
	BadRecords(context.Context, control.BadRecordsRequest) (control.BadRecordPage, error)
	JobLogs(context.Context, control.LogsRequest) (logs.Page, error)

	// Operations on a job: stop it, run it again, delete it.
	Cancel(ctx context.Context, owner, id string) (control.JobStatus, error)
	CancelTask(context.Context, control.CancelTaskRequest) (control.TaskCancellation, error)
	Redrive(context.Context, control.RedriveRequest) (control.JobStatus, error)
	Rerun(context.Context, control.RerunRequest) (control.SubmitResult, error)
	DeleteData(ctx context.Context, owner, id string) (control.DataDeletion, error)
	DeleteJob(ctx context.Context, owner, id string) (control.JobDeletion, error)

	// Schedules: an owner's recurring submissions and their runs.
	CreateSchedule(ctx context.Context, owner string, body []byte) (control.ScheduleView, error)
	GetSchedule(ctx context.Context, owner, id string) (control.ScheduleView, error)
	ListSchedules(ctx context.Context, owner string, limit int, cursor string) (control.ScheduleList, error)
	PauseSchedule(ctx context.Context, owner, id string) (control.ScheduleView, error)
	ResumeSchedule(ctx context.Context, owner, id string) (control.ScheduleView, error)
	DeleteSchedule(ctx context.Context, owner, id string) error
	ScheduleRuns(ctx context.Context, owner, id string, limit int, cursor string) (control.RunList, error)

	// Identity: the caller's owner and inputs area.
	WhoAmI(ctx context.Context, owner string) (control.Identity, error)
}

var _ Service = (*control.Service)(nil)

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

// Route is one route of the API.
type Route struct {
	Method, Path string
	// Query lists the query parameters the route accepts; any other is a
	// 400 naming it.
	Query []string
}

// Routes lists every route, as the OpenAPI document must.
var Routes = []Route{
	{"POST", "/jobs", []string{"param", "at"}},
	{"GET", "/jobs", []string{"status", "name", "limit", "cursor"}},
	{"GET", "/jobs/{id}", nil},
	{"GET", "/jobs/{id}/tasks", []string{"stage", "state", "limit", "cursor"}},
	{"GET", "/jobs/{id}/history", []string{"limit", "cursor"}},
	{"POST", "/jobs/{id}/cancel", []string{"task"}},
	{"GET", "/jobs/{id}/manifest", []string{"stage", "presign", "limit", "cursor"}},
	{"GET", "/openapi.yaml", nil},
}

func init() { Routes = append(Routes, scheduleRoutes...) } // schedules.go

// New returns the API handler.
func New(svc Service, owner OwnerFunc, log *slog.Logger) *Handler {
	h := &Handler{svc: svc, owner: owner, log: log, mux: http.NewServeMux()}
	handlers := map[string]func(http.ResponseWriter, *http.Request, string){
		"POST /jobs":              h.submit,
		"GET /jobs":               h.list,
		"GET /jobs/{id}":          h.status,
		"GET /jobs/{id}/tasks":    h.tasks,
		"GET /jobs/{id}/history":  h.history,
		"POST /jobs/{id}/cancel":  h.cancel,
		"GET /jobs/{id}/manifest": h.manifest,
	}
	maps.Copy(handlers, h.scheduleHandlers())
	maps.Copy(handlers, h.whoamiHandlers())    // whoami.go
	maps.Copy(handlers, h.dataHandlers())      // datadelete.go
	maps.Copy(handlers, h.jobDeleteHandlers()) // jobdelete.go
	maps.Copy(handlers, h.logHandlers())       // logs.go
	maps.Copy(handlers, h.badRecordHandlers()) // badrecords.go
	maps.Copy(handlers, h.redriveHandlers())   // redrive.go
	h.mux.HandleFunc("GET /openapi.yaml", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/yaml")
		_, _ = w.Write(OpenAPI)
	})
	for _, rt := range Routes {
		pattern := rt.Method + " " + rt.Path
		fn, ok := handlers[pattern]
		if !ok {
			continue // the document itself, registered above
		}
		allowed := rt.Query
		h.mux.HandleFunc(pattern, func(w http.ResponseWriter, r *http.Request) {
			owner, ok := h.owner(r)
			if !ok || owner == "" {
				writeJSON(w, http.StatusUnauthorized, Error{Code: "unauthenticated", Message: "no caller identity"})
				return
			}
			if err := checkQuery(r.URL.Query(), allowed); err != nil {
				h.fail(w, r, err)
				return
			}
			// The audit trail: who (the principal, e.g. a role's session)
			// acted as which owner.
			h.log.Info("api request", "route", pattern, "owner", owner, "principal", r.Header.Get(principal.Header))
			fn(w, r, owner)
		})
	}
	return h
}

// ServeHTTP routes a request. Unknown paths and methods get the API's JSON
// errors (404, or 405 with Allow), not the mux's plain text.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if _, pattern := h.mux.Handler(r); pattern != "" {
		h.mux.ServeHTTP(w, r)
		return
	}
	var allow []string
	for _, m := range []string{http.MethodGet, http.MethodPost, http.MethodDelete} {
		probe := r.Clone(r.Context())
		probe.Method = m
		if _, p := h.mux.Handler(probe); p != "" {
			allow = append(allow, m)
		}
	}
	if len(allow) > 0 {
		w.Header().Set("Allow", strings.Join(allow, ", "))
		writeJSON(w, http.StatusMethodNotAllowed, Error{Code: "method_not_allowed", Message: r.Method + " is not allowed here"})
		return
	}
	writeJSON(w, http.StatusNotFound, Error{Code: "not_found", Message: "no such route"})
}

// Error is the API's error body. Message never carries internal errors;
// Field names the offending field, header or parameter, or is empty.
type Error struct {
	Code    string `json:"code"`
	Message string `json:"message"`
	Field   string `json:"field"`
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func (h *Handler) fail(w http.ResponseWriter, r *http.Request, err error) {
	var ve *spec.ValidationError
	var fe *spec.FieldError
	var ended *control.JobEndedError
	var running *control.JobRunningError
	var gone *control.DataDeletedError
	var reused *domain.ReusedError
	var claimed *control.OutputClaimedError
	switch {
	case errors.As(err, &ve) && len(ve.Errors) > 0:
		writeJSON(w, http.StatusBadRequest, struct {
			Error
			Errors []spec.FieldError `json:"errors"`
		}{Error{Code: "invalid_spec", Message: ve.Error(), Field: ve.Errors[0].Field}, ve.Errors})
	case errors.As(err, &fe):
		writeJSON(w, http.StatusBadRequest, Error{Code: "invalid_request", Message: fe.Error(), Field: fe.Field})
	case errors.Is(err, domain.ErrNotFound):
		writeJSON(w, http.StatusNotFound, Error{Code: "not_found", Message: "no such job", Field: "id"})
	case errors.Is(err, domain.ErrIdempotencyConflict):
		writeJSON(w, http.StatusConflict, Error{Code: "idempotency_conflict", Message: "this Idempotency-Key was used with a different spec", Field: "Idempotency-Key"})
	case errors.Is(err, control.ErrQuota):
		writeJSON(w, http.StatusTooManyRequests, Error{Code: "quota", Message: err.Error()})
	case errors.As(err, &ended):
		code := "job_ended"
		if ended.State == sm.JobPublishing {
			code = "job_publishing" // its work is done: a cancel cannot stop it
		}
		writeJSON(w, http.StatusConflict, Error{Code: code, Message: ended.Error(), Field: "id"})
	case errors.As(err, &running):
		writeJSON(w, http.StatusConflict, Error{Code: "job_running", Message: running.Error(), Field: "id"})
	case errors.As(err, &gone):
		writeJSON(w, http.StatusGone, Error{Code: "data_deleted", Message: gone.Error(), Field: "id"})
	case errors.As(err, &claimed):
		writeJSON(w, http.StatusConflict, Error{Code: "output_claimed", Message: claimed.Error(), Field: "output"})
	case errors.As(err, &reused):
		writeJSON(w, http.StatusConflict, struct {
			Error
			ReusedBy []string `json:"reusedBy"`
		}{Error{Code: "reused_by", Message: reused.Error(), Field: "id"}, reused.By})
	case errors.Is(err, control.ErrPresignUnavailable):
		writeJSON(w, http.StatusNotImplemented, Error{Code: "presign_unavailable", Message: "this installation cannot presign URLs", Field: "presign"})
	default:
		h.log.Error("api request failed", "method", r.Method, "path", r.URL.Path, "err", err)
		writeJSON(w, http.StatusInternalServerError, Error{Code: "internal", Message: "internal error; see the service logs"})
	}
}

// checkQuery rejects parameters the route does not take and repeated ones,
// so a typo ("stauts=FAILED") is an error rather than an unfiltered list.
func checkQuery(q url.Values, allowed []string) error {
	for name, vs := range q {
		if !slices.Contains(allowed, name) {
			return &spec.FieldError{Field: name, Message: "is not a parameter of this route"}
		}
		if len(vs) > 1 && !repeatable(name) { // params.go
			return &spec.FieldError{Field: name, Message: "is given more than once"}
		}
	}
	return nil
}

func intParam(q url.Values, name string) (int, error) {
	v := q.Get(name)
	if v == "" {
		return 0, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil {
		return 0, &spec.FieldError{Field: name, Message: "must be an integer"}
	}
	if n <= 0 {
		return 0, &spec.FieldError{Field: name, Message: "must be positive"}
	}
	return n, nil
}

func boolParam(q url.Values, name string) (bool, error) {
	switch q.Get(name) {
	case "", "false", "0":
		return false, nil
	case "true", "1":
		return true, nil
	}
	return false, &spec.FieldError{Field: name, Message: "must be true or false"}
}

func (h *Handler) submit(w http.ResponseWriter, r *http.Request, owner string) {
	body, err := io.ReadAll(io.LimitReader(r.Body, MaxBody))
	if err != nil {
		writeJSON(w, http.StatusBadRequest, Error{Code: "invalid_request", Message: "could not read body", Field: "body"})
		return
	}
	if len(body) >= MaxBody {
		writeJSON(w, http.StatusRequestEntityTooLarge, Error{Code: "too_large", Message: "spec is larger than 256 KiB", Field: "body"})
		return
	}
	params, err := runParams(r.URL.Query()) // params.go
	if err != nil {
		h.fail(w, r, err)
		return
	}
	at, err := startAt(r.URL.Query()) // startat.go
	if err != nil {
		h.fail(w, r, err)
		return
	}
	res, err := h.svc.Submit(r.Context(), control.SubmitRequest{
		Owner: owner, IdempotencyKey: r.Header.Get("Idempotency-Key"), Spec: body, Params: params, At: at,
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

func (h *Handler) status(w http.ResponseWriter, r *http.Request, owner string) {
	st, err := h.svc.Status(r.Context(), owner, r.PathValue("id"))
	if err != nil {
		h.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, st)
}

func (h *Handler) list(w http.ResponseWriter, r *http.Request, owner string) {
	q := r.URL.Query()
	limit, err := intParam(q, "limit")
	if err != nil {
		h.fail(w, r, err)
		return
	}
	res, err := h.svc.ListJobs(r.Context(), control.ListJobsRequest{
		Owner: owner, State: q.Get("status"), Name: q.Get("name"), Limit: limit, Cursor: q.Get("cursor"),
	})
	if err != nil {
		h.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, res)
}

func (h *Handler) tasks(w http.ResponseWriter, r *http.Request, owner string) {
	q := r.URL.Query()
	limit, err := intParam(q, "limit")
	if err != nil {
		h.fail(w, r, err)
		return
	}
	res, err := h.svc.ListTasks(r.Context(), control.ListTasksRequest{
		Owner: owner, ID: r.PathValue("id"), Stage: q.Get("stage"), State: q.Get("state"), Limit: limit, Cursor: q.Get("cursor"),
	})
	if err != nil {
		h.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, res)
}

func (h *Handler) history(w http.ResponseWriter, r *http.Request, owner string) {
	q := r.URL.Query()
	limit, err := intParam(q, "limit")
	if err != nil {
		h.fail(w, r, err)
		return
	}
	res, err := h.svc.History(r.Context(), control.HistoryRequest{Owner: owner, ID: r.PathValue("id"), Limit: limit, Cursor: q.Get("cursor")})
	if err != nil {
		h.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, res)
}

func (h *Handler) cancel(w http.ResponseWriter, r *http.Request, owner string) {
	if r.URL.Query().Has("task") {
		h.cancelTask(w, r, owner) // taskcancel.go
		return
	}
	st, err := h.svc.Cancel(r.Context(), owner, r.PathValue("id"))
	if err != nil {
		h.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, st)
}

func (h *Handler) manifest(w http.ResponseWriter, r *http.Request, owner string) {
	q := r.URL.Query()
	limit, err := intParam(q, "limit")
	if err != nil {
		h.fail(w, r, err)
		return
	}
	presign, err := boolParam(q, "presign")
	if err != nil {
		h.fail(w, r, err)
		return
	}
	res, err := h.svc.Outputs(r.Context(), control.OutputsRequest{
		Owner: owner, ID: r.PathValue("id"), Stage: q.Get("stage"), Presign: presign, Limit: limit, Cursor: q.Get("cursor"),
	})
	if err != nil {
		h.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, res)
}
