package blob

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
)

// Size returns the size of an object as a split pinned to etag and
// version reads it: a Parquet reader needs it to find the footer at the
// object's end. It reads one byte (the adapter's API has no HeadObject)
// and takes the total from the answer's Content-Range; a pin the object
// no longer matches fails as the split's reads would.
func (s *Store) Size(ctx context.Context, bucket, key, etag, version string) (int64, error) {
	in := &s3.GetObjectInput{Bucket: &bucket, Key: &key, Range: aws.String("bytes=0-0")}
	if etag = unquoteETag(etag); etag != "" {
		in.IfMatch = aws.String(`"` + etag + `"`)
	}
	if version != "" {
		in.VersionId = &version
	}
	out, err := s.api.GetObject(ctx, in)
	if err != nil && version != "" && etag != "" && denied(err) {
		// As OpenPinnedVersion: the ETag pin alone still holds.
		in.VersionId = nil
		out, err = s.api.GetObject(ctx, in)
	}
	if err != nil {
		return 0, fmt.Errorf("size of s3://%s/%s: %w", bucket, key, err)
	}
	io.Copy(io.Discard, out.Body)
	out.Body.Close()
	cr := aws.ToString(out.ContentRange)
	i := strings.LastIndexByte(cr, '/')
	n, perr := strconv.ParseInt(cr[i+1:], 10, 64)
	if i < 0 || perr != nil {
		return 0, fmt.Errorf("size of s3://%s/%s: Content-Range %q has no total", bucket, key, cr)
	}
	return n, nil
}
