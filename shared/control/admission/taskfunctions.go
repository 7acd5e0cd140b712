package admission

import (
	"fmt"
	"slices"
	"strings"

	"github.com/batchwork/batchwork/shared/spec"
)

// Lambda stages. A stage's `lambda: <function>` makes the executor invoke
// that function with the executor's role, for whichever owner submitted
// the spec: without a check, any owner could invoke any function the role
// may, and read what it returns through its outputs. So the functions are
// the operator's choice, like the input buckets: Config.TaskFunctions
// lists them (names or ARNs, as specs must write them), the construct
// grants the executor roles lambda:InvokeFunction on exactly those
// (infra/batchwork's TaskFunctions), and submit refuses any other.

// ParseTaskFunctions reads the operator's list of Lambda functions that
// lambda stages may invoke: function names or ARNs separated by commas or
// whitespace; empty is none. A bad entry is an error naming it.
func ParseTaskFunctions(s string) ([]string, error) {
	var out []string
	for _, f := range strings.FieldsFunc(s, func(r rune) bool { return r == ',' || r == ' ' || r == '\t' || r == '\n' }) {
		probe := spec.Job{Name: "j", Stages: []spec.Stage{{Name: "s", Lambda: f, Partitions: &spec.Partitions{Count: 1}}}}
		if err := probe.Validate(); err != nil {
			return nil, fmt.Errorf("task function %q must be a Lambda function name or ARN", f)
		}
		if unqualified(f) != f {
			// Allowing a function allows its versions and aliases; one
			// alias alone cannot be granted apart from the others.
			return nil, fmt.Errorf("task function %q: list the function without a version or alias", f)
		}
		if !slices.Contains(out, f) {
			out = append(out, f)
		}
	}
	return out, nil
}

// checkTaskFunctions refuses a lambda stage whose function the operator
// does not allow. A version or alias (name:qualifier) is allowed when its
// function is: the grant covers the function's qualifiers too.
func (s *Admitter) checkTaskFunctions(sp *spec.Job) *spec.FieldError {
	for i, st := range sp.Stages {
		if st.Lambda == "" || slices.Contains(s.cfg.TaskFunctions, unqualified(st.Lambda)) {
			continue
		}
		msg := fmt.Sprintf("function %q is not one this installation invokes", st.Lambda)
		if len(s.cfg.TaskFunctions) == 0 {
			msg += "; the operator allows none (the construct's TaskFunctions)"
		} else {
			msg += "; name one of: " + strings.Join(s.cfg.TaskFunctions, ", ")
		}
		return &spec.FieldError{Field: fmt.Sprintf("stages[%d].lambda", i), Message: msg}
	}
	return nil
}

// unqualified drops a function reference's version or alias: "f:live" is
// "f", an ARN's eighth field is dropped.
func unqualified(ref string) string {
	if strings.HasPrefix(ref, "arn:") {
		if f := strings.Split(ref, ":"); len(f) == 8 {
			return strings.Join(f[:7], ":")
		}
		return ref
	}
	name, _, _ := strings.Cut(ref, ":")
	return name
}
