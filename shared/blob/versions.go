package blob

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go"

	"github.com/batchwork/batchwork/shared/split"
)

// versionAPI is the slice of the S3 client that version pinning uses. The
// SDK's client has it; a fake API without it plans with ETags alone.
type versionAPI interface {
	GetBucketVersioning(context.Context, *s3.GetBucketVersioningInput, ...func(*s3.Options)) (*s3.GetBucketVersioningOutput, error)
	ListObjectVersions(context.Context, *s3.ListObjectVersionsInput, ...func(*s3.Options)) (*s3.ListObjectVersionsOutput, error)
}

// VersionScanFactor bounds the version listing of PinVersions: it reads at
// most this many version entries per listed object (and at least
// VersionScanMin). A prefix whose keys have more old versions than that
// costs no more pages: the objects not found by then keep their ETag pin
// alone.
const (
	VersionScanFactor = 4
	VersionScanMin    = 1000
)

// PinVersions adds to the objects of a listing of bucket under prefix the
// version ids they had as listed, when the bucket's versioning is Enabled:
// a read of the version (OpenPinnedVersion) then reads the planned bytes
// even after the key is overwritten. It asks for the bucket's versioning
// once (GetBucketVersioning) and lists the prefix's versions
// (ListObjectVersions, bounded to the prefix): a page holds up to 1,000
// versions, where a HeadObject per object would cost one request each.
//
// A listed object is matched to a version of its key with its listed
// ETag, so an overwrite between the two listings pins the version that
// was listed, not the newer one. Objects left unmatched (no such version
// any more, or past the scan bound) keep their ETag pin alone, as does
// every object of a bucket that is unversioned or Suspended (a suspended
// bucket overwrites the "null" version in place), of a bucket whose
// policy lets the planner list objects but not read its versioning or
// versions (AccessDenied), and of the data bucket outside its inputs
// area: published outputs there are written once and never change.
func (s *Store) PinVersions(ctx context.Context, bucket, prefix string, objs []split.Object) ([]split.Object, error) {
	api, ok := s.api.(versionAPI)
	if !ok || len(objs) == 0 || (bucket == s.bucket && !strings.HasPrefix(prefix, InputsArea)) {
		return objs, nil
	}
	v, err := api.GetBucketVersioning(ctx, &s3.GetBucketVersioningInput{Bucket: &bucket})
	if err != nil {
		if denied(err) {
			return objs, nil
		}
		return nil, fmt.Errorf("get versioning of s3://%s: %w", bucket, err)
	}
	if v.Status != s3types.BucketVersioningStatusEnabled {
		return objs, nil
	}
	want := make(map[string]string, len(objs)) // key -> listed ETag, while unmatched
	for _, o := range objs {
		if o.ETag != "" {
			want[o.Key] = o.ETag
		}
	}
	found := make(map[string]string, len(want))
	budget := max(VersionScanFactor*len(objs), VersionScanMin)
	in := &s3.ListObjectVersionsInput{Bucket: &bucket, Prefix: &prefix}
	for len(want) > 0 && budget > 0 {
		out, err := api.ListObjectVersions(ctx, in)
		if err != nil {
			if denied(err) {
				return objs, nil
			}
			return nil, fmt.Errorf("list versions of s3://%s/%s: %w", bucket, prefix, err)
		}
		for _, ov := range out.Versions {
			key, id := aws.ToString(ov.Key), aws.ToString(ov.VersionId)
			if tag, ok := want[key]; ok && id != "" && unquoteETag(aws.ToString(ov.ETag)) == tag {
				found[key] = id
				delete(want, key)
			}
		}
		budget -= len(out.Versions) + len(out.DeleteMarkers)
		if !aws.ToBool(out.IsTruncated) {
			break
		}
		in.KeyMarker, in.VersionIdMarker = out.NextKeyMarker, out.NextVersionIdMarker
	}
	pinned := make([]split.Object, len(objs))
	for i, o := range objs {
		o.Version = found[o.Key]
		pinned[i] = o
	}
	return pinned, nil
}

// denied reports S3's refusal of a request for want of permission.
func denied(err error) bool {
	var ae smithy.APIError
	return errors.As(err, &ae) && ae.ErrorCode() == "AccessDenied"
}

// OpenPinnedVersion is OpenPinned of one version of an object: the GET
// names the version (VersionId) as well as its ETag (If-Match). A version
// never changes, so an overwrite of the key does not concern the read;
// only a version deleted since planning does, which gives an
// *InputChangedError naming it. An empty version is OpenPinned.
func (s *Store) OpenPinnedVersion(ctx context.Context, bucket, key, etag, version string, start int64) (io.ReadCloser, error) {
	if version == "" {
		return s.OpenPinned(ctx, bucket, key, etag, start)
	}
	in := &s3.GetObjectInput{Bucket: &bucket, Key: &key, VersionId: &version}
	if etag = unquoteETag(etag); etag != "" {
		in.IfMatch = aws.String(`"` + etag + `"`)
	}
	if start > 0 {
		in.Range = aws.String(fmt.Sprintf("bytes=%d-", start))
	}
	out, err := s.api.GetObject(ctx, in)
	if err == nil {
		return out.Body, nil
	}
	var ae smithy.APIError
	code := ""
	if errors.As(err, &ae) {
		code = ae.ErrorCode()
	}
	switch {
	case code == "NoSuchVersion" || code == "NoSuchKey" || httpStatus(err) == http.StatusNotFound:
		return nil, &InputChangedError{Bucket: bucket, Key: key, Planned: etag, Version: version, Deleted: true}
	case httpStatus(err) == http.StatusPreconditionFailed:
		// A version's ETag cannot change: the plan matched them wrongly,
		// and reading the version would not read what was planned.
		return nil, &InputChangedError{Bucket: bucket, Key: key, Planned: etag, Version: version}
	case etag != "" && denied(err):
		// A version read is authorized by s3:GetObjectVersion, which a
		// shared bucket's policy may withhold while granting the listing
		// the planner pinned with: the ETag pin still guarantees the
		// planned bytes (or an *InputChangedError), as before pinning.
		return s.OpenPinned(ctx, bucket, key, etag, start)
	}
	return nil, fmt.Errorf("get s3://%s/%s version %s: %w", bucket, key, version, err)
}

// VersionOpener is Opener for the splits of one object pinned to a
// version (and its ETag); its error is PinnedOpener's, always nil here.
func (s *Store) VersionOpener(bucket, etag, version string) (split.RangeOpener, error) {
	return func(ctx context.Context, key string, start int64) (io.ReadCloser, error) {
		return s.OpenPinnedVersion(ctx, bucket, key, etag, version, start)
	}, nil
}
