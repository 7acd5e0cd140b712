package admission

import (
	"fmt"
	"slices"
	"strings"

	"github.com/batchwork/batchwork/shared/control/kernel"
	"github.com/batchwork/batchwork/shared/spec"
)

// checkExecutorSizes refuses a spec whose stages ask for an executor size
// this installation does not deploy (Config.ExecutorSizes; none set means
// only the default size): its tasks would wait for an executor forever.
func (s *Admitter) checkExecutorSizes(sp *spec.Job) error {
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
		list += kernel.SizeString(d)
	}
	for i, st := range sp.Stages {
		if st.Resources == nil {
			continue
		}
		if z := sp.StageMemory(i); !has(z) {
			return &spec.ValidationError{Errors: []spec.FieldError{{Field: fmt.Sprintf("stages[%d].resources.memory", i),
				Message: fmt.Sprintf("%s: this installation deploys executors of %s only (the construct's ExecutorSizes)", kernel.SizeString(z), list)}}}
		}
		// Every size an out-of-memory retry may climb to must be deployed.
		for z := sp.StageMemory(i); z < sp.StageMaxMemory(i); {
			next, ok := spec.NextSize(z)
			if !ok {
				break
			}
			if !has(next) {
				return &spec.ValidationError{Errors: []spec.FieldError{{Field: fmt.Sprintf("stages[%d].resources.maxMemory", i),
					Message: fmt.Sprintf("retries may climb to %s, but this installation deploys executors of %s only (the construct's ExecutorSizes)", kernel.SizeString(next), list)}}}
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
