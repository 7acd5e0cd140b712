package execstage

import (
	"slices"
	"testing"
)

type partsOnly struct{ Output }

func (partsOnly) Parts() int { return 1 }

// A program is told which input its split is of (BATCHWORK_SOURCE), and a
// task that reads no split has no such variable.
func TestExecEnvSource(t *testing.T) {
	t.Parallel()
	for _, src := range []string{"orders", "1", ""} {
		env := execEnv(&Attempt{Job: "j", Stage: "s", Source: src, Out: partsOnly{}}, t.TempDir())
		has := slices.Contains(env, EnvTaskSource+"="+src)
		if has != (src != "") || (src == "" && slices.ContainsFunc(env, func(e string) bool {
			return len(e) > len(EnvTaskSource) && e[:len(EnvTaskSource)+1] == EnvTaskSource+"="
		})) {
			t.Errorf("source %q: environment %q", src, env)
		}
	}
}
