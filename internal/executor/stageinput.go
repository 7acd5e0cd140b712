package executor

import (
	"fmt"

	"github.com/batchwork/batchwork/shared/spec"
	"github.com/batchwork/batchwork/shared/split"
)

// stageInput is the input prefix split s was listed under, named on t.
func stageInput(st spec.Stage, s split.Split, t *Task) (*spec.Input, error) {
	in := st.Partitions.InputAt(s.Source)
	if in == nil {
		return nil, fmt.Errorf("the task's split is of input %d, which stage %s does not have", s.Source, st.Name)
	}
	t.Source = in.SourceName(s.Source)
	return in, nil
}
