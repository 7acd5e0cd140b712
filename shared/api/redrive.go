package api

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"

	"github.com/batchwork/batchwork/shared/control"
	"github.com/batchwork/batchwork/shared/spec"
)

// RedriveService is what POST /jobs/{id}/redrive and POST
// /jobs/{id}/rerun need of the control plane. Separate from Service, like
// BadRecordService, so a control plane without it still serves the rest.
type RedriveService interface {
	Redrive(ctx context.Context, req control.RedriveRequest) (control.JobStatus, error)
	Rerun(ctx context.Context, req control.RerunRequest) (control.SubmitResult, error)
}

var _ RedriveService = (*control.Service)(nil)

// redriveRoutes are registered with the job routes in New.
var redriveRoutes = []Route{
	{"POST", "/jobs/{id}/redrive", nil},
	{"POST", "/jobs/{id}/rerun", nil},
}

func init() { Routes = append(Routes, redriveRoutes...) }

func (h *Handler) redriveHandlers() map[string]func(http.ResponseWriter, *http.Request, string) {
	return map[string]func(http.ResponseWriter, *http.Request, string){
		"POST /jobs/{id}/redrive": h.redrive,
		"POST /jobs/{id}/rerun":   h.rerun,
	}
}

var errNoRedriveService = errors.New("the control plane behind this API cannot redrive or rerun jobs")

// maxRedriveBody bounds the small JSON bodies of redrive and rerun.
const maxRedriveBody = 4096

// readSmallJSON decodes an optional JSON object body into v; an empty
// body leaves v as it is. Unknown fields are an error naming them.
func readSmallJSON(r *http.Request, v any) error {
	body, err := io.ReadAll(io.LimitReader(r.Body, maxRedriveBody+1))
	if err != nil {
		return &spec.FieldError{Field: "body", Message: "could not be read"}
	}
	if len(body) > maxRedriveBody {
		return &spec.FieldError{Field: "body", Message: "is larger than 4 KiB"}
	}
	if len(body) == 0 {
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return &spec.FieldError{Field: "body", Message: "is not the expected JSON object: " + err.Error()}
	}
	return nil
}

// redriveConflict answers a redrive or rerun the job's state refuses:
// 409 with the reason's code.
func (h *Handler) redriveConflict(w http.ResponseWriter, r *http.Request, err error) {
	var rc *control.RedriveError
	if errors.As(err, &rc) {
		writeJSON(w, http.StatusConflict, Error{Code: rc.Code, Message: rc.Error(), Field: "id"})
		return
	}
	h.fail(w, r, err)
}

// redrive retries a FAILED job in place: body {"redrives": N}, the
// redrive count the caller saw (optional), which makes a repeat safe.
func (h *Handler) redrive(w http.ResponseWriter, r *http.Request, owner string) {
	rs, ok := h.svc.(RedriveService)
	if !ok {
		h.fail(w, r, errNoRedriveService)
		return
	}
	var body struct {
		Redrives *int `json:"redrives"`
	}
	if err := readSmallJSON(r, &body); err != nil {
		h.fail(w, r, err)
		return
	}
	st, err := rs.Redrive(r.Context(), control.RedriveRequest{Owner: owner, ID: r.PathValue("id"), Redrives: body.Redrives})
	if err != nil {
		h.redriveConflict(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, st)
}

// rerun submits a new job with an ended job's spec that reuses the
// committed outputs of the stages it does not run: body {"from": STAGE}
// (optional); the Idempotency-Key header as for POST /jobs.
func (h *Handler) rerun(w http.ResponseWriter, r *http.Request, owner string) {
	rs, ok := h.svc.(RedriveService)
	if !ok {
		h.fail(w, r, errNoRedriveService)
		return
	}
	var body struct {
		From string `json:"from"`
	}
	if err := readSmallJSON(r, &body); err != nil {
		h.fail(w, r, err)
		return
	}
	res, err := rs.Rerun(r.Context(), control.RerunRequest{
		Owner: owner, ID: r.PathValue("id"), From: body.From, IdempotencyKey: r.Header.Get("Idempotency-Key"),
	})
	if err != nil {
		var fe *spec.FieldError
		if errors.As(err, &fe) && fe.Field == "idempotencyKey" {
			fe.Field = "Idempotency-Key"
		}
		h.redriveConflict(w, r, err)
		return
	}
	status := http.StatusCreated
	if !res.Created {
		status = http.StatusOK
	}
	writeJSON(w, status, res)
}
