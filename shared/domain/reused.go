package domain

import (
	"errors"
	"fmt"
	"strings"
)

// ErrReused means a job's outputs are reused in place by reruns that
// still exist with their data (a rerun's manifests name the original's
// objects): deleting the job or its data would change their published
// outputs, which never change. The API answers 409 reused_by.
var ErrReused = errors.New("the job's outputs are reused by other jobs")

// ReusedError names the jobs that reuse a job's outputs.
type ReusedError struct {
	ID string
	By []string
}

func (e *ReusedError) Error() string {
	return fmt.Sprintf("job %s's outputs are reused by job(s) %s; delete those (or their data) first", e.ID, strings.Join(e.By, ", "))
}
func (e *ReusedError) Unwrap() error { return ErrReused }
