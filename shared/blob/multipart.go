package blob

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go"

	"github.com/batchwork/batchwork/shared/domain"
)

// Multipart uploads: how an attempt streams an output too large to hold
// in memory. The object appears only at CompleteMultipartUpload, which
// carries If-None-Match: * like every object-creating write under jobs/
// (the bucket policy denies it otherwise; CreateMultipartUpload and
// UploadPart cannot carry the header and stay allowed). AWS documents the
// conditional completion ("Conditional writes", 2024); moto 5.2.5 honours
// it too. Nothing here relies on emulator behaviour AWS does not promise:
// a completion that finds the key taken is domain.ErrExists, whatever the
// emulator would have done with a second completion.

// MultipartAPI is the slice of the S3 client multipart uploads and copies
// use.
type MultipartAPI interface {
	CreateMultipartUpload(context.Context, *s3.CreateMultipartUploadInput, ...func(*s3.Options)) (*s3.CreateMultipartUploadOutput, error)
	UploadPart(context.Context, *s3.UploadPartInput, ...func(*s3.Options)) (*s3.UploadPartOutput, error)
	CompleteMultipartUpload(context.Context, *s3.CompleteMultipartUploadInput, ...func(*s3.Options)) (*s3.CompleteMultipartUploadOutput, error)
	AbortMultipartUpload(context.Context, *s3.AbortMultipartUploadInput, ...func(*s3.Options)) (*s3.AbortMultipartUploadOutput, error)
	CopyObject(context.Context, *s3.CopyObjectInput, ...func(*s3.Options)) (*s3.CopyObjectOutput, error)
	UploadPartCopy(context.Context, *s3.UploadPartCopyInput, ...func(*s3.Options)) (*s3.UploadPartCopyOutput, error)
	HeadObject(context.Context, *s3.HeadObjectInput, ...func(*s3.Options)) (*s3.HeadObjectOutput, error)
}

// S3's part sizes: every part but the last holds at least MinPartSize
// bytes, and an upload has at most MaxParts parts.
const (
	MinPartSize = 5 << 20
	MaxParts    = 10000
)

// CompletedPart is an uploaded part, as CompleteMultipartUpload names it.
type CompletedPart struct {
	Number int32
	ETag   string
}

func (s *Store) multipart() (MultipartAPI, error) {
	m, ok := s.api.(MultipartAPI)
	if !ok {
		return nil, errors.New("the store's S3 client does not do multipart uploads or copies")
	}
	return m, nil
}

// CanMultipart is nil: a Store streams outputs in parts. (A client
// without MultipartAPI fails each request instead, with the reason.)
func (s *Store) CanMultipart() error { return nil }

// CreateMultipart starts a multipart upload at key of the store's bucket
// and returns its upload id.
func (s *Store) CreateMultipart(ctx context.Context, key string) (string, error) {
	m, err := s.multipart()
	if err != nil {
		return "", err
	}
	out, err := m.CreateMultipartUpload(ctx, &s3.CreateMultipartUploadInput{Bucket: &s.bucket, Key: &key})
	if err != nil {
		return "", fmt.Errorf("create multipart upload s3://%s/%s: %w", s.bucket, key, err)
	}
	return aws.ToString(out.UploadId), nil
}

// UploadPart uploads part n (from 1) of an upload.
func (s *Store) UploadPart(ctx context.Context, key, uploadID string, n int32, body []byte) (CompletedPart, error) {
	m, err := s.multipart()
	if err != nil {
		return CompletedPart{}, err
	}
	out, err := m.UploadPart(ctx, &s3.UploadPartInput{
		Bucket: &s.bucket, Key: &key, UploadId: &uploadID, PartNumber: aws.Int32(n),
		Body: bytes.NewReader(body), ContentLength: aws.Int64(int64(len(body))),
	})
	if err != nil {
		return CompletedPart{}, fmt.Errorf("upload part %d of s3://%s/%s: %w", n, s.bucket, key, err)
	}
	return CompletedPart{Number: n, ETag: aws.ToString(out.ETag)}, nil
}

// CompleteMultipartIfAbsent completes an upload with If-None-Match: *, so
// it only ever creates its object: an existing object gives
// domain.ErrExists (412) and the upload stays open for the caller to
// abort. A 409 (a concurrent conditional write) is not retried: AWS asks
// for the upload to be started again, which is the caller's to decide.
func (s *Store) CompleteMultipartIfAbsent(ctx context.Context, key, uploadID string, parts []CompletedPart) error {
	m, err := s.multipart()
	if err != nil {
		return err
	}
	done := make([]s3types.CompletedPart, len(parts))
	for i, p := range parts {
		done[i] = s3types.CompletedPart{PartNumber: aws.Int32(p.Number), ETag: aws.String(p.ETag)}
	}
	_, err = m.CompleteMultipartUpload(ctx, &s3.CompleteMultipartUploadInput{
		Bucket: &s.bucket, Key: &key, UploadId: &uploadID, IfNoneMatch: aws.String("*"),
		MultipartUpload: &s3types.CompletedMultipartUpload{Parts: done},
	})
	switch {
	case err == nil:
		return nil
	case httpStatus(err) == http.StatusPreconditionFailed:
		return fmt.Errorf("complete multipart upload s3://%s/%s: %w", s.bucket, key, domain.ErrExists)
	}
	return fmt.Errorf("complete multipart upload s3://%s/%s: %w", s.bucket, key, err)
}

// AbortMultipart aborts an upload, freeing its parts. An upload that is
// already gone (aborted or completed) is no error.
func (s *Store) AbortMultipart(ctx context.Context, key, uploadID string) error {
	m, err := s.multipart()
	if err != nil {
		return err
	}
	_, err = m.AbortMultipartUpload(ctx, &s3.AbortMultipartUploadInput{Bucket: &s.bucket, Key: &key, UploadId: &uploadID})
	var ae smithy.APIError
	if err == nil || errors.As(err, &ae) && ae.ErrorCode() == "NoSuchUpload" {
		return nil
	}
	return fmt.Errorf("abort multipart upload s3://%s/%s: %w", s.bucket, key, err)
}
