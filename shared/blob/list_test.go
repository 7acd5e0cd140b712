package blob

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go"

	"github.com/batchwork/batchwork/shared/domain"
)

// pagedAPI serves a listing of n objects with keys of keyLen bytes in
// pages of pageSize, as S3 does, and counts the requests.
type pagedAPI struct {
	API                 // nil: only ListObjectsV2 is served
	n, keyLen, pageSize int
	requests            int
	err                 error
}

func (p *pagedAPI) key(i int) string {
	k := fmt.Sprintf("in/%08d", i)
	return k + strings.Repeat("k", max(p.keyLen-len(k), 0))
}

func (p *pagedAPI) ListObjectsV2(_ context.Context, in *s3.ListObjectsV2Input, _ ...func(*s3.Options)) (*s3.ListObjectsV2Output, error) {
	p.requests++
	if p.err != nil {
		return nil, p.err
	}
	from := 0
	if in.ContinuationToken != nil {
		fmt.Sscan(*in.ContinuationToken, &from)
	}
	to := min(from+p.pageSize, p.n)
	out := &s3.ListObjectsV2Output{IsTruncated: aws.Bool(to < p.n)}
	for i := from; i < to; i++ {
		out.Contents = append(out.Contents, s3types.Object{Key: aws.String(p.key(i)), Size: aws.Int64(1)})
	}
	if to < p.n {
		out.NextContinuationToken = aws.String(fmt.Sprint(to))
	}
	return out, nil
}

// A listing stops as soon as it passes its limit, without asking S3 for
// the rest, and says so as bad input (a job over it fails; retrying finds
// the same prefix).
func TestListLimit(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name                string
		n, keyLen, pageSize int
		limit               ListLimit
		want                int // objects listed; -1: the limit error
		wantRequests        int
		wantMsg             string
	}{
		{name: "under the limit", n: 25, pageSize: 10, limit: ListLimit{Objects: 30}, want: 25, wantRequests: 3},
		{name: "exactly the limit", n: 30, pageSize: 10, limit: ListLimit{Objects: 30}, want: 30, wantRequests: 3},
		{name: "one over the limit", n: 31, pageSize: 10, limit: ListLimit{Objects: 30}, want: -1, wantRequests: 4,
			wantMsg: "s3://b/in/ has more than 30 objects"},
		{name: "a bucket's worth: stops at the first page past the limit", n: 1_000_000, pageSize: 1000, limit: ListLimit{Objects: 2500}, want: -1, wantRequests: 3,
			wantMsg: "s3://b/in/ has more than 2500 objects"},
		{name: "long keys pass the key bytes first", n: 100, keyLen: 1000, pageSize: 10, limit: ListLimit{Objects: 100, KeyBytes: 20_000}, want: -1, wantRequests: 3,
			wantMsg: "s3://b/in/ has more than 20000 bytes of object keys"},
		{name: "the default: the task limit", n: 100_001, pageSize: 1000, want: -1, wantRequests: 101,
			wantMsg: "s3://b/in/ has more than 100000 objects"},
		{name: "the default: exactly the task limit", n: 100_000, pageSize: 1000, want: 100_000, wantRequests: 100},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			api := &pagedAPI{n: tt.n, keyLen: tt.keyLen, pageSize: tt.pageSize}
			s := New(api, "b")
			if tt.limit != (ListLimit{}) {
				s = s.WithListLimit(tt.limit)
			}
			objs, err := s.List(context.Background(), "b", "in/")
			if tt.want >= 0 {
				if err != nil || len(objs) != tt.want {
					t.Fatalf("List = %d objects, %v; want %d", len(objs), err, tt.want)
				}
			} else {
				var le *ListLimitError
				if !errors.As(err, &le) || !errors.Is(err, ErrListLimit) || !errors.Is(err, domain.ErrBadInput) || objs != nil {
					t.Fatalf("List = %d objects, %v (%T); want a *ListLimitError that is batch.ErrBadInput", len(objs), err, err)
				}
				if err.Error() != tt.wantMsg {
					t.Errorf("error %q, want %q", err, tt.wantMsg)
				}
			}
			if api.requests != tt.wantRequests {
				t.Errorf("%d ListObjectsV2 requests, want %d", api.requests, tt.wantRequests)
			}
		})
	}
}

// Other listing errors keep their meaning: a permanent one is bad input,
// anything else is transient.
func TestListErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		code    string
		wantBad bool
	}{
		{"NoSuchBucket", true},
		{"AccessDenied", true},
		{"SlowDown", false},
	}
	for _, tt := range tests {
		t.Run(tt.code, func(t *testing.T) {
			t.Parallel()
			api := &pagedAPI{err: &smithy.GenericAPIError{Code: tt.code}}
			_, err := New(api, "b").List(context.Background(), "b", "in/")
			if err == nil || errors.Is(err, domain.ErrBadInput) != tt.wantBad || errors.Is(err, ErrListLimit) {
				t.Errorf("List: %v; want an error, bad input %v, not a limit", err, tt.wantBad)
			}
		})
	}
}
