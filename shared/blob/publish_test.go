package blob

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sort"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"
	"github.com/google/go-cmp/cmp"

	"github.com/batchwork/batchwork/shared/domain"
)

// Final names sort in the order the manifest lists outputs (stage by
// stage, partition, then part), and only a folder's claim and _SUCCESS
// count as markers.
func TestPublishedKeys(t *testing.T) {
	t.Parallel()
	const f = "outputs/k/wc/"
	manifestOrder := []string{
		PublishedKey(f, "reduce", 0, 0), PublishedKey(f, "reduce", 0, 1), PublishedKey(f, "reduce", 0, 12),
		PublishedKey(f, "reduce", 1, 0), PublishedKey(f, "reduce", 10, 0), PublishedKey(f, "reduce", 99999, 0),
	}
	want := []string{
		"outputs/k/wc/reduce/part-00000", "outputs/k/wc/reduce/part-00000-00001", "outputs/k/wc/reduce/part-00000-00012",
		"outputs/k/wc/reduce/part-00001", "outputs/k/wc/reduce/part-00010", "outputs/k/wc/reduce/part-99999",
	}
	if diff := cmp.Diff(want, manifestOrder); diff != "" {
		t.Fatalf("names (-want +got):\n%s", diff)
	}
	sorted := append([]string(nil), manifestOrder...)
	sort.Strings(sorted)
	if diff := cmp.Diff(manifestOrder, sorted); diff != "" {
		t.Errorf("key order differs from manifest order (-manifest +sorted):\n%s", diff)
	}
	for key, want := range map[string]bool{
		f + "_SUCCESS": true, f + "_batchwork.json": true, "_SUCCESS": true,
		f + "reduce/part-00000": false, f + "x_SUCCESS": false, f + "_SUCCESS/part-00000": false, f + "_batchwork.json.bak": false,
	} {
		if got := IsPublishMarker(key); got != want {
			t.Errorf("IsPublishMarker(%q) = %v, want %v", key, got, want)
		}
	}
}

// copyAPI serves CopyObject with the errors given in turn, and the
// requests of a multipart copy.
type copyAPI struct {
	API
	MultipartAPI
	copyErrs []error // CopyObject answers, in turn; nil once used up
	size     int64   // the source's size
	calls    []string
}

func (c *copyAPI) CopyObject(_ context.Context, in *s3.CopyObjectInput, _ ...func(*s3.Options)) (*s3.CopyObjectOutput, error) {
	c.calls = append(c.calls, fmt.Sprintf("copy %s -> %s/%s if-none-match %s", aws.ToString(in.CopySource), aws.ToString(in.Bucket), aws.ToString(in.Key), aws.ToString(in.IfNoneMatch)))
	if len(c.copyErrs) == 0 {
		return &s3.CopyObjectOutput{}, nil
	}
	err := c.copyErrs[0]
	c.copyErrs = c.copyErrs[1:]
	return nil, err
}

func (c *copyAPI) HeadObject(_ context.Context, in *s3.HeadObjectInput, _ ...func(*s3.Options)) (*s3.HeadObjectOutput, error) {
	c.calls = append(c.calls, "head "+aws.ToString(in.Key))
	return &s3.HeadObjectOutput{ContentLength: aws.Int64(c.size)}, nil
}

func (c *copyAPI) CreateMultipartUpload(_ context.Context, in *s3.CreateMultipartUploadInput, _ ...func(*s3.Options)) (*s3.CreateMultipartUploadOutput, error) {
	c.calls = append(c.calls, "create "+aws.ToString(in.Key))
	return &s3.CreateMultipartUploadOutput{UploadId: aws.String("u1")}, nil
}

func (c *copyAPI) UploadPartCopy(_ context.Context, in *s3.UploadPartCopyInput, _ ...func(*s3.Options)) (*s3.UploadPartCopyOutput, error) {
	c.calls = append(c.calls, fmt.Sprintf("part %d %s", aws.ToInt32(in.PartNumber), aws.ToString(in.CopySourceRange)))
	return &s3.UploadPartCopyOutput{CopyPartResult: &s3types.CopyPartResult{ETag: aws.String("e")}}, nil
}

func (c *copyAPI) CompleteMultipartUpload(_ context.Context, in *s3.CompleteMultipartUploadInput, _ ...func(*s3.Options)) (*s3.CompleteMultipartUploadOutput, error) {
	c.calls = append(c.calls, fmt.Sprintf("complete %d parts if-none-match %s", len(in.MultipartUpload.Parts), aws.ToString(in.IfNoneMatch)))
	return &s3.CompleteMultipartUploadOutput{}, nil
}

func statusErr(code int, apiCode string) error {
	return &smithyhttp.ResponseError{
		Response: &smithyhttp.Response{Response: &http.Response{StatusCode: code}},
		Err:      &smithy.GenericAPIError{Code: apiCode},
	}
}

// A copy is conditional: an existing destination is domain.ErrExists, a
// conflict is retried, a refusal is ErrRefused, and a source over 5 GB,
// which CopyObject refuses, is copied in 1 GiB parts, completed
// conditionally.
func TestCopyIfAbsent(t *testing.T) {
	t.Parallel()
	const src = "bw/jobs/j/out/s/p000000/a1/part-00000"
	copyCall := "copy " + src + " -> out/f/s/part-00000 if-none-match *"
	cases := []struct {
		name      string
		errs      []error
		size      int64
		wantErr   error
		wantCalls []string
	}{
		{name: "copied", wantCalls: []string{copyCall}},
		{name: "already there", errs: []error{statusErr(412, "PreconditionFailed")}, wantErr: domain.ErrExists, wantCalls: []string{copyCall}},
		{name: "a conflict is retried", errs: []error{statusErr(409, "ConditionalRequestConflict")}, wantCalls: []string{copyCall, copyCall}},
		{name: "access denied", errs: []error{statusErr(403, "AccessDenied")}, wantErr: ErrRefused, wantCalls: []string{copyCall}},
		{name: "over 5 GB: in parts", errs: []error{statusErr(400, "InvalidRequest")}, size: 5<<30 + 1<<30 + 7,
			wantCalls: []string{copyCall, "head jobs/j/out/s/p000000/a1/part-00000", "create f/s/part-00000",
				"part 1 bytes=0-1073741823", "part 2 bytes=1073741824-2147483647", "part 3 bytes=2147483648-3221225471",
				"part 4 bytes=3221225472-4294967295", "part 5 bytes=4294967296-5368709119", "part 6 bytes=5368709120-6442450943",
				"part 7 bytes=6442450944-6442450950", "complete 7 parts if-none-match *"}},
		{name: "another invalid request is refused", errs: []error{statusErr(400, "InvalidRequest")}, size: 10, wantErr: ErrRefused,
			wantCalls: []string{copyCall, "head jobs/j/out/s/p000000/a1/part-00000"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			api := &copyAPI{copyErrs: tc.errs, size: tc.size}
			s := New(api, "bw")
			err := s.CopyIfAbsent(context.Background(), "jobs/j/out/s/p000000/a1/part-00000", "out", "f/s/part-00000")
			if !errors.Is(err, tc.wantErr) || (tc.wantErr == nil) != (err == nil) {
				t.Fatalf("CopyIfAbsent: %v, want %v", err, tc.wantErr)
			}
			if diff := cmp.Diff(tc.wantCalls, api.calls); diff != "" {
				t.Errorf("requests (-want +got):\n%s", diff)
			}
		})
	}
}

// A publishing request's answer is permanent (ErrRefused, which fails the
// job) when no retry changes it: any 4xx but throttling, conflicts,
// failed preconditions and the few codes that pass, and 301. A publish
// kept retrying one of these kept its job PUBLISHING for ever.
func TestPermanentPublishAnswers(t *testing.T) {
	t.Parallel()
	answer := func(status int, code string) error {
		return &smithyhttp.ResponseError{
			Response: &smithyhttp.Response{Response: &http.Response{StatusCode: status}},
			Err:      &smithy.GenericAPIError{Code: code, Message: "m"},
		}
	}
	for _, c := range []struct {
		status    int
		code      string
		permanent bool
	}{
		{301, "PermanentRedirect", true},
		{400, "AuthorizationHeaderMalformed", true},
		{403, "InvalidObjectState", true},
		{404, "NoSuchKey", true},
		{400, "KMS.DisabledException", true},
		{403, "AccessDenied", true},
		{404, "NoSuchBucket", true},
		{400, "RequestTimeout", false},
		{400, "ExpiredToken", false},
		{403, "RequestTimeTooSkewed", false},
		{409, "OperationAborted", false},
		{409, "ConditionalRequestConflict", false},
		{412, "PreconditionFailed", false},
		{429, "TooManyRequests", false},
		{500, "InternalError", false},
		{503, "SlowDown", false},
	} {
		err := fmt.Errorf("copy: %w", answer(c.status, c.code))
		if got := permanentPublish(err); got != c.permanent {
			t.Errorf("%d %s: permanent %v, want %v", c.status, c.code, got, c.permanent)
		}
		if got := errors.Is(refusedIf(err), ErrRefused); got != c.permanent {
			t.Errorf("%d %s: refused %v, want %v", c.status, c.code, got, c.permanent)
		}
	}
	if permanentPublish(errors.New("connection reset")) || permanentPublish(nil) {
		t.Errorf("a network error or none counted as permanent")
	}
}
