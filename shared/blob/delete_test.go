package blob

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"
)

// bucketAPI is a bucket of keys that lists in pages of at most pageSize
// (and of MaxKeys), deletes in batches as S3 does, and records the size of
// every listing page and delete batch. failKeys answer a per-key error in
// DeleteObjects' response (the request itself succeeds, as on S3).
type bucketAPI struct {
	API      // nil: only listing and deleting are served
	keys     map[string]bool
	pageSize int
	failKeys map[string]bool
	pages    []int // objects per ListObjectsV2 answer
	batches  []int // keys per DeleteObjects request
}

func newBucketAPI(pageSize int, keys ...string) *bucketAPI {
	b := &bucketAPI{keys: map[string]bool{}, pageSize: pageSize, failKeys: map[string]bool{}}
	for _, k := range keys {
		b.keys[k] = true
	}
	return b
}

func (b *bucketAPI) ListObjectsV2(_ context.Context, in *s3.ListObjectsV2Input, _ ...func(*s3.Options)) (*s3.ListObjectsV2Output, error) {
	var sorted []string
	for k := range b.keys {
		if strings.HasPrefix(k, aws.ToString(in.Prefix)) && k > aws.ToString(in.ContinuationToken) {
			sorted = append(sorted, k)
		}
	}
	sort.Strings(sorted)
	n := b.pageSize
	if in.MaxKeys != nil && int(*in.MaxKeys) < n {
		n = int(*in.MaxKeys)
	}
	out := &s3.ListObjectsV2Output{IsTruncated: aws.Bool(len(sorted) > n)}
	if len(sorted) > n {
		sorted = sorted[:n]
		out.NextContinuationToken = aws.String(sorted[n-1])
	}
	for _, k := range sorted {
		out.Contents = append(out.Contents, s3types.Object{Key: aws.String(k)})
	}
	b.pages = append(b.pages, len(sorted))
	return out, nil
}

func (b *bucketAPI) DeleteObjects(_ context.Context, in *s3.DeleteObjectsInput, _ ...func(*s3.Options)) (*s3.DeleteObjectsOutput, error) {
	objs := in.Delete.Objects
	if len(objs) > 1000 {
		return nil, fmt.Errorf("MalformedXML: %d keys in one DeleteObjects, S3 takes at most 1000", len(objs))
	}
	b.batches = append(b.batches, len(objs))
	out := &s3.DeleteObjectsOutput{}
	for _, o := range objs {
		k := aws.ToString(o.Key)
		if b.failKeys[k] {
			out.Errors = append(out.Errors, s3types.Error{Key: o.Key, Code: aws.String("AccessDenied"), Message: aws.String("Access Denied")})
			continue
		}
		delete(b.keys, k) // a key that is already gone is deleted too, as on S3
	}
	return out, nil
}

func keysOf(prefix string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%spart-%05d", prefix, i)
	}
	return out
}

// DeletePrefix deletes a prefix a listing page at a time (each page at
// most 1,000 keys, one DeleteObjects per page), leaves other prefixes
// alone, stops after its page budget saying more is left, and is
// harmless to repeat.
func TestDeletePrefix(t *testing.T) {
	t.Parallel()
	const job = "jobs/j1/"
	other := keysOf("jobs/j10/", 3) // shares "jobs/j1" but not "jobs/j1/"
	tests := []struct {
		name     string
		objects  int
		pageSize int // what the fake S3 serves at most per listing
		maxPages int
		calls    int // DeletePrefix calls in a row
		failKey  string
		// want, per call: objects deleted and whether it finished.
		wantDeleted  []int
		wantComplete []bool
		wantBatches  []int // over all calls
		wantLeft     int
		wantErr      string
	}{
		{name: "empty prefix", objects: 0, pageSize: 1000, maxPages: 5, calls: 1,
			wantDeleted: []int{0}, wantComplete: []bool{true}, wantBatches: nil},
		{name: "one page", objects: 7, pageSize: 1000, maxPages: 5, calls: 1,
			wantDeleted: []int{7}, wantComplete: []bool{true}, wantBatches: []int{7}},
		{name: "S3's pages of 1000", objects: 2500, pageSize: 1000, maxPages: 5, calls: 1,
			wantDeleted: []int{2500}, wantComplete: []bool{true}, wantBatches: []int{1000, 1000, 500}},
		{name: "pages never exceed 1000 keys even if S3 would serve more", objects: 2500, pageSize: 5000, maxPages: 5, calls: 1,
			wantDeleted: []int{2500}, wantComplete: []bool{true}, wantBatches: []int{1000, 1000, 500}},
		{name: "budget spent: more is left, the next call goes on", objects: 2500, pageSize: 1000, maxPages: 2, calls: 2,
			wantDeleted: []int{2000, 500}, wantComplete: []bool{false, true}, wantBatches: []int{1000, 1000, 500}},
		{name: "exactly the budget's worth finishes in one call", objects: 2000, pageSize: 1000, maxPages: 2, calls: 2,
			wantDeleted: []int{2000, 0}, wantComplete: []bool{true, true}, wantBatches: []int{1000, 1000}},
		{name: "repeated after it finished", objects: 3, pageSize: 1000, maxPages: 5, calls: 3,
			wantDeleted: []int{3, 0, 0}, wantComplete: []bool{true, true, true}, wantBatches: []int{3}},
		{name: "a key S3 refuses: the rest is deleted, the error names it", objects: 5, pageSize: 2, maxPages: 5, calls: 1,
			failKey: job + "part-00001", wantBatches: []int{2, 2, 1}, wantLeft: 1,
			wantErr: `delete s3://b/jobs/j1/part-00001: AccessDenied (1 of 5 objects under s3://b/jobs/j1/ not deleted)`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			api := newBucketAPI(tt.pageSize, append(keysOf(job, tt.objects), other...)...)
			if tt.failKey != "" {
				api.failKeys[tt.failKey] = true
			}
			s := New(api, "b")
			for i := range tt.calls {
				res, err := s.DeletePrefix(context.Background(), job, tt.maxPages)
				if tt.wantErr != "" {
					if err == nil || err.Error() != tt.wantErr {
						t.Fatalf("DeletePrefix: %v, want %q", err, tt.wantErr)
					}
					break
				}
				if err != nil {
					t.Fatalf("call %d: %v", i, err)
				}
				if res.Deleted != tt.wantDeleted[i] || res.Complete != tt.wantComplete[i] {
					t.Errorf("call %d: %+v, want %d deleted, complete %v", i, res, tt.wantDeleted[i], tt.wantComplete[i])
				}
			}
			if fmt.Sprint(api.batches) != fmt.Sprint(tt.wantBatches) {
				t.Errorf("DeleteObjects batches %v, want %v", api.batches, tt.wantBatches)
			}
			for _, n := range api.pages {
				if n > DeleteBatch {
					t.Errorf("a listing page held %d keys, more than %d", n, DeleteBatch)
				}
			}
			left := 0
			for k := range api.keys {
				if strings.HasPrefix(k, job) {
					left++
				}
			}
			if left != tt.wantLeft {
				t.Errorf("%d objects left under %s, want %d", left, job, tt.wantLeft)
			}
			for _, k := range other {
				if !api.keys[k] {
					t.Errorf("%s (another prefix) was deleted", k)
				}
			}
		})
	}
}

// A failed request is an error with the bucket and prefix; nothing is
// reported deleted that was not.
func TestDeletePrefixRequestError(t *testing.T) {
	t.Parallel()
	api := &pagedAPI{err: errors.New("connection reset")}
	res, err := New(api, "b").DeletePrefix(context.Background(), "jobs/j1/", 5)
	if err == nil || !strings.Contains(err.Error(), "s3://b/jobs/j1/") || res.Deleted != 0 {
		t.Fatalf("DeletePrefix = %+v, %v; want an error naming s3://b/jobs/j1/ and nothing deleted", res, err)
	}
}
