package stages

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/batchwork/batchwork/shared/blob"
	"github.com/batchwork/batchwork/shared/domain"
	"github.com/batchwork/batchwork/shared/dynamo"
	"github.com/batchwork/batchwork/shared/spec"
	"github.com/batchwork/batchwork/shared/split"
)

// planInputs lists every input prefix of a stage (partitions.input, or
// each of partitions.inputs in order) and cuts the objects into splits,
// each marked with the input it came from (split.Split.Source), so a task
// knows its prefix's bucket, format and columns. Every input is checked
// (its listing's limit, a folder still being published, allowEmpty, its
// keys' length) before any split is made, and the splits of all the
// inputs together are counted against spec.MaxPartitions, since they are
// one stage's tasks.
func (s *Lifecycle) planInputs(ctx context.Context, idx int, st spec.Stage) ([]split.Split, error) {
	ins := st.Partitions.InputList()
	listed := make([][]split.Object, len(ins))
	var n int64
	for k, in := range ins {
		field := inputField(idx, st.Partitions, k)
		objs, err := s.listInput(ctx, field, in)
		if err != nil {
			return nil, err
		}
		listed[k] = objs
		// Count, then plan: a split is 32 bytes, and a job stored before
		// the split size had its floor may still ask for one-byte splits
		// of a 10 MiB object, ten million of them (320 MiB).
		size := int64(in.SplitSizeOrDefault())
		if n += split.Count(objs, size); n > spec.MaxPartitions {
			with := ""
			if k > 0 {
				with = " with the inputs before it"
			}
			return nil, fmt.Errorf("%w: %s.splitSize: %s in splits of %d bytes gives %d splits%s, more than %d; raise splitSize",
				domain.ErrBadInput, field, in.Prefix, size, n, with, spec.MaxPartitions)
		}
	}
	splits := make([]split.Split, 0, n)
	for k, in := range ins {
		first := len(splits)
		splits = append(splits, split.Plan(listed[k], int64(in.SplitSizeOrDefault()))...)
		for i := first; i < len(splits); i++ {
			splits[i].Source = k
		}
	}
	return splits, nil
}

// inputField is input k's path in the spec, for errors.
func inputField(idx int, p *spec.Partitions, k int) string {
	if p.Input != nil {
		return fmt.Sprintf("stages[%d].partitions.input", idx)
	}
	return fmt.Sprintf("stages[%d].partitions.inputs[%d]", idx, k)
}

// listInput lists one input prefix's objects to read, pinned: without a
// publish's claim and marker, each with its ETag and, where its bucket
// is versioned and the record has room, its version.
func (s *Lifecycle) listInput(ctx context.Context, field string, in *spec.Input) ([]split.Object, error) {
	bucket, prefix, err := spec.ParseS3URI(in.Prefix)
	if err != nil {
		return nil, fmt.Errorf("%w: %s.prefix: %w", domain.ErrBadInput, field, err)
	}
	objs, err := s.blob.List(ctx, bucket, prefix)
	if errors.Is(err, blob.ErrListLimit) {
		return nil, fmt.Errorf("%w: %s.prefix: %w; name a narrower prefix", domain.ErrBadInput, field, err)
	}
	if err != nil {
		return nil, err
	}
	// A folder whose publishing has not finished is not read as if whole.
	if err := s.checkPublishedInputs(ctx, bucket, prefix, objs); err != nil {
		return nil, fmt.Errorf("%s.prefix: %w", field, err)
	}
	// A published folder's claim and marker are not data (publish.go).
	objs = slices.DeleteFunc(objs, func(o split.Object) bool { return blob.IsPublishMarker(o.Key) })
	if err := checkInputNotEmpty(field, in, objs); err != nil { // emptyinput.go
		return nil, err
	}
	if objs, err = s.pinVersions(ctx, bucket, prefix, objs); err != nil { // versionpin.go
		return nil, err
	}
	for i, o := range objs {
		// The ETag (32 bytes and a part count at most) rides on every task
		// record of the object with its key, as its pin (blob/pin.go).
		if pin := dynamo.PinBytes(o.ETag); len(o.Key)+pin > MaxInputKey {
			return nil, fmt.Errorf("%w: input key %q is longer than %d bytes (%d less than the %d allowed, for its ETag)", domain.ErrBadInput, o.Key, MaxInputKey-pin, pin, MaxInputKey)
		}
		// A version id rides along only where it fits the same budget;
		// past it the object keeps its ETag pin alone.
		objs[i].Version = dynamo.FitVersion(o.Key, o.ETag, o.Version)
	}
	return objs, nil
}
