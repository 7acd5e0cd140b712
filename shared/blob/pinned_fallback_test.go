package blob

import (
	"context"
	"io"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/smithy-go"
)

// versionDeniedAPI answers a GET that names a version with AccessDenied
// (the reader lacks s3:GetObjectVersion, as under a shared bucket's policy
// that grants s3:GetObject only) and a plain GET with the object, whose
// ETag is etag.
type versionDeniedAPI struct {
	API
	etag, body string
	gets       []*s3.GetObjectInput
}

func (a *versionDeniedAPI) GetObject(_ context.Context, in *s3.GetObjectInput, _ ...func(*s3.Options)) (*s3.GetObjectOutput, error) {
	a.gets = append(a.gets, in)
	if in.VersionId != nil {
		return nil, &smithy.GenericAPIError{Code: "AccessDenied", Message: "Access Denied"}
	}
	if in.IfMatch != nil && *in.IfMatch != `"`+a.etag+`"` {
		return nil, &smithy.GenericAPIError{Code: "PreconditionFailed"}
	}
	return &s3.GetObjectOutput{Body: io.NopCloser(strings.NewReader(a.body)), ETag: aws.String(`"` + a.etag + `"`)}, nil
}

// A planner that may list a bucket's versions does not make its objects
// readable by version: when the version read is refused for want of
// s3:GetObjectVersion, the read falls back to the ETag pin (If-Match on
// the current object), which guarantees the planned bytes as it did
// before version pinning, instead of failing every task of the job.
func TestOpenPinnedVersionDeniedFallsBackToETag(t *testing.T) {
	t.Parallel()
	api := &versionDeniedAPI{etag: "e1", body: "planned"}
	s := New(api, "data")
	rc, err := s.OpenPinnedVersion(context.Background(), "shared", "in/a.csv", "e1", "v1", 0)
	if err != nil {
		t.Fatalf("OpenPinnedVersion with s3:GetObjectVersion denied: %v; want the ETag-pinned read", err)
	}
	defer rc.Close()
	got, _ := io.ReadAll(rc)
	if string(got) != "planned" {
		t.Fatalf("read %q, want %q", got, "planned")
	}
	last := api.gets[len(api.gets)-1]
	if last.VersionId != nil || aws.ToString(last.IfMatch) != `"e1"` {
		t.Fatalf("fallback GET: version %v, If-Match %v; want no version and If-Match \"e1\"", aws.ToString(last.VersionId), aws.ToString(last.IfMatch))
	}
}
