package executor

// A range shuffle (spec.ShuffleByRange) in the runner: a map task's
// outputs are one partition, sorted and put as one run when the function
// returns (output.Output.Range); a reducer reads every committed run's
// header, draws the boundaries and merges its key range of each
// (internal/executor/rangeshuffle).

import (
	"context"
	"fmt"
	"io"

	"github.com/batchwork/batchwork/internal/executor/rangeshuffle"
	"github.com/batchwork/batchwork/shared/blob"
	"github.com/batchwork/batchwork/shared/domain"
	"github.com/batchwork/batchwork/shared/spec"
)

// rangeInput is partition ref.Partition of stage src's range shuffle:
// the records of its key range of every run the stage's manifest lists,
// in key order. The manifest lists one output per map task that wrote a
// record, its run.
func rangeInput(ctx context.Context, r *Runner, sp *spec.Job, ref domain.TaskRef, src int) (io.ReadCloser, error) {
	m, err := r.stageManifest(ctx, blob.StageManifestKey(ref.Job, sp.Stages[src].Name))
	if err != nil {
		return nil, err
	}
	var keys []string
	err = blob.EachManifestOutput(ctx, r.Blob, m, func(o domain.Output) error {
		if o.Part != 0 {
			return fmt.Errorf("%s: map task %d's output part %d; a range shuffle's map task writes one sorted run: %w",
				o.Key, o.Partition, o.Part, blob.ErrBadRun)
		}
		keys = append(keys, o.Key)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return rangeshuffle.Open(ctx, rangeGetter(r.Blob), keys, sp.Stages[src].Shuffle.Partitions, ref.Partition,
		rangeshuffle.Options{Headers: &r.runHeads})
}
