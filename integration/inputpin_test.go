package integration

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/google/go-cmp/cmp"

	"github.com/batchwork/batchwork/internal/executor"
	"github.com/batchwork/batchwork/shared/awsconf"
	"github.com/batchwork/batchwork/shared/blob"
	"github.com/batchwork/batchwork/shared/domain"
	sm "github.com/batchwork/batchwork/statemachine"
)

// numberedLines is n lines "<tag> <i>", each padded to 40 bytes, so that a
// 4 KiB split holds about a hundred of them.
func numberedLines(tag string, n int) string {
	var b strings.Builder
	for i := range n {
		fmt.Fprintf(&b, "%-39s\n", fmt.Sprintf("%s %d", tag, i))
	}
	return b.String()
}

// An input is pinned to the ETag it had when its stage was planned: the
// plan records it on every task, and every read of the task's split (its
// first GET and ranged ones alike) carries If-Match. An object
// overwritten after planning fails the job at once, without retries, with
// an error naming the object and both ETags; unchanged inputs read as
// before.
func TestInputSnapshotPinning(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	before := map[string]string{"data/a.txt": numberedLines("a", 300), "data/b.txt": numberedLines("b", 300)}
	bucket := inputBucket(t, before)
	cli := s3.NewFromConfig(emu.AWSConfig(), awsconf.S3Options(emu.AWSConfig()))
	etagOf := func(key string) string {
		t.Helper()
		out, err := cli.HeadObject(ctx, &s3.HeadObjectInput{Bucket: &bucket, Key: &key})
		if err != nil {
			t.Fatal(err)
		}
		return strings.Trim(aws.ToString(out.ETag), `"`)
	}
	planned := map[string]string{"data/a.txt": etagOf("data/a.txt"), "data/b.txt": etagOf("data/b.txt")}

	e := newEnv(t, formatTasks(), envOptions{noRun: true, inputBuckets: []string{bucket}})
	r := &executor.Runner{CP: e.r.Service, Blob: e.r.Blob, Registry: executor.PublicRegistry(e.reg), Log: newLogCounter().logger()}
	spec := func(name string) []byte {
		return fmt.Appendf(nil, `{"name":%q,"retry":{"maxAttempts":3,"backoff":"10ms"},"stages":[{"name":"s","task":"formats.lines",`+
			`"partitions":{"input":{"prefix":"s3://%s/data/","splitSize":4096}}}]}`, name, bucket)
	}

	// Planned at submit; every task carries its object's ETag.
	changed := e.submitAs("tester", "changed", spec("changed"))
	tasks := stageTasks(t, e, changed, 0)
	ranged := 0
	for _, tk := range tasks {
		if tk.Input == nil || tk.Input.ETag != planned[tk.Input.Key] {
			t.Fatalf("task %s input %+v, want pinned to ETag %s", tk.Ref, tk.Input, planned[tk.Input.Key])
		}
		if tk.Input.Key == "data/b.txt" && tk.Input.Start > 0 {
			ranged++
		}
	}
	if ranged == 0 {
		t.Fatalf("b.txt is one split; the test needs ranged reads of it")
	}

	// b.txt changes after planning, before any task reads it.
	if _, err := cli.PutObject(ctx, &s3.PutObjectInput{Bucket: &bucket, Key: aws.String("data/b.txt"), Body: strings.NewReader(numberedLines("B2", 300))}); err != nil {
		t.Fatal(err)
	}
	now := etagOf("data/b.txt")
	work(t, e, r)
	st := e.waitJobAs("tester", changed, time.Minute)
	want := fmt.Sprintf("input s3://%s/data/b.txt changed while the job ran: ETag %s at planning, now %s", bucket, planned["data/b.txt"], now)
	if st.State != string(sm.JobFailed) || !strings.Contains(st.Error, want) {
		t.Fatalf("job %s (%s), want FAILED with %q", st.State, st.Error, want)
	}
	failed := 0
	for _, tk := range stageTasks(t, e, changed, 0) {
		if tk.Input.Key == "data/b.txt" && tk.State == sm.TaskFailed {
			failed++
			if tk.Attempt != 1 {
				t.Errorf("task %s failed at attempt %d: a changed input is not retried", tk.Ref, tk.Attempt)
			}
		}
	}
	if failed == 0 {
		t.Error("no task of the changed input failed")
	}

	t.Run("ranged reads are pinned", func(t *testing.T) {
		for _, start := range []int64{0, 4096} {
			_, err := e.r.Blob.OpenPinned(ctx, bucket, "data/b.txt", planned["data/b.txt"], start)
			var ch *blob.InputChangedError
			if !errors.As(err, &ch) || !errors.Is(err, domain.ErrPermanent) || ch.Now != now {
				t.Errorf("read from %d: %v, want a permanent InputChangedError naming ETag %s", start, err, now)
			}
		}
		rc, err := e.r.Blob.OpenPinned(ctx, bucket, "data/a.txt", planned["data/a.txt"], 4096)
		if err != nil {
			t.Fatalf("ranged read of an unchanged input: %v", err)
		}
		got, err := io.ReadAll(rc)
		rc.Close()
		if err != nil || string(got) != before["data/a.txt"][4096:] {
			t.Fatalf("ranged read of an unchanged input: %d bytes, %v", len(got), err)
		}
	})

	t.Run("a deleted input", func(t *testing.T) {
		if _, err := cli.PutObject(ctx, &s3.PutObjectInput{Bucket: &bucket, Key: aws.String("data/gone.txt"), Body: strings.NewReader("x\n")}); err != nil {
			t.Fatal(err)
		}
		tag := etagOf("data/gone.txt")
		if _, err := cli.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: &bucket, Key: aws.String("data/gone.txt")}); err != nil {
			t.Fatal(err)
		}
		_, err := e.r.Blob.OpenPinned(ctx, bucket, "data/gone.txt", tag, 0)
		if !errors.Is(err, domain.ErrPermanent) || !strings.Contains(err.Error(), "now deleted") {
			t.Fatalf("read of a deleted input: %v, want a permanent error saying it was deleted", err)
		}
	})

	t.Run("unchanged inputs", func(t *testing.T) {
		id := e.submitAs("tester", "unchanged", spec("unchanged"))
		work(t, e, r)
		got := jobLines(t, e, e.waitJobAs("tester", id, time.Minute))
		var want []string
		for line := range strings.SplitSeq(before["data/a.txt"]+numberedLines("B2", 300), "\n") {
			if line != "" {
				want = append(want, line)
			}
		}
		slices.Sort(want)
		if diff := cmp.Diff(want, got); diff != "" {
			t.Fatalf("output lines (-want +got):\n%s", diff)
		}
	})
}
