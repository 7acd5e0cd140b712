package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"reflect"
	"strconv"
	"strings"

	"github.com/batchwork/batchwork/shared/control"
	"github.com/batchwork/batchwork/shared/spec"
)

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

// maxRedriveBody bounds the small JSON bodies of redrive and rerun.
const maxRedriveBody = 4096

// readSmallJSON decodes an optional JSON object body into v; an empty
// body leaves v as it is. Anything else than one JSON object of v's fields
// is a FieldError naming the field at fault (or body) in the API's words:
// the document promises no decoder text.
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
	if !json.Valid(body) {
		return &spec.FieldError{Field: "body", Message: "is not valid JSON"}
	}
	// null decodes into anything as nothing; an array or a scalar is not
	// the object the route takes.
	if t := bytes.TrimLeft(body, " \t\r\n"); len(t) == 0 || t[0] != '{' {
		return &spec.FieldError{Field: "body", Message: "must be a JSON object"}
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return decodeFieldError(err)
	}
	return nil
}

// decodeFieldError words a decoding error of a valid JSON object: a field
// of the wrong type or out of range, or a field the route does not take.
func decodeFieldError(err error) error {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) && te.Field != "" {
		msg := "has the wrong type"
		switch te.Type.Kind() {
		case reflect.Int, reflect.Int64, reflect.Int32:
			msg = "must be a whole number no larger than 9223372036854775807"
		case reflect.String:
			msg = "must be a string"
		}
		return &spec.FieldError{Field: te.Field, Message: msg}
	}
	// The decoder's only other error on a valid object: `json: unknown
	// field "x"`.
	if _, name, ok := strings.Cut(err.Error(), "unknown field "); ok {
		if f, uerr := strconv.Unquote(name); uerr == nil {
			return &spec.FieldError{Field: f, Message: "is not a field of this request"}
		}
	}
	return &spec.FieldError{Field: "body", Message: "is not the JSON object this route takes"}
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
	var body struct {
		Redrives *int `json:"redrives"`
	}
	if err := readSmallJSON(r, &body); err != nil {
		h.fail(w, r, err)
		return
	}
	st, err := h.svc.Redrive(r.Context(), control.RedriveRequest{Owner: owner, ID: r.PathValue("id"), Redrives: body.Redrives})
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
	// Sent, a key must be one, as submit's (an empty one would make a new
	// job on every retry); not sent, every rerun is a new job.
	if k, sent := r.Header["Idempotency-Key"]; sent && strings.TrimSpace(strings.Join(k, "")) == "" {
		h.fail(w, r, &spec.FieldError{Field: "Idempotency-Key", Message: "is required to be non-empty when sent"})
		return
	}
	var body struct {
		From string `json:"from"`
	}
	if err := readSmallJSON(r, &body); err != nil {
		h.fail(w, r, err)
		return
	}
	res, err := h.svc.Rerun(r.Context(), control.RerunRequest{
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
