package blob

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go"

	"github.com/batchwork/batchwork/shared/domain"
)

// ErrRefused marks an S3 answer no retry changes: no such bucket, an
// invalid name, or access denied.
var ErrRefused = errors.New("refused by S3")

// Publishing a succeeded job's outputs to the folder its spec names
// (spec.Job.Output): writes to any bucket the installation is granted,
// every one conditional (If-None-Match: *), so a published object is never
// replaced.

// PutIfAbsentIn is PutIfAbsent on any bucket.
func (s *Store) PutIfAbsentIn(ctx context.Context, bucket, key string, body []byte) error {
	for try := 0; ; try++ {
		_, err := s.api.PutObject(ctx, &s3.PutObjectInput{
			Bucket: &bucket, Key: &key, Body: bytes.NewReader(body),
			IfNoneMatch: aws.String("*"), ContentLength: aws.Int64(int64(len(body))),
		})
		switch code := httpStatus(err); {
		case err == nil:
			return nil
		case code == http.StatusPreconditionFailed:
			return fmt.Errorf("put s3://%s/%s: %w", bucket, key, domain.ErrExists)
		case code == http.StatusConflict && try < 3:
			continue
		case permanentPublish(err):
			return fmt.Errorf("put s3://%s/%s: %w: %w", bucket, key, ErrRefused, err)
		default:
			return fmt.Errorf("put s3://%s/%s: %w", bucket, key, err)
		}
	}
}

// CopyIfAbsent copies srcKey of the store's bucket to dstKey of dstBucket
// with If-None-Match: *: an existing destination is domain.ErrExists (AWS
// answers 412; an emulator that ignores the header on copies overwrites
// it, which is why callers copy only where the same source belongs). A
// copy within S3 moves no bytes through the caller: an object up to 5 GB
// is one CopyObject, a larger one (a streamed output may be) a multipart
// copy (copyInParts).
func (s *Store) CopyIfAbsent(ctx context.Context, srcKey, dstBucket, dstKey string) error {
	m, err := s.multipart()
	if err != nil {
		return err
	}
	src := s.bucket + "/" + escapeKey(srcKey)
	for try := 0; ; try++ {
		_, err := m.CopyObject(ctx, &s3.CopyObjectInput{
			Bucket: &dstBucket, Key: &dstKey, CopySource: &src, IfNoneMatch: aws.String("*"),
		})
		var ae smithy.APIError
		switch code := httpStatus(err); {
		case err == nil:
			return nil
		case errors.As(err, &ae) && ae.ErrorCode() == "InvalidRequest":
			// What S3 answers for a source over MaxCopySize; anything
			// else that answers so is no copy's to retry either.
			head, herr := m.HeadObject(ctx, &s3.HeadObjectInput{Bucket: &s.bucket, Key: &srcKey})
			if herr != nil {
				return fmt.Errorf("copy s3://%s/%s: size: %w", s.bucket, srcKey, herr)
			}
			if aws.ToInt64(head.ContentLength) <= MaxCopySize {
				return fmt.Errorf("copy s3://%s/%s to s3://%s/%s: %w: %w", s.bucket, srcKey, dstBucket, dstKey, ErrRefused, err)
			}
			return s.copyInParts(ctx, m, src, aws.ToInt64(head.ContentLength), dstBucket, dstKey)
		case code == http.StatusPreconditionFailed:
			return fmt.Errorf("copy s3://%s/%s to s3://%s/%s: %w", s.bucket, srcKey, dstBucket, dstKey, domain.ErrExists)
		case code == http.StatusConflict && try < 3:
			continue
		case permanentPublish(err):
			return fmt.Errorf("copy s3://%s/%s to s3://%s/%s: %w: %w", s.bucket, srcKey, dstBucket, dstKey, ErrRefused, err)
		default:
			return fmt.Errorf("copy s3://%s/%s to s3://%s/%s: %w", s.bucket, srcKey, dstBucket, dstKey, err)
		}
	}
}

// MaxCopySize is the largest object one CopyObject copies (5 GB);
// CopyPartSize is the part of a larger one's multipart copy (UploadPartCopy
// takes 5 MiB to 5 GB; 10,000 parts of 1 GiB are far beyond any output).
const (
	MaxCopySize  = 5 << 30
	CopyPartSize = 1 << 30
)

// copyInParts copies an object over MaxCopySize: a multipart upload at the
// destination whose parts are ranges of the source (UploadPartCopy),
// completed with If-None-Match: *. An upload left by a failure is aborted
// by the bucket's lifecycle rule (the data bucket's aborts incomplete
// uploads after a day; an operator's output bucket should have one too).
func (s *Store) copyInParts(ctx context.Context, m MultipartAPI, src string, size int64, dstBucket, dstKey string) error {
	what := fmt.Sprintf("copy s3://%s to s3://%s/%s in parts", src, dstBucket, dstKey)
	up, err := m.CreateMultipartUpload(ctx, &s3.CreateMultipartUploadInput{Bucket: &dstBucket, Key: &dstKey})
	if err != nil {
		return fmt.Errorf("%s: %w", what, refusedIf(err))
	}
	var parts []s3types.CompletedPart
	for off, n := int64(0), int32(1); off < size; off, n = off+CopyPartSize, n+1 {
		end := min(off+CopyPartSize, size) - 1
		out, err := m.UploadPartCopy(ctx, &s3.UploadPartCopyInput{
			Bucket: &dstBucket, Key: &dstKey, UploadId: up.UploadId, PartNumber: aws.Int32(n),
			CopySource: &src, CopySourceRange: aws.String(fmt.Sprintf("bytes=%d-%d", off, end)),
		})
		if err != nil {
			return fmt.Errorf("%s: part %d: %w", what, n, refusedIf(err))
		}
		etag := ""
		if out.CopyPartResult != nil {
			etag = aws.ToString(out.CopyPartResult.ETag)
		}
		parts = append(parts, s3types.CompletedPart{PartNumber: aws.Int32(n), ETag: aws.String(etag)})
	}
	_, err = m.CompleteMultipartUpload(ctx, &s3.CompleteMultipartUploadInput{
		Bucket: &dstBucket, Key: &dstKey, UploadId: up.UploadId, IfNoneMatch: aws.String("*"),
		MultipartUpload: &s3types.CompletedMultipartUpload{Parts: parts},
	})
	switch {
	case err == nil:
		return nil
	case httpStatus(err) == http.StatusPreconditionFailed:
		return fmt.Errorf("%s: %w", what, domain.ErrExists)
	}
	return fmt.Errorf("%s: %w", what, refusedIf(err))
}

// permanentPublish reports a publishing request's S3 answer that no retry
// changes: permanentS3's, and any other 4xx but throttling (429), a
// conflicting concurrent request (409), a failed precondition (412, which
// callers read as domain.ErrExists) and the few 4xx codes that do pass
// (a request or credentials that timed out, a skewed clock). That makes
// permanent what would otherwise keep a job PUBLISHING for ever: a bucket
// in another region (301 PermanentRedirect, 400 AuthorizationHeaderMalformed),
// a source archived or expired by a lifecycle rule (403
// InvalidObjectState, 404 NoSuchKey), a KMS key the role may not use
// (KMS.* codes, 400 or 403). Throttling (503 SlowDown) and S3's own
// errors (500) are 5xx and stay transient.
func permanentPublish(err error) bool {
	if err == nil {
		return false
	}
	if permanentS3(err) {
		return true
	}
	var ae smithy.APIError
	if errors.As(err, &ae) {
		switch ae.ErrorCode() {
		case "RequestTimeout", "RequestTimeTooSkewed", "ExpiredToken", "TokenRefreshRequired",
			"SlowDown", "Throttling", "ThrottlingException", "TooManyRequestsException",
			"OperationAborted", "InternalError", "ServiceUnavailable":
			return false
		}
	}
	code := httpStatus(err)
	if code == http.StatusMovedPermanently {
		return true
	}
	return code >= 400 && code < 500 &&
		code != http.StatusTooManyRequests && code != http.StatusConflict &&
		code != http.StatusPreconditionFailed && code != http.StatusRequestTimeout
}

// refusedIf marks err ErrRefused when permanentPublish says so.
func refusedIf(err error) error {
	if permanentPublish(err) {
		return fmt.Errorf("%w: %w", ErrRefused, err)
	}
	return err
}

// escapeKey URL-encodes a key for CopySource, keeping its slashes.
func escapeKey(key string) string {
	parts := strings.Split(key, "/")
	for i, p := range parts {
		parts[i] = url.PathEscape(p)
	}
	return strings.Join(parts, "/")
}

// ListPage lists one page (up to 1,000) of the keys under prefix in bucket
// after startAfter, in key order, and says whether more follow.
func (s *Store) ListPage(ctx context.Context, bucket, prefix, startAfter string) ([]string, bool, error) {
	in := &s3.ListObjectsV2Input{Bucket: &bucket, Prefix: &prefix}
	if startAfter != "" {
		in.StartAfter = &startAfter
	}
	out, err := s.api.ListObjectsV2(ctx, in)
	if err != nil {
		if permanentPublish(err) {
			err = fmt.Errorf("%w: %w", ErrRefused, err)
		}
		return nil, false, fmt.Errorf("list s3://%s/%s: %w", bucket, prefix, err)
	}
	keys := make([]string, 0, len(out.Contents))
	for _, o := range out.Contents {
		keys = append(keys, aws.ToString(o.Key))
	}
	return keys, aws.ToBool(out.IsTruncated) && len(keys) > 0, nil
}

// The outputs area of the data bucket, outputs/<owner key>/..., holds the
// folders jobs publish to (spec.Job.Output, "outputs:<path>/"); the
// control plane writes there, never the owners (shared/control/publish.go).
const OutputsArea = "outputs/"

// OutputsPrefix is the outputs area of the owner whose key (principal.Key)
// is ownerKey.
func OutputsPrefix(ownerKey string) string { return OutputsArea + ownerKey + "/" }

// A published folder holds, besides the outputs:
//
//	<folder>_batchwork.json    the claim: which job publishes here, written first
//	<folder>_SUCCESS           written last, once every output is in place
const (
	ClaimName   = "_batchwork.json"
	SuccessName = "_SUCCESS"
)

// PublishedKey is the final name, in folder, of output part of partition
// of stage: <folder><stage>/part-<partition, 5 digits>, with
// -<part, 5 digits> after it for parts past the first (a sink stage has
// no shuffle, so its tasks write one part each, unless a lambda task
// names more). The names sort in the order the job's manifest lists the
// outputs, so a reader that concatenates a stage's folder in key order
// reads them in manifest order.
func PublishedKey(folder, stage string, partition, part int) string {
	if part == 0 {
		return fmt.Sprintf("%s%s/part-%05d", folder, stage, partition)
	}
	return fmt.Sprintf("%s%s/part-%05d-%05d", folder, stage, partition, part)
}

// IsPublishMarker reports whether key is a published folder's claim or
// success marker, which readers of the folder as an input skip.
func IsPublishMarker(key string) bool {
	base := key[strings.LastIndexByte(key, '/')+1:]
	return base == ClaimName || base == SuccessName
}
