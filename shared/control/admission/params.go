package admission

import (
	"github.com/batchwork/batchwork/shared/dynamo"
	"github.com/batchwork/batchwork/shared/spec"
)

// resolveParams resolves a submission's run parameters into its spec
// (spec.Job.Resolve), so the spec stored, hashed for the idempotency
// key and read by every task holds the values. A rerun's spec is the
// stored, resolved one: resolving it again would read the "${params"
// text a value or an escape left in it as placeholders.
func resolveParams(sp *spec.Job, params map[string]string, rerun *dynamo.RerunParams) (*spec.Job, error) {
	if rerun != nil {
		if len(params) > 0 {
			return nil, &spec.FieldError{Field: "param", Message: "a rerun keeps its job's parameters; submit the spec again to change them"}
		}
		return sp, nil
	}
	return sp.Resolve(params)
}
