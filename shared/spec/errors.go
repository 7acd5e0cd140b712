package spec

import (
	"fmt"
	"strconv"
	"strings"
)

// FieldError is one problem with a spec, tied to the field it concerns.
// The JSON tags shape it in API error responses.
type FieldError struct {
	// Field is the JSON path of the field, e.g. "stages[2].partitions.count".
	// It is empty for problems with the spec as a whole (size, syntax).
	Field   string `json:"field,omitempty"`
	Message string `json:"message"`
	// Line is the 1-based line in the YAML source, or 0 when unknown: for
	// JSON input and for jobs that were not parsed from a file.
	Line int `json:"line,omitempty"`
}

func (e FieldError) Error() string {
	var b strings.Builder
	if e.Field != "" {
		b.WriteString(e.Field)
		b.WriteString(": ")
	}
	b.WriteString(e.Message)
	if e.Line > 0 {
		b.WriteString(" (line ")
		b.WriteString(strconv.Itoa(e.Line))
		b.WriteString(")")
	}
	return b.String()
}

// ValidationError lists every problem found in a spec, so a user can fix
// them all in one round trip; past 100 problems the rest are summarized in
// a final entry. Parse and Validate report all failures as a
// *ValidationError.
type ValidationError struct {
	Errors []FieldError
}

func (e *ValidationError) Error() string {
	msgs := make([]string, len(e.Errors))
	for i, fe := range e.Errors {
		msgs[i] = fe.Error()
	}
	return strings.Join(msgs, "; ")
}

// Unwrap exposes the individual field errors, as *FieldError, to
// errors.As.
func (e *ValidationError) Unwrap() []error {
	errs := make([]error, len(e.Errors))
	for i := range e.Errors {
		errs[i] = &e.Errors[i]
	}
	return errs
}

// errorList accumulates FieldErrors.
type errorList []FieldError

func (l *errorList) add(field, msg string) {
	*l = append(*l, FieldError{Field: field, Message: msg})
}

// maxErrors caps the errors reported for one spec. A 256 KiB spec of
// junk can hold a hundred thousand errors; their text would be far larger
// than the spec and than an API response may be.
const maxErrors = 100

// err returns the list as a *ValidationError, or nil when empty. It
// returns a plain error so an empty list never becomes a non-nil
// interface holding a nil pointer.
func (l errorList) err() error {
	if len(l) == 0 {
		return nil
	}
	if len(l) > maxErrors {
		more := len(l) - maxErrors
		l = append(l[:maxErrors:maxErrors], FieldError{Message: fmt.Sprintf("and %d more errors", more)})
	}
	return &ValidationError{Errors: l}
}
