package api

import (
	"fmt"
	"net/url"
	"strings"

	"github.com/batchwork/batchwork/shared/spec"
)

// runParams reads a submission's run parameters from its query:
// param=NAME=VALUE, repeatable (the value may hold '='). Whether the spec
// declares the names is the control plane's to check.
func runParams(q url.Values) (map[string]string, error) {
	vs := q["param"]
	if len(vs) == 0 {
		return nil, nil
	}
	if len(vs) > spec.MaxRunParams {
		return nil, &spec.FieldError{Field: "param", Message: fmt.Sprintf("is given %d times; at most %d parameters are allowed", len(vs), spec.MaxRunParams)}
	}
	out := make(map[string]string, len(vs))
	for _, v := range vs {
		name, val, ok := strings.Cut(v, "=")
		switch {
		case !ok || name == "":
			return nil, &spec.FieldError{Field: "param", Message: fmt.Sprintf("%q must be NAME=VALUE", clip(v))}
		case hasKey(out, name):
			return nil, &spec.FieldError{Field: "param", Message: fmt.Sprintf("%q is given twice", clip(name))}
		}
		out[name] = val
	}
	return out, nil
}

// repeatable reports whether query parameter name may be given more
// than once: each param= is one run parameter.
func repeatable(name string) bool { return name == "param" }

func hasKey(m map[string]string, k string) bool { _, ok := m[k]; return ok }

func clip(s string) string {
	if len(s) > 64 {
		return s[:64] + "..."
	}
	return s
}
