package batchwork_test

import (
	"testing"

	"github.com/batchwork/batchwork/infra/batchwork"
	"github.com/batchwork/batchwork/shared/lambdaenv"
)

// The submitting functions, and only they, get the Fargate image's exec
// programs to accept before that service has published them (it scales
// from zero); without the prop none is listed.
func TestExecProgramsReachTheSubmittingFunctions(t *testing.T) {
	s := synth(t, "execprogs", batchwork.Props{Executor: batchwork.ExecutorFargate,
		ExecPrograms: []string{"wordcount.py", "sum.sh", "wordcount.py"}}, nil)
	for name, id := range s.functionIDs(t) {
		env := s.json.Resources[id].Properties["Environment"].(map[string]any)["Variables"].(map[string]any)
		var want any
		if name == batchwork.FnAPI || name == batchwork.FnSweep {
			want = "wordcount.py,sum.sh"
		}
		if got := env[lambdaenv.EnvExecPrograms]; got != want {
			t.Errorf("%s function: %s=%v, want %v", name, lambdaenv.EnvExecPrograms, got, want)
		}
	}
}
