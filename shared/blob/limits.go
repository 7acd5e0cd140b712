package blob

import (
	"fmt"

	"github.com/batchwork/batchwork/shared/domain"
	"github.com/batchwork/batchwork/shared/spec"
)

// ListLimit bounds one listing: how many objects, and how many bytes of
// keys, it may hold before it gives up.
type ListLimit struct {
	Objects  int
	KeyBytes int64
}

// DefaultListLimit lets a listing hold one input object per task a stage
// may have (a prefix with more non-empty objects plans more splits than
// spec.MaxPartitions anyway), and 32 MiB of keys: 100,000 keys of 335
// bytes on average, where S3 allows 1,024. Both keep a listing far inside
// the 256 MB of the api and sweep functions.
var DefaultListLimit = ListLimit{Objects: spec.MaxPartitions, KeyBytes: 32 << 20}

func (l ListLimit) withDefaults() ListLimit {
	if l.Objects <= 0 {
		l.Objects = DefaultListLimit.Objects
	}
	if l.KeyBytes <= 0 {
		l.KeyBytes = DefaultListLimit.KeyBytes
	}
	return l
}

// ErrListLimit is what every listing over its limit is: bad input, since
// listing the same prefix again finds as much.
var ErrListLimit = fmt.Errorf("%w: listing over its limit", domain.ErrBadInput)

// ListLimitError says which limit a listing passed.
type ListLimitError struct {
	Bucket, Prefix string
	Limit          ListLimit
	// Objects and KeyBytes are what the listing had seen when it stopped.
	Objects  int
	KeyBytes int64
}

func (e *ListLimitError) Error() string {
	if e.KeyBytes > e.Limit.KeyBytes {
		return fmt.Sprintf("s3://%s/%s has more than %d bytes of object keys", e.Bucket, e.Prefix, e.Limit.KeyBytes)
	}
	return fmt.Sprintf("s3://%s/%s has more than %d objects", e.Bucket, e.Prefix, e.Limit.Objects)
}

// Unwrap makes the error ErrListLimit, and so domain.ErrBadInput.
func (e *ListLimitError) Unwrap() error { return ErrListLimit }
