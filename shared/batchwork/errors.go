package batchwork

import (
	"errors"

	"github.com/batchwork/batchwork/shared/domain"
)

// ErrPermanent is what a permanent error wraps: errors.Is(err,
// ErrPermanent) reports whether Permanent (or another wrapper of it) made
// err.
var ErrPermanent = domain.ErrPermanent

// Permanent marks err as one no retry can fix (a malformed record, a
// missing input, a request the other side refused for good). A task
// function that returns it fails its task at once, without the attempts
// it has left; its stage and job then fail as with any failed task (or,
// within the stage's toleratedFailures, the job goes on). Any other error
// is retried. Permanent(nil) is nil, so `return batchwork.Permanent(err)`
// is safe after a call that may succeed.
func Permanent(err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, domain.ErrPermanent) {
		return err
	}
	return &permanentError{err: err}
}

// IsPermanent reports whether err is a permanent error.
func IsPermanent(err error) bool { return errors.Is(err, domain.ErrPermanent) }

// permanentError keeps err's message and chain (the class is shown apart
// from the message) (errors.Is and errors.As
// still find what err wraps) and adds domain.ErrPermanent to it.
type permanentError struct{ err error }

func (e *permanentError) Error() string   { return e.err.Error() }
func (e *permanentError) Unwrap() []error { return []error{e.err, domain.ErrPermanent} }
