package control

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/batchwork/batchwork/shared/batch"
	"github.com/batchwork/batchwork/shared/spec"
	sm "github.com/batchwork/batchwork/statemachine"
)

// TaskMemory is the executor size the next attempt of the task ref names
// must run on: the size an out-of-memory retry raised it to, else its
// stage's (spec Resources). Its messages go to that size's ready queue
// (sizedqueues.go); an executor of another size that receives one anyway
// forwards it there unclaimed (executor.Runner.Memory). Only a stage whose
// maxMemory is above its memory can have been raised, so only such a
// stage's tasks cost a read of the task record (eventually consistent:
// a raise not seen yet is seen when the message comes back).
func (s *Service) TaskMemory(ctx context.Context, ref batch.TaskRef) (spec.Size, error) {
	sp, err := s.jobSpec(ctx, ref.Job)
	if err != nil {
		return 0, err
	}
	if ref.Stage < 0 || ref.Stage >= len(sp.Stages) {
		return 0, fmt.Errorf("task %s: no stage %d: %w", ref, ref.Stage, batch.ErrNotFound)
	}
	need := sp.StageMemory(ref.Stage)
	if sp.StageMaxMemory(ref.Stage) <= need {
		return need, nil
	}
	t, err := s.store.GetTask(ctx, ref)
	if errors.Is(err, batch.ErrNotFound) {
		return need, nil // unwritten (sm.TaskUnwritten): never raised
	}
	if err != nil {
		return 0, err
	}
	if t.Memory > need {
		need = t.Memory
	}
	if t.State == sm.TaskClaimed {
		// A lapsed claim of an executor killed for memory retries one size
		// up (oomkill.go).
		need = max(need, s.raiseLapsed(ctx, t, sp))
	}
	return need, nil
}

// checkExecutorSizes refuses a spec whose stages ask for an executor size
// this installation does not deploy (Config.ExecutorSizes; none set means
// only the default size): its tasks would wait for an executor forever.
func (s *Service) checkExecutorSizes(sp *spec.Job) error {
	deployed := s.cfg.ExecutorSizes
	if len(deployed) == 0 {
		deployed = []spec.Size{spec.DefaultExecutorSize}
	}
	has := func(z spec.Size) bool { return slices.Contains(deployed, z) }
	list := ""
	for i, d := range deployed {
		if i > 0 {
			list += ", "
		}
		list += sizeString(d)
	}
	for i, st := range sp.Stages {
		if st.Resources == nil {
			continue
		}
		if z := sp.StageMemory(i); !has(z) {
			return &spec.ValidationError{Errors: []spec.FieldError{{Field: fmt.Sprintf("stages[%d].resources.memory", i),
				Message: fmt.Sprintf("%s: this installation deploys executors of %s only (the construct's ExecutorSizes)", sizeString(z), list)}}}
		}
		// Every size an out-of-memory retry may climb to must be deployed.
		for z := sp.StageMemory(i); z < sp.StageMaxMemory(i); {
			next, ok := spec.NextSize(z)
			if !ok {
				break
			}
			if !has(next) {
				return &spec.ValidationError{Errors: []spec.FieldError{{Field: fmt.Sprintf("stages[%d].resources.maxMemory", i),
					Message: fmt.Sprintf("retries may climb to %s, but this installation deploys executors of %s only (the construct's ExecutorSizes)", sizeString(next), list)}}}
			}
			z = next
		}
	}
	return nil
}

// ParseExecutorSizes parses a list of executor sizes separated by commas
// ("1GiB,4GiB"), each one of spec.ExecutorSizes; "" is none (the default
// size only).
func ParseExecutorSizes(s string) ([]spec.Size, error) {
	var out []spec.Size
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		z, err := spec.ParseSize(f)
		if err != nil {
			return nil, fmt.Errorf("executor size %q: %w", f, err)
		}
		if !slices.Contains(spec.ExecutorSizes, z) {
			return nil, fmt.Errorf("executor size %q: must be one of 1GiB, 2GiB, 4GiB, 8GiB, 10GiB", f)
		}
		if !slices.Contains(out, z) {
			out = append(out, z)
		}
	}
	return out, nil
}
