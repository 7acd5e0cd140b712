//go:build !faults

package faultenv

import (
	"fmt"
	"os"
)

// FromEnv returns an injector that injects nothing, or an error when
// BATCHWORK_FAULTS asks for faults this binary cannot inject.
func FromEnv() (Injector, error) {
	if requested(os.Getenv) {
		return nil, fmt.Errorf("%s=%q: this binary is built without fault injection; build it with -tags faults (as the chaos harness does) or unset %s",
			EnvRules, os.Getenv(EnvRules), EnvRules)
	}
	return none{}, nil
}
