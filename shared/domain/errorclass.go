package domain

import (
	"errors"
	"fmt"
	"time"
)

// ErrorClass says what kind of error ended a task's attempt, which decides
// what happens next: an ordinary error or a timeout is retried while
// attempts are left, a permanent error fails the task at once, and an
// out-of-memory end is retried on the next executor size up.
type ErrorClass string

const (
	// ClassNone: the task has not failed an attempt (or did so before
	// classes were recorded).
	ClassNone ErrorClass = ""
	// ClassError: an ordinary error; retried while attempts are left.
	ClassError ErrorClass = "error"
	// ClassPermanent: an error wrapping ErrPermanent; the task fails at
	// once, without its remaining attempts.
	ClassPermanent ErrorClass = "permanent"
	// ClassTimedOut: the attempt ran past its stage's timeout and was
	// cancelled; retried like an ordinary error.
	ClassTimedOut ErrorClass = "timed_out"
	// ClassOutOfMemory: the attempt ran out of memory; retried on the
	// next executor size up to the stage's maximum.
	ClassOutOfMemory ErrorClass = "out_of_memory"
	// ClassLeaseExpired: the attempt's executor stopped renewing its lease
	// (it died, hung or lost the network).
	ClassLeaseExpired ErrorClass = "lease_expired"
	// ClassInputChanged: an input object changed after its stage was
	// planned (ErrInputChanged). Permanent, and never tolerated: a job that
	// went on without the object would succeed having silently skipped
	// part of its input.
	ClassInputChanged ErrorClass = "input_changed"
	// ClassCancelled: the job's owner cancelled the task (its running
	// attempt, or the task while it waited). Permanent: no retry; its
	// stage may tolerate it like any other failure.
	ClassCancelled ErrorClass = "cancelled"
)

// ErrInputChanged is the outcome of reading an input object whose ETag is
// no longer the one its stage was planned with (shared/blob pins reads).
var ErrInputChanged = errors.New("input changed while the job ran")

// Permanent reports whether an attempt ending with class c fails its task
// at once, whatever attempts are left.
func (c ErrorClass) Permanent() bool {
	return c == ClassPermanent || c == ClassInputChanged || c == ClassCancelled
}

// Tolerable reports whether a task that failed with class c may count
// against its stage's toleratedFailures instead of failing the job.
func (c ErrorClass) Tolerable() bool { return c != ClassInputChanged }

// Valid reports whether c is one of the classes above.
func (c ErrorClass) Valid() bool {
	switch c {
	case ClassNone, ClassError, ClassPermanent, ClassTimedOut, ClassOutOfMemory, ClassLeaseExpired, ClassInputChanged, ClassCancelled:
		return true
	}
	return false
}

// Ended says, for a FAILED task, what ended it: the words `batchwork
// status` and `batchwork tasks` show.
func (c ErrorClass) Ended() string {
	switch c {
	case ClassPermanent:
		return "permanent error"
	case ClassTimedOut:
		return "timed out"
	case ClassOutOfMemory:
		return "out of memory"
	case ClassLeaseExpired:
		return "lease expired"
	case ClassInputChanged:
		return "input changed"
	case ClassCancelled:
		return "cancelled"
	}
	return "retries exhausted"
}

var (
	// ErrTimedOut is the cause an attempt is cancelled with when it has run
	// its stage's timeout.
	ErrTimedOut = errors.New("timed out")
	// ErrOutOfMemory marks an attempt that ran out of memory: an exec
	// child killed by the kernel's OOM killer, a Lambda function's runtime
	// exit, or the executor's own watchdog.
	ErrOutOfMemory = errors.New("out of memory")
)

// TimeoutError is an attempt's timeout: it wraps ErrTimedOut and says after
// how long, for the task's history ("timed out after 30s").
type TimeoutError struct{ After time.Duration }

func (e *TimeoutError) Error() string { return fmt.Sprintf("timed out after %s", e.After) }
func (e *TimeoutError) Unwrap() error { return ErrTimedOut }

// ClassOf classifies an attempt's error: permanent before out-of-memory
// before timed out, so that a function that wraps a timeout as permanent
// is not retried.
func ClassOf(err error) ErrorClass {
	switch {
	case err == nil:
		return ClassNone
	case errors.Is(err, ErrInputChanged):
		return ClassInputChanged
	case errors.Is(err, ErrPermanent):
		return ClassPermanent
	case errors.Is(err, ErrOutOfMemory):
		return ClassOutOfMemory
	case errors.Is(err, ErrTimedOut):
		return ClassTimedOut
	}
	return ClassError
}
