package executor

import (
	"encoding/json"
	"errors"
	"fmt"
	"unicode/utf8"

	"github.com/batchwork/batchwork/shared/domain"
	"github.com/batchwork/batchwork/shared/lambdatask"
)

// classedError is an error whose message is its own and whose class
// (domain.ClassOf) is that of the sentinel it wraps.
type classedError struct {
	msg   string
	class error
}

func (e *classedError) Error() string { return e.msg }
func (e *classedError) Unwrap() error { return e.class }

// lambdaFunctionError is the error of an invocation Lambda answered with a
// function error (fnErr: "Unhandled", "Handled"), classed: the runtime
// running out of memory is an out-of-memory end, anything else plain.
func lambdaFunctionError(fnErr string, raw []byte) error {
	msg := fmt.Sprintf("function error (%s): %s", fnErr, lambdatask.FunctionErrorMessage(raw))
	var e struct {
		Type string `json:"errorType"`
	}
	if json.Unmarshal(raw, &e) == nil && e.Type == lambdatask.OutOfMemory {
		return &classedError{msg: msg, class: domain.ErrOutOfMemory}
	}
	return errors.New(msg)
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	// Cut on a rune boundary: the message is stored as a string.
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "..."
}
