package blob

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go"
	"github.com/google/go-cmp/cmp"

	"github.com/batchwork/batchwork/shared/split"
)

// versionsAPI serves a bucket's versioning and its version listing, in
// pages of pageSize, and counts the requests.
type versionsAPI struct {
	API      // nil: only the version calls are served
	status   s3types.BucketVersioningStatus
	versions []s3types.ObjectVersion
	pageSize int
	err      error // of GetBucketVersioning
	listErr  error
	// lists counts ListObjectVersions requests.
	lists int
}

func (v *versionsAPI) GetBucketVersioning(context.Context, *s3.GetBucketVersioningInput, ...func(*s3.Options)) (*s3.GetBucketVersioningOutput, error) {
	if v.err != nil {
		return nil, v.err
	}
	return &s3.GetBucketVersioningOutput{Status: v.status}, nil
}

func (v *versionsAPI) ListObjectVersions(_ context.Context, in *s3.ListObjectVersionsInput, _ ...func(*s3.Options)) (*s3.ListObjectVersionsOutput, error) {
	v.lists++
	if v.listErr != nil {
		return nil, v.listErr
	}
	from := 0
	if in.VersionIdMarker != nil {
		fmt.Sscan(*in.VersionIdMarker, &from)
	}
	to := min(from+v.pageSize, len(v.versions))
	out := &s3.ListObjectVersionsOutput{Versions: v.versions[from:to], IsTruncated: aws.Bool(to < len(v.versions))}
	if to < len(v.versions) {
		out.NextKeyMarker, out.NextVersionIdMarker = v.versions[to-1].Key, aws.String(fmt.Sprint(to))
	}
	return out, nil
}

func ver(key, id, etag string, latest bool) s3types.ObjectVersion {
	return s3types.ObjectVersion{Key: aws.String(key), VersionId: aws.String(id), ETag: aws.String(`"` + etag + `"`), IsLatest: aws.Bool(latest)}
}

func TestPinVersions(t *testing.T) {
	t.Parallel()
	objs := []split.Object{{Key: "in/a", Size: 1, ETag: "ea"}, {Key: "in/b", Size: 1, ETag: "eb"}}
	denied := &smithy.GenericAPIError{Code: "AccessDenied"}
	tests := []struct {
		name     string
		api      *versionsAPI
		bucket   string // default "in-bucket"
		prefix   string // default "in/"
		want     map[string]string
		err      bool
		maxLists int
	}{
		{name: "versioned: each object pinned to its listed version", want: map[string]string{"in/a": "va1", "in/b": "vb1"},
			api: &versionsAPI{status: s3types.BucketVersioningStatusEnabled, pageSize: 1000,
				versions: []s3types.ObjectVersion{ver("in/a", "va1", "ea", true), ver("in/a", "va0", "old", false), ver("in/b", "vb1", "eb", true)}}},
		// b was overwritten between the object listing and the version
		// listing: the version with the listed ETag is the one planned.
		{name: "an overwrite between the listings pins the listed version", want: map[string]string{"in/a": "va1", "in/b": "vb1"},
			api: &versionsAPI{status: s3types.BucketVersioningStatusEnabled, pageSize: 1,
				versions: []s3types.ObjectVersion{ver("in/a", "va1", "ea", true), ver("in/b", "vb2", "new", true), ver("in/b", "vb1", "eb", false)}}},
		{name: "a version gone before the listing keeps its ETag pin alone", want: map[string]string{"in/a": "va1", "in/b": ""},
			api: &versionsAPI{status: s3types.BucketVersioningStatusEnabled, pageSize: 1000,
				versions: []s3types.ObjectVersion{ver("in/a", "va1", "ea", true), ver("in/b", "vb2", "new", true)}}},
		{name: "unversioned", want: map[string]string{"in/a": "", "in/b": ""}, api: &versionsAPI{}, maxLists: 0},
		{name: "suspended", want: map[string]string{"in/a": "", "in/b": ""},
			api: &versionsAPI{status: s3types.BucketVersioningStatusSuspended, versions: []s3types.ObjectVersion{ver("in/a", "null", "ea", true)}}},
		{name: "versioning not readable: ETag pins", want: map[string]string{"in/a": "", "in/b": ""}, api: &versionsAPI{err: denied}},
		{name: "versions not listable: ETag pins", want: map[string]string{"in/a": "", "in/b": ""},
			api: &versionsAPI{status: s3types.BucketVersioningStatusEnabled, listErr: denied}, maxLists: 1},
		{name: "a transient error fails the plan, to be retried", err: true, api: &versionsAPI{err: errors.New("throttled")}},
		{name: "the data bucket outside its inputs area is not versioned", bucket: "data", prefix: "outputs/k/f/",
			want: map[string]string{"in/a": "", "in/b": ""}, api: &versionsAPI{err: errors.New("not asked")}},
		// The scan stops at its bound (max(4 per object, 1000) entries):
		// 2,000 old versions of a stand before b's.
		{name: "past the scan bound, ETag pins", want: map[string]string{"in/a": "", "in/b": ""}, maxLists: 2,
			api: &versionsAPI{status: s3types.BucketVersioningStatusEnabled, pageSize: 1000, versions: func() []s3types.ObjectVersion {
				var vs []s3types.ObjectVersion
				for i := range 2000 {
					vs = append(vs, ver("in/a", fmt.Sprint("old", i), fmt.Sprint("e", i), i == 0))
				}
				return append(vs, ver("in/a", "va1", "ea", false), ver("in/b", "vb1", "eb", true))
			}()}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			bucket, prefix := "in-bucket", "in/"
			if tc.bucket != "" {
				bucket, prefix = tc.bucket, tc.prefix
			}
			s := New(tc.api, "data")
			got, err := s.PinVersions(context.Background(), bucket, prefix, objs)
			if tc.err {
				if err == nil {
					t.Fatal("no error")
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			pins := map[string]string{}
			for i, o := range got {
				pins[o.Key] = o.Version
				if o.ETag != objs[i].ETag || o.Size != objs[i].Size {
					t.Errorf("object %d changed: %+v", i, o)
				}
			}
			if diff := cmp.Diff(tc.want, pins); diff != "" {
				t.Errorf("versions (-want +got):\n%s", diff)
			}
			if tc.maxLists > 0 && tc.api.lists > tc.maxLists {
				t.Errorf("%d version listings, want at most %d", tc.api.lists, tc.maxLists)
			}
			if tc.api.status != s3types.BucketVersioningStatusEnabled && tc.api.lists != 0 {
				t.Errorf("%d version listings of a bucket that is not versioned", tc.api.lists)
			}
			if objs[0].Version != "" || objs[1].Version != "" {
				t.Error("the caller's listing was changed")
			}
		})
	}
}

func TestInputChangedErrorNamesTheVersion(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		err  InputChangedError
		want string
	}{
		{InputChangedError{Bucket: "b", Key: "k", Planned: "e", Version: "v1", Deleted: true},
			"input s3://b/k changed while the job ran: version v1, pinned at planning, is gone; rerun the job to read the new input"},
		{InputChangedError{Bucket: "b", Key: "k", Planned: "e", Version: "v1"},
			"input s3://b/k changed while the job ran: version v1, pinned at planning, no longer has ETag e; rerun the job to read the new input"},
	} {
		if got := tc.err.Error(); got != tc.want {
			t.Errorf("%q, want %q", got, tc.want)
		}
	}
}
