package tasks

import (
	"context"

	"github.com/batchwork/batchwork/shared/control/kernel"
)

// CommitWritten is CommitWith for the in-installation runner that has just
// written the attempt's outputs itself: each of outputs 0..r.Outputs-1 was
// put with If-None-Match: * at the attempt's own key, and the put succeeded
// or answered 412 (the object is there), so S3 has already said they
// exist and the commit skips its listing (one ListObjectsV2 per task with
// output). Only code in this process can call it; a remote executor's
// commit (RemoteCommit, the commit function) is not trusted and is always
// checked against S3.
func (s *Lifecycle) CommitWritten(ctx context.Context, c kernel.Claim, r CommitResult) error {
	return s.commit(ctx, c, r)
}
