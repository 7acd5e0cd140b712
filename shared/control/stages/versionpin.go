package stages

import (
	"context"

	"github.com/batchwork/batchwork/shared/split"
)

// pinVersions records the version each listed input object had, where its
// bucket is versioned, so that the stage's tasks read the planned bytes
// even if the key is overwritten while the job runs (blob/versions.go).
func (s *Lifecycle) pinVersions(ctx context.Context, bucket, prefix string, objs []split.Object) ([]split.Object, error) {
	return s.blob.PinVersions(ctx, bucket, prefix, objs)
}
