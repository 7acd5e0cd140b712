// Package blob is the S3 adapter: write-once objects (If-None-Match: *),
// ranged reads and listings.
package blob

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"

	"github.com/batchwork/batchwork/shared/domain"
	"github.com/batchwork/batchwork/shared/split"
	"github.com/batchwork/batchwork/shared/tuning"
)

// API is the slice of the S3 client the adapter uses.
type API interface {
	PutObject(context.Context, *s3.PutObjectInput, ...func(*s3.Options)) (*s3.PutObjectOutput, error)
	GetObject(context.Context, *s3.GetObjectInput, ...func(*s3.Options)) (*s3.GetObjectOutput, error)
	ListObjectsV2(context.Context, *s3.ListObjectsV2Input, ...func(*s3.Options)) (*s3.ListObjectsV2Output, error)
	PutObjectTagging(context.Context, *s3.PutObjectTaggingInput, ...func(*s3.Options)) (*s3.PutObjectTaggingOutput, error)
	DeleteObjects(context.Context, *s3.DeleteObjectsInput, ...func(*s3.Options)) (*s3.DeleteObjectsOutput, error)
}

// Store reads and writes one bucket (and reads input prefixes of others).
type Store struct {
	api    API
	bucket string
	limit  ListLimit
}

// New returns a store over bucket whose listings stop at DefaultListLimit.
func New(api API, bucket string) *Store {
	return &Store{api: api, bucket: bucket, limit: DefaultListLimit}
}

// WithListLimit returns a store like s whose listings stop at l (tests use
// a small one; fields ≤ 0 take the default's).
func (s *Store) WithListLimit(l ListLimit) *Store {
	c := *s
	c.limit = l.withDefaults()
	return &c
}

// Bucket is the store's bucket name.
func (s *Store) Bucket() string { return s.bucket }

func httpStatus(err error) int {
	var re *smithyhttp.ResponseError
	if errors.As(err, &re) {
		return re.HTTPStatusCode()
	}
	return 0
}

// PutIfAbsent writes key once. An existing object gives domain.ErrExists
// (S3 answers 412); a concurrent conditional write (409) is retried.
func (s *Store) PutIfAbsent(ctx context.Context, key string, body []byte) error {
	for try := 0; ; try++ {
		_, err := s.api.PutObject(ctx, &s3.PutObjectInput{
			Bucket: &s.bucket, Key: &key, Body: bytes.NewReader(body),
			IfNoneMatch: aws.String("*"), ContentLength: aws.Int64(int64(len(body))),
		})
		switch code := httpStatus(err); {
		case err == nil:
			return nil
		case code == http.StatusPreconditionFailed:
			return fmt.Errorf("put s3://%s/%s: %w", s.bucket, key, domain.ErrExists)
		case code == http.StatusConflict && try < 3:
			continue
		default:
			return fmt.Errorf("put s3://%s/%s: %w", s.bucket, key, err)
		}
	}
}

// Get reads a whole object of the store's bucket.
func (s *Store) Get(ctx context.Context, key string) ([]byte, error) {
	rc, err := s.Open(ctx, s.bucket, key, 0)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	b, err := io.ReadAll(rc)
	if err != nil {
		return nil, fmt.Errorf("read s3://%s/%s: %w", s.bucket, key, err)
	}
	return b, nil
}

// Open streams an object of any bucket from byte start to its end.
func (s *Store) Open(ctx context.Context, bucket, key string, start int64) (io.ReadCloser, error) {
	in := &s3.GetObjectInput{Bucket: &bucket, Key: &key}
	if start > 0 {
		in.Range = aws.String(fmt.Sprintf("bytes=%d-", start))
	}
	out, err := s.api.GetObject(ctx, in)
	if err != nil {
		var ae smithy.APIError
		if errors.As(err, &ae) && ae.ErrorCode() == "NoSuchKey" {
			return nil, fmt.Errorf("get s3://%s/%s: %w", bucket, key, domain.ErrNotFound)
		}
		return nil, fmt.Errorf("get s3://%s/%s: %w", bucket, key, err)
	}
	return out.Body, nil
}

// permanentS3 reports S3 answers that no retry changes: the bucket does not
// exist, its name is invalid, or the caller may not read it.
func permanentS3(err error) bool {
	var ae smithy.APIError
	if !errors.As(err, &ae) {
		return false
	}
	switch ae.ErrorCode() {
	case "NoSuchBucket", "AccessDenied", "InvalidBucketName", "AllAccessDisabled":
		return true
	}
	return false
}

// Opener returns a split.RangeOpener over bucket.
func (s *Store) Opener(bucket string) split.RangeOpener {
	return func(ctx context.Context, key string, start int64) (io.ReadCloser, error) {
		return s.Open(ctx, bucket, key, start)
	}
}

// List returns every object under prefix in bucket, in key order. It
// stops with a *ListLimitError (which is domain.ErrBadInput) as soon as the
// listing passes the store's ListLimit: a prefix is named by a user, and
// one naming a whole bucket must cost a bounded number of requests and
// bytes, not whatever the bucket holds.
func (s *Store) List(ctx context.Context, bucket, prefix string) ([]split.Object, error) {
	var objs []split.Object
	var keyBytes int64
	var token *string
	for {
		out, err := s.api.ListObjectsV2(ctx, &s3.ListObjectsV2Input{
			Bucket: &bucket, Prefix: &prefix, ContinuationToken: token,
		})
		if err != nil {
			if permanentS3(err) {
				err = fmt.Errorf("%w: %w", domain.ErrBadInput, err)
			}
			return nil, fmt.Errorf("list s3://%s/%s: %w", bucket, prefix, err)
		}
		for _, o := range out.Contents {
			key := aws.ToString(o.Key)
			keyBytes += int64(len(key))
			if len(objs) == s.limit.Objects || keyBytes > s.limit.KeyBytes {
				return nil, &ListLimitError{Bucket: bucket, Prefix: prefix, Limit: s.limit, Objects: len(objs) + 1, KeyBytes: keyBytes}
			}
			objs = append(objs, split.Object{Key: key, Size: aws.ToInt64(o.Size), ETag: unquoteETag(aws.ToString(o.ETag))})
		}
		if !aws.ToBool(out.IsTruncated) {
			return objs, nil
		}
		token = out.NextContinuationToken
	}
}

// MarkUncommitted tags every object under prefix (one attempt's outputs)
// as uncommitted, so the bucket's lifecycle rule expires them. Only
// attempts known to have ended without committing are marked: a committed
// attempt's outputs are never touched, and the common path (an attempt
// that commits) costs no request here.
func (s *Store) MarkUncommitted(ctx context.Context, prefix string) (int, error) {
	objs, err := s.List(ctx, s.bucket, prefix)
	if err != nil {
		return 0, err
	}
	for _, o := range objs {
		_, err := s.api.PutObjectTagging(ctx, &s3.PutObjectTaggingInput{
			Bucket: &s.bucket, Key: aws.String(o.Key),
			Tagging: &s3types.Tagging{TagSet: []s3types.Tag{{
				Key: aws.String(tuning.UncommittedTagKey), Value: aws.String(tuning.UncommittedTagValue),
			}}},
		})
		if err != nil {
			return 0, fmt.Errorf("tag s3://%s/%s uncommitted: %w", s.bucket, o.Key, err)
		}
	}
	return len(objs), nil
}
