package stages

import (
	"context"
	"fmt"
	"strings"

	"github.com/batchwork/batchwork/shared/blob"
	"github.com/batchwork/batchwork/shared/spec"
)

// OutputClaimedError refuses a submission whose output folder another
// job's published folder is, holds, or lies in: a claimed folder is its
// job's for good, and nested folders would let one job's publishing change
// another's after its _SUCCESS. The API answers 409 output_claimed on
// "output", the code a rerun of a published job gets.
type OutputClaimedError struct {
	// Output is the submitted folder; Claimed the published one, as
	// s3:// URIs; Job the job that claimed it ("" if its claim is
	// unreadable).
	Output, Claimed, Job string
}

func (e *OutputClaimedError) Error() string {
	who := "another job"
	if e.Job != "" {
		who = "job " + e.Job
	}
	switch {
	case e.Claimed == e.Output:
		return fmt.Sprintf("output folder %s already holds the outputs of %s; name another output folder", e.Output, who)
	case strings.HasPrefix(e.Output, e.Claimed):
		return fmt.Sprintf("output folder %s is inside %s, the output folder of %s; published folders may not hold one another: name a folder outside it", e.Output, e.Claimed, who)
	default:
		return fmt.Sprintf("output folder %s holds %s, the output folder of %s; published folders may not hold one another: name a folder outside it", e.Output, e.Claimed, who)
	}
}

// submitNestingPages bounds the listing of a submitted output folder for
// claims under it: a fresh folder lists empty, and a folder past the bound
// is left to publishing, which checks the whole of it (checkNesting).
const submitNestingPages = 4

// CheckOutputClaimed refuses at submit an output folder that a published
// folder is, holds or lies in (OutputClaimedError), with the rule
// publishing applies (claimFolder, checkNesting): its own claim, a claim
// above it up to the owner's area, a claim under it. A read that fails
// leaves the question to publishing. A retry of the submission whose job
// made the claim is not refused: its idempotency key answers that job.
func (s *Lifecycle) CheckOutputClaimed(ctx context.Context, owner, idemKey string, sp *spec.Job) error {
	err := s.findOutputClaim(ctx, sp)
	if err == nil {
		return nil
	}
	if _, found, lerr := s.store.JobByIdemKey(ctx, owner, idemKey); lerr == nil && found {
		return nil
	}
	return err
}

func (s *Lifecycle) findOutputClaim(ctx context.Context, sp *spec.Job) error {
	if sp.Output == "" {
		return nil
	}
	pub := s.blob
	bucket, folder, err := spec.ParseS3URI(sp.Output)
	if err != nil {
		return nil
	}
	refuse := func(key string) error {
		e := &OutputClaimedError{Output: sp.Output, Claimed: "s3://" + bucket + "/" + strings.TrimSuffix(key, blob.ClaimName)}
		if c, err := ReadClaim(ctx, pub, bucket, key); err == nil {
			e.Job = c.Job
		}
		return e
	}
	dirs := []string{folder}
	if root := s.outputsRoot(bucket, folder); root != "" {
		dirs = append(dirs, ancestorFolders(root, strings.TrimSuffix(folder, "/"))...)
	}
	for _, dir := range dirs {
		if claimed, err := exists(ctx, pub, bucket, dir+blob.ClaimName); err == nil && claimed {
			return refuse(dir + blob.ClaimName)
		}
	}
	after := ""
	for range submitNestingPages {
		keys, more, err := pub.ListPage(ctx, bucket, folder, after)
		if err != nil {
			return nil
		}
		for _, k := range keys {
			if strings.HasSuffix(k, "/"+blob.ClaimName) {
				return refuse(k)
			}
		}
		if !more || len(keys) == 0 {
			return nil
		}
		after = keys[len(keys)-1]
	}
	return nil
}
