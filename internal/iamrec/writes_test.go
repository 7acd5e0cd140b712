package iamrec

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/google/go-cmp/cmp"
)

type refuseAll struct{}

func (refuseAll) Do(*http.Request) (*http.Response, error) { return nil, errStop }

// The write recorder sees each object write as it goes out (puts, the
// steps of a multipart upload, tagging, deletes: one per key), with the
// conditional headers it carries, tagged with a function or not, and
// once per attempt; reads are not writes.
func TestWriteRecorderRecordsHeadersAsSent(t *testing.T) {
	t.Parallel()
	rec := NewWriteRecorder()
	cfg := aws.Config{
		Region: "us-east-1", Credentials: credentials.NewStaticCredentialsProvider("k", "s", ""),
		BaseEndpoint: aws.String("http://127.0.0.1:1"), HTTPClient: refuseAll{},
		Retryer: func() aws.Retryer {
			return retry.NewStandard(func(o *retry.StandardOptions) {
				o.MaxAttempts = 2
				o.Backoff = retry.BackoffDelayerFunc(func(int, error) (time.Duration, error) { return 0, nil })
			})
		},
	}
	rec.Install(&cfg)
	rec.Install(&cfg)
	s3c := s3.NewFromConfig(cfg, func(o *s3.Options) { o.UsePathStyle = true })
	ctx := context.Background()
	exec := WithFunction(ctx, FnExecutor)
	b := aws.String("B")
	calls := []func() error{
		func() error {
			_, err := s3c.PutObject(exec, &s3.PutObjectInput{Bucket: b, Key: aws.String("jobs/j/out/x"), Body: strings.NewReader("x"), IfNoneMatch: aws.String("*")})
			return err
		},
		func() error {
			_, err := s3c.PutObject(ctx, &s3.PutObjectInput{Bucket: b, Key: aws.String("inputs/o/a.txt"), Body: strings.NewReader("x")})
			return err
		},
		func() error {
			_, err := s3c.CreateMultipartUpload(exec, &s3.CreateMultipartUploadInput{Bucket: b, Key: aws.String("jobs/j/big")})
			return err
		},
		func() error {
			_, err := s3c.CompleteMultipartUpload(exec, &s3.CompleteMultipartUploadInput{Bucket: b, Key: aws.String("jobs/j/big"), UploadId: aws.String("u"), IfMatch: aws.String(`"e"`)})
			return err
		},
		func() error {
			_, err := s3c.GetObject(exec, &s3.GetObjectInput{Bucket: b, Key: aws.String("jobs/j/out/x")})
			return err
		},
		func() error {
			_, err := s3c.PutObjectTagging(exec, &s3.PutObjectTaggingInput{Bucket: b, Key: aws.String("jobs/j/out/x"), Tagging: &s3types.Tagging{TagSet: []s3types.Tag{}}})
			return err
		},
		func() error {
			_, err := s3c.DeleteObjects(ctx, &s3.DeleteObjectsInput{Bucket: b, Delete: &s3types.Delete{Objects: []s3types.ObjectIdentifier{{Key: aws.String("jobs/j/a")}, {Key: aws.String("jobs/j/b")}}}})
			return err
		},
	}
	for i, call := range calls {
		if err := call(); !errors.Is(err, errStop) {
			t.Fatalf("call %d: %v, want it refused before sending", i, err)
		}
	}
	want := []RecordedWrite{
		{ObjectWrite{Function: FnExecutor, Operation: "CompleteMultipartUpload", Action: "s3:PutObject", Bucket: "B", Key: "jobs/j/big", Creation: true, IfMatch: `"e"`, HasIfMatch: true}, 2},
		{ObjectWrite{Function: FnExecutor, Operation: "CreateMultipartUpload", Action: "s3:PutObject", Bucket: "B", Key: "jobs/j/big"}, 2},
		{ObjectWrite{Function: FnExecutor, Operation: "PutObject", Action: "s3:PutObject", Bucket: "B", Key: "jobs/j/out/x", Creation: true, IfNoneMatch: "*", HasIfNoneMatch: true}, 2},
		{ObjectWrite{Operation: "PutObject", Action: "s3:PutObject", Bucket: "B", Key: "inputs/o/a.txt", Creation: true}, 2},
		{ObjectWrite{Function: FnExecutor, Operation: "PutObjectTagging", Action: "s3:PutObjectTagging", Bucket: "B", Key: "jobs/j/out/x"}, 2},
		{ObjectWrite{Operation: "DeleteObjects", Action: "s3:DeleteObject", Bucket: "B", Key: "jobs/j/a"}, 2},
		{ObjectWrite{Operation: "DeleteObjects", Action: "s3:DeleteObject", Bucket: "B", Key: "jobs/j/b"}, 2},
	}
	if diff := cmp.Diff(sortWrites(want), rec.Writes()); diff != "" {
		t.Errorf("writes (-want +got):\n%s", diff)
	}
}

func sortWrites(w []RecordedWrite) []RecordedWrite {
	r := NewWriteRecorder()
	for _, x := range w {
		r.writes[x.ObjectWrite] = x.Requests
	}
	return r.Writes()
}
