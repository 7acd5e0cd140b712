package client

import (
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/batchwork/batchwork/shared/spec"
)

// APIError is an error answer of the API. It matches, with errors.Is, the
// sentinel errors of its kind (ErrNotFound, ErrConflict, ...), so a caller
// acts on the kind and reads Code only for the reason within it.
type APIError struct {
	Status  int
	Code    string `json:"code"`
	Message string `json:"message"`
	Field   string `json:"field"`
	// Errors lists every problem of an invalid spec (Code invalid_spec):
	// field, message and YAML line.
	Errors []spec.FieldError `json:"errors"`
	// ReusedBy names, for Code reused_by, the reruns that reuse the job's
	// outputs in place.
	ReusedBy []string `json:"reusedBy"`
}

func (e *APIError) Error() string {
	// A bad parameter's message reads after its name ("limit: must be...").
	if e.Code == CodeInvalidRequest && e.Field != "" && !strings.HasPrefix(e.Message, e.Field) {
		return e.Field + ": " + e.Message
	}
	return e.Message
}

// Is matches the sentinel errors by the answer's HTTP status, which a
// gateway's own answers (a 403 of API Gateway, a 429 of its throttling)
// share with the API's, and ErrEnded and ErrRunning by Code.
func (e *APIError) Is(target error) bool {
	switch target {
	case ErrInvalid:
		return e.Status == http.StatusBadRequest || e.Status == http.StatusRequestEntityTooLarge
	case ErrUnauthorized:
		return e.Status == http.StatusUnauthorized || e.Status == http.StatusForbidden
	case ErrNotFound:
		return e.Status == http.StatusNotFound
	case ErrConflict:
		return e.Status == http.StatusConflict
	case ErrDataDeleted:
		return e.Status == http.StatusGone
	case ErrThrottled:
		return e.Status == http.StatusTooManyRequests
	case ErrUnavailable:
		return e.Status == http.StatusNotImplemented
	case ErrEnded:
		return e.Code == CodeJobEnded || e.Code == CodeJobPublishing
	case ErrRunning:
		return e.Code == CodeJobRunning
	}
	return false
}

// The kinds of API errors, for errors.Is. An *APIError is the error; these
// say what a caller can do about it.
var (
	// ErrInvalid: the request or the spec is wrong (400, 413); Field
	// names what, and Errors lists a spec's problems. Sending it again
	// will not help.
	ErrInvalid = errors.New("invalid request")
	// ErrUnauthorized: no credentials, rejected ones (401), or the caller
	// may not call the route (403).
	ErrUnauthorized = errors.New("not authorized")
	// ErrNotFound: no such job or schedule, or not the caller's: another
	// owner's is not found either, so that its existence does not leak.
	ErrNotFound = errors.New("not found")
	// ErrConflict: the job's state refuses the request (it ended, is
	// running, its outputs are reused), or an Idempotency-Key was used
	// with another spec (409). Code says which.
	ErrConflict = errors.New("conflict")
	// ErrEnded: the job already ended, or is publishing its outputs, so a
	// cancel cannot stop it (a conflict).
	ErrEnded = errors.New("job already ended")
	// ErrRunning: the job has not ended, so its data or records cannot be
	// deleted (a conflict): cancel it first.
	ErrRunning = errors.New("job has not ended")
	// ErrDataDeleted: the job's data was deleted; its outputs are gone
	// (410).
	ErrDataDeleted = errors.New("data deleted")
	// ErrThrottled: a quota or the gateway's throttling (429), still so
	// after the client's retries.
	ErrThrottled = errors.New("throttled")
	// ErrUnavailable: the installation cannot do this (501): it presigns
	// no URLs, or keeps no logs the API can read.
	ErrUnavailable = errors.New("unavailable in this installation")
)

// The API's error codes (APIError.Code), as shared/api/openapi.yaml lists
// them. An answer that is not the API's (a gateway's, a proxy's) has the
// code "http_" and its status, e.g. http_403.
const (
	CodeInvalidRequest      = "invalid_request"
	CodeInvalidSpec         = "invalid_spec"
	CodeTooLarge            = "too_large"
	CodeUnauthenticated     = "unauthenticated"
	CodeNotFound            = "not_found"
	CodeMethodNotAllowed    = "method_not_allowed"
	CodeIdempotencyConflict = "idempotency_conflict"
	CodeJobEnded            = "job_ended"
	CodeJobPublishing       = "job_publishing"
	CodeJobRunning          = "job_running"
	CodeDataDeleted         = "data_deleted"
	CodePresignUnavailable  = "presign_unavailable"
	CodeLogsUnavailable     = "logs_unavailable"
	CodeQuota               = "quota"
	CodeInternal            = "internal"
	CodeOutputClaimed       = "output_claimed"
	CodeReusedBy            = "reused_by"
	// Why a redrive or rerun is refused (409).
	CodeJobSucceeded      = "job_succeeded"
	CodeJobCancelled      = "job_cancelled"
	CodeJobState          = "job_state"
	CodeDeadlinePassed    = "deadline_passed"
	CodeNothingToRedrive  = "nothing_to_redrive"
	CodeRedriveCount      = "redrive_count"
	CodeRedriveConflict   = "redrive_conflict"
	CodeStageNotCompleted = "stage_not_completed"
	CodeSourceDeleted     = "source_deleted"
	CodeOutputsExpiring   = "outputs_expiring"
)

// AuthError is a request that could not be authenticated before it was
// sent: no AWS credentials or configuration, or a local token file that
// is there but unusable.
type AuthError struct{ Err error }

func (e *AuthError) Error() string { return e.Err.Error() }
func (e *AuthError) Unwrap() error { return e.Err }

// NetError is a request that got no answer from the API at Endpoint.
type NetError struct {
	Err      error
	Endpoint string
	// Hint, when set, ends the message: what the caller may check.
	Hint string
}

func (e *NetError) Error() string {
	msg := fmt.Sprintf("cannot reach the API at %s: %v", e.Endpoint, e.Err)
	if e.Hint != "" {
		msg += " (" + e.Hint + ")"
	}
	return msg
}
func (e *NetError) Unwrap() error { return e.Err }

// ErrNoProgress is DeleteJob's and DeleteData's error when the API says
// something is left but deleted nothing more: calling again would loop.
var ErrNoProgress = errors.New("the API deleted nothing more but says some is left; try again later")
