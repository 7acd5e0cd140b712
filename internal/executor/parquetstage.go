package executor

import (
	"github.com/batchwork/batchwork/internal/executor/parquetout"
	"github.com/batchwork/batchwork/shared/spec"
)

// encodeOutput has the outputs of a stage whose output format is parquet
// written as one Parquet file (parquetout): a record that does not fit
// the schema is rejected as the task's own rejections are (reject.go),
// when the stage allows bad records.
func encodeOutput(b parquetout.Blob, st spec.Stage, t *Task) error {
	if !st.Output.IsParquet() {
		return nil
	}
	var opts parquetout.Options
	if st.MaxBadRecords > 0 {
		opts.Reject = func(rec []byte, reason string) error { return t.Rejects.Reject(-1, rec, reason) }
	}
	w, err := parquetout.New(st.Output.Schema, b, opts)
	if err != nil {
		return err
	}
	t.Out.Encode(w)
	return nil
}
