package control

import (
	"context"

	"github.com/batchwork/batchwork/shared/split"
)

// versionPinner is the blob store's pinning of listed input objects to
// their version ids on a versioned bucket (blob.Store.PinVersions). A
// store without it (test fakes) plans with ETags alone.
type versionPinner interface {
	PinVersions(ctx context.Context, bucket, prefix string, objs []split.Object) ([]split.Object, error)
}

// pinVersions records the version each listed input object had, where its
// bucket is versioned, so that the stage's tasks read the planned bytes
// even if the key is overwritten while the job runs (blob/versions.go).
func (s *Service) pinVersions(ctx context.Context, bucket, prefix string, objs []split.Object) ([]split.Object, error) {
	p, ok := s.blob.(versionPinner)
	if !ok {
		return objs, nil
	}
	return p.PinVersions(ctx, bucket, prefix, objs)
}
