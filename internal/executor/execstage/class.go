package execstage

import (
	"errors"
	"fmt"
	"os/exec"
	"syscall"

	"github.com/batchwork/batchwork/shared/domain"
)

// ExitPermanent is the exit status with which an exec stage's program says
// its error is permanent (batchwork.Permanent for a Go task function): the
// task fails at once, without its remaining attempts. It is sysexits.h's
// EX_DATAERR ("the input data was incorrect"), which neither shells nor
// language runtimes use for their own failures, so a program does not
// exit with it by accident. Any other non-zero status is retried.
const ExitPermanent = 65

// exitError is the error of a program that exited non-zero (tail: the last
// stderr lines), classed: ExitPermanent is permanent; SIGKILL that the
// executor did not send (the task's context was live) is the kernel's
// out-of-memory killer, the only other sender of SIGKILL to an executor's
// child, so the attempt is retried on a larger executor.
func exitError(name string, e *exec.ExitError, tail string) error {
	msg := fmt.Sprintf("exec %s: %s%s", name, exitDescription(e), tail)
	if e.ExitCode() == ExitPermanent {
		return &classedError{msg: msg, class: domain.ErrPermanent}
	}
	if ws, ok := e.Sys().(syscall.WaitStatus); ok && ws.Signaled() && ws.Signal() == syscall.SIGKILL {
		return &classedError{msg: fmt.Sprintf("exec %s: %s (out of memory)%s", name, exitDescription(e), tail), class: domain.ErrOutOfMemory}
	}
	return errors.New(msg)
}

// classedError is an error whose message is its own and whose class
// (domain.ClassOf) is that of the sentinel it wraps.
type classedError struct {
	msg   string
	class error
}

func (e *classedError) Error() string { return e.msg }
func (e *classedError) Unwrap() error { return e.class }
