package control

import (
	"errors"
	"fmt"
	"testing"

	"github.com/batchwork/batchwork/shared/control/schedules"
	"github.com/batchwork/batchwork/shared/domain"
	"github.com/batchwork/batchwork/shared/spec"
)

// A schedule's firing records a refusal no retry changes as a skipped
// run and moves on (fireEntry), and retries anything else: holding the
// shared watermark for a refusal would stop every owner's schedules.
func TestRefusedForGood(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		err  error
		want bool
	}{
		{"a field error (a function no longer allowed, an input bucket removed)",
			&spec.FieldError{Field: "stages[0].lambda", Message: "not allowed"}, true},
		{"a validation error", &spec.ValidationError{Errors: []spec.FieldError{{Field: "stages", Message: "x"}}}, true},
		{"an unknown task or program", &UnknownTaskError{Spec: &spec.ValidationError{Errors: []spec.FieldError{{Field: "stages[0].exec[0]"}}}}, true},
		{"an idempotency conflict", fmt.Errorf("submit: %w", domain.ErrIdempotencyConflict), true},
		{"a job alone over the tasks quota", &QuotaError{Quota: "tasks", Max: 10, Alone: true}, true},
		{"an owner at its quota: its jobs will end", &QuotaError{Quota: "active jobs", Max: 2}, false},
		{"a store failure", fmt.Errorf("submit: %w", errors.New("throttled")), false},
		{"none", nil, false},
	}
	for _, tc := range cases {
		if got := schedules.RefusedForGood(tc.err); got != tc.want {
			t.Errorf("%s: schedules.RefusedForGood(%v) = %v, want %v", tc.name, tc.err, got, tc.want)
		}
	}
}
