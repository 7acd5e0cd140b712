//go:build faults

package faultenv

import (
	"testing"

	"github.com/batchwork/batchwork/internal/faults"
)

// With the faults tag, BATCHWORK_FAULTS reaches internal/faults under the
// same names.
func TestFromEnvWithTheTag(t *testing.T) {
	if EnvRules != faults.EnvRules || EnvSeed != faults.EnvSeed {
		t.Fatalf("variables %s, %s; internal/faults reads %s, %s", EnvRules, EnvSeed, faults.EnvRules, faults.EnvSeed)
	}
	t.Setenv(EnvRules, "chaos")
	t.Setenv(EnvSeed, "7")
	inj, err := FromEnv()
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := inj.(injector); !ok {
		t.Fatalf("FromEnv() = %T, want the internal/faults injector", inj)
	}
	t.Setenv(EnvRules, "not a rule")
	if _, err := FromEnv(); err == nil {
		t.Fatal("FromEnv() with a bad rule: no error")
	}
}
