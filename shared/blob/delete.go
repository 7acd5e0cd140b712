package blob

import (
	"context"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"
)

// DeleteBatch is the most keys one DeleteObjects request takes (S3's
// limit), and so the page size DeletePrefix lists with.
const DeleteBatch = 1000

// DeleteResult is what one DeletePrefix call did.
type DeleteResult struct {
	// Deleted counts the objects this call deleted.
	Deleted int
	// Complete is true when the listing reached the prefix's end: nothing
	// was left under it when the call listed it.
	Complete bool
}

// DeletePrefix deletes the objects under prefix in the store's bucket,
// one listing page (at most DeleteBatch keys) and one DeleteObjects
// request at a time, so it holds one page in memory however many objects
// the prefix has. It stops after maxPages pages with Complete false; the
// next call goes on from what is left. Deleting is idempotent (S3 answers
// success for a key already gone), so a call repeated after a failure or
// a lost response does no harm. Keys S3 refuses are left, and the call
// deletes the rest before it reports them.
func (s *Store) DeletePrefix(ctx context.Context, prefix string, maxPages int) (DeleteResult, error) {
	var res DeleteResult
	var token *string
	seen, failed := 0, 0
	var firstFail error
	for page := 0; page < maxPages; page++ {
		out, err := s.api.ListObjectsV2(ctx, &s3.ListObjectsV2Input{
			Bucket: &s.bucket, Prefix: &prefix, ContinuationToken: token, MaxKeys: aws.Int32(DeleteBatch),
		})
		if err != nil {
			return res, fmt.Errorf("delete s3://%s/%s: list: %w", s.bucket, prefix, err)
		}
		for from := 0; from < len(out.Contents); from += DeleteBatch {
			batch := out.Contents[from:min(from+DeleteBatch, len(out.Contents))]
			ids := make([]s3types.ObjectIdentifier, len(batch))
			for i, o := range batch {
				ids[i] = s3types.ObjectIdentifier{Key: o.Key}
			}
			seen += len(ids)
			del, err := s.api.DeleteObjects(ctx, &s3.DeleteObjectsInput{
				Bucket: &s.bucket, Delete: &s3types.Delete{Objects: ids, Quiet: aws.Bool(true)},
			})
			if err != nil {
				return res, fmt.Errorf("delete s3://%s/%s: %w", s.bucket, prefix, err)
			}
			// Quiet: the answer lists only the keys that were not deleted.
			res.Deleted += len(ids) - len(del.Errors)
			failed += len(del.Errors)
			if len(del.Errors) > 0 && firstFail == nil {
				e := del.Errors[0]
				firstFail = fmt.Errorf("delete s3://%s/%s: %s", s.bucket, aws.ToString(e.Key), aws.ToString(e.Code))
			}
		}
		if !aws.ToBool(out.IsTruncated) {
			res.Complete = true
			break
		}
		token = out.NextContinuationToken
	}
	if firstFail != nil {
		res.Complete = false
		return res, fmt.Errorf("%w (%d of %d objects under s3://%s/%s not deleted)", firstFail, failed, seen, s.bucket, prefix)
	}
	return res, nil
}
