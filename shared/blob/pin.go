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
	"github.com/aws/smithy-go"

	"github.com/batchwork/batchwork/shared/domain"
	"github.com/batchwork/batchwork/shared/split"
)

// ErrInputChanged is domain.ErrInputChanged, the outcome of reading an
// input object that no longer has its planned ETag.
var ErrInputChanged = domain.ErrInputChanged

// InputChangedError names the object and what changed. It is
// domain.ErrPermanent: no retry reads the planned object again, and
// reading the new one would mix two versions of the input in one job's
// output.
type InputChangedError struct {
	Bucket, Key string
	// Planned is the ETag the stage was planned with; Now the object's
	// ETag now ("" when it could not be read), unless Deleted.
	Planned, Now string
	Deleted      bool
	// Version is the version id the stage was planned with, on a
	// versioned bucket (versions.go): then Deleted says that version is
	// gone, and Now is unused.
	Version string
}

func (e *InputChangedError) Error() string {
	if e.Version != "" {
		what := "is gone"
		if !e.Deleted {
			what = "no longer has ETag " + e.Planned
		}
		return fmt.Sprintf("input s3://%s/%s changed while the job ran: version %s, pinned at planning, %s; rerun the job to read the new input", e.Bucket, e.Key, e.Version, what)
	}
	now := "now " + e.Now
	switch {
	case e.Deleted:
		now = "now deleted"
	case e.Now == "":
		now = "now different"
	}
	return fmt.Sprintf("input s3://%s/%s changed while the job ran: ETag %s at planning, %s; rerun the job to read the new input", e.Bucket, e.Key, e.Planned, now)
}

func (e *InputChangedError) Unwrap() []error { return []error{ErrInputChanged, domain.ErrPermanent} }

// unquoteETag strips the quotes S3 puts around an ETag: stored without
// them, a pin costs two bytes less on every task record.
func unquoteETag(etag string) string { return strings.Trim(etag, `"`) }

// OpenPinned is Open of an object that must still have ETag etag (as
// listed, with or without quotes): the GetObject carries If-Match, which
// S3 evaluates against the object as it is when the request arrives, and
// once a GET has started S3 streams that one version to its end, so every
// byte read comes from the planned object. A changed or deleted object
// gives an *InputChangedError. An empty etag is a plain Open.
func (s *Store) OpenPinned(ctx context.Context, bucket, key, etag string, start int64) (io.ReadCloser, error) {
	if etag == "" {
		return s.Open(ctx, bucket, key, start)
	}
	etag = unquoteETag(etag)
	in := &s3.GetObjectInput{Bucket: &bucket, Key: &key, IfMatch: aws.String(`"` + etag + `"`)}
	if start > 0 {
		in.Range = aws.String(fmt.Sprintf("bytes=%d-", start))
	}
	out, err := s.api.GetObject(ctx, in)
	if err == nil {
		return out.Body, nil
	}
	// 412 is the answer If-Match promises. A deleted object is 404, and
	// one that shrank below start may be refused for its range (416)
	// before its ETag is compared: both are changes too, and a probe of
	// the object as it is now says which.
	var ae smithy.APIError
	code := httpStatus(err)
	if code == http.StatusPreconditionFailed || code == http.StatusRequestedRangeNotSatisfiable ||
		(errors.As(err, &ae) && ae.ErrorCode() == "NoSuchKey") {
		if cerr := s.probeChange(ctx, bucket, key, etag); cerr != nil {
			return nil, cerr
		}
	}
	if errors.As(err, &ae) && ae.ErrorCode() == "NoSuchKey" {
		return nil, fmt.Errorf("get s3://%s/%s: %w", bucket, key, domain.ErrNotFound)
	}
	return nil, fmt.Errorf("get s3://%s/%s: %w", bucket, key, err)
}

// probeChange reads the object's current ETag (a one-byte GET: the
// adapter's API has no HeadObject, and GetObject needs no other grant)
// and returns an *InputChangedError unless it still is etag.
func (s *Store) probeChange(ctx context.Context, bucket, key, etag string) error {
	out, err := s.api.GetObject(ctx, &s3.GetObjectInput{Bucket: &bucket, Key: &key, Range: aws.String("bytes=0-0")})
	var ae smithy.APIError
	switch {
	case err == nil:
		out.Body.Close()
		if now := unquoteETag(aws.ToString(out.ETag)); now != etag {
			return &InputChangedError{Bucket: bucket, Key: key, Planned: etag, Now: now}
		}
		return nil
	case errors.As(err, &ae) && ae.ErrorCode() == "NoSuchKey":
		return &InputChangedError{Bucket: bucket, Key: key, Planned: etag, Deleted: true}
	case httpStatus(err) == http.StatusRequestedRangeNotSatisfiable:
		// Now empty: a one-byte range of an empty object is refused.
		return &InputChangedError{Bucket: bucket, Key: key, Planned: etag}
	}
	return nil // the probe failed; the caller reports the read's error
}

// PinnedOpener is Opener for the splits of one pinned object. It has an
// error so that a store that cannot pin can say so (the executor's port);
// a Store always can.
func (s *Store) PinnedOpener(bucket, etag string) (split.RangeOpener, error) {
	return func(ctx context.Context, key string, start int64) (io.ReadCloser, error) {
		return s.OpenPinned(ctx, bucket, key, etag, start)
	}, nil
}
