package integration

import (
	"bytes"
	"context"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/batchwork/batchwork/shared/awsconf"
	"github.com/batchwork/batchwork/shared/blob"
	"github.com/batchwork/batchwork/shared/domain"
)

// Pins as the planner takes them (from the listing) on the objects that
// differ from a plain PUT: a multipart object, whose ETag ends in "-N",
// reads unchanged, ranged or whole; a pinned object that shrank below
// the read's start (a range S3 may refuse, 416, before it compares the
// ETag) and one replaced by a multipart upload are changes, permanent,
// naming the object.
func TestInputPinEdges(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	bucket := inputBucket(t, map[string]string{"data/small.txt": strings.Repeat("x\n", 5000)})
	cfg := emu.AWSConfig()
	cli := s3.NewFromConfig(cfg, awsconf.S3Options(cfg))
	store := blob.New(cli, bucket)
	part1 := bytes.Repeat([]byte("a\n"), 3<<20) // 6 MiB: parts but the last are at least 5 MiB
	part2 := []byte("tail\n")
	multipart := func(key string) {
		t.Helper()
		up, err := cli.CreateMultipartUpload(ctx, &s3.CreateMultipartUploadInput{Bucket: &bucket, Key: &key})
		if err != nil {
			t.Fatal(err)
		}
		var parts []types.CompletedPart
		for n, body := range [][]byte{part1, part2} {
			out, err := cli.UploadPart(ctx, &s3.UploadPartInput{Bucket: &bucket, Key: &key, UploadId: up.UploadId,
				PartNumber: aws.Int32(int32(n + 1)), Body: bytes.NewReader(body)})
			if err != nil {
				t.Fatal(err)
			}
			parts = append(parts, types.CompletedPart{ETag: out.ETag, PartNumber: aws.Int32(int32(n + 1))})
		}
		if _, err := cli.CompleteMultipartUpload(ctx, &s3.CompleteMultipartUploadInput{Bucket: &bucket, Key: &key, UploadId: up.UploadId,
			MultipartUpload: &types.CompletedMultipartUpload{Parts: parts}}); err != nil {
			t.Fatal(err)
		}
	}
	multipart("data/multi.txt")
	listed := func() map[string]string {
		t.Helper()
		objs, err := store.List(ctx, bucket, "data/")
		if err != nil {
			t.Fatal(err)
		}
		tags := map[string]string{}
		for _, o := range objs {
			tags[o.Key] = o.ETag
		}
		return tags
	}
	pins := listed()
	if !strings.Contains(pins["data/multi.txt"], "-") || strings.Contains(pins["data/multi.txt"], `"`) {
		t.Fatalf("multipart ETag %q as listed, want an unquoted one with a part count", pins["data/multi.txt"])
	}
	whole := append(append([]byte{}, part1...), part2...)
	for _, start := range []int64{0, 5 << 20} {
		rc, err := store.OpenPinned(ctx, bucket, "data/multi.txt", pins["data/multi.txt"], start)
		if err != nil {
			t.Fatalf("pinned read of an unchanged multipart object from %d: %v", start, err)
		}
		got, err := io.ReadAll(rc)
		rc.Close()
		if err != nil || !bytes.Equal(got, whole[start:]) {
			t.Fatalf("pinned read from %d: %d bytes, %v; want %d", start, len(got), err, len(whole)-int(start))
		}
	}

	if _, err := cli.PutObject(ctx, &s3.PutObjectInput{Bucket: &bucket, Key: aws.String("data/small.txt"), Body: strings.NewReader("y\n")}); err != nil {
		t.Fatal(err)
	}
	// An upload of the same parts has the same ETag (S3's is the digest of
	// the parts' digests and their count) and the same bytes: reading it
	// is reading the planned object. Another tail makes another object.
	part2 = []byte("TAIL\n")
	multipart("data/multi.txt")
	for _, tc := range []struct {
		key   string
		start int64
	}{
		{"data/small.txt", 4096}, // now 2 bytes: the range starts past its end
		{"data/small.txt", 0},
		{"data/multi.txt", 0},
	} {
		_, err := store.OpenPinned(ctx, bucket, tc.key, pins[tc.key], tc.start)
		var ch *blob.InputChangedError
		if !errors.As(err, &ch) || !errors.Is(err, domain.ErrPermanent) || ch.Key != tc.key || !strings.Contains(err.Error(), tc.key) {
			t.Errorf("pinned read of changed %s from %d: %v; want a permanent InputChangedError naming it", tc.key, tc.start, err)
		}
	}
}
