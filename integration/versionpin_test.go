package integration

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go"
	"github.com/google/go-cmp/cmp"

	"github.com/batchwork/batchwork/internal/executor"
	"github.com/batchwork/batchwork/internal/iamrec"
	"github.com/batchwork/batchwork/shared/awsconf"
	"github.com/batchwork/batchwork/shared/batchwork"
	"github.com/batchwork/batchwork/shared/blob"
	"github.com/batchwork/batchwork/shared/control"
	"github.com/batchwork/batchwork/shared/domain"
	"github.com/batchwork/batchwork/shared/split"
	sm "github.com/batchwork/batchwork/statemachine"
)

// versionedBucket is inputBucket with versioning in status (Enabled or
// Suspended) before the objects are written.
func versionedBucket(t *testing.T, status s3types.BucketVersioningStatus, objects map[string]string) string {
	t.Helper()
	ctx := context.Background()
	bucket := inputBucket(t, nil)
	cli := s3.NewFromConfig(emu.AWSConfig(), awsconf.S3Options(emu.AWSConfig()))
	if _, err := cli.PutBucketVersioning(ctx, &s3.PutBucketVersioningInput{
		Bucket: &bucket, VersioningConfiguration: &s3types.VersioningConfiguration{Status: status},
	}); err != nil {
		t.Fatal(err)
	}
	for k, v := range objects {
		if _, err := cli.PutObject(ctx, &s3.PutObjectInput{Bucket: &bucket, Key: aws.String(k), Body: strings.NewReader(v)}); err != nil {
			t.Fatal(err)
		}
	}
	return bucket
}

// On a versioned input bucket a stage's plan pins each object's version
// as well as its ETag, and tasks read that version: an object overwritten
// after planning does not fail the job, which reads the planned bytes
// (ranged reads included). A pinned version deleted after planning fails
// the job at once with input_changed, naming the object and the version,
// in the job's error, its task's history and `batchwork status`.
func TestInputVersionPinning(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	before := map[string]string{"data/a.txt": numberedLines("a", 300), "data/b.txt": numberedLines("b", 300)}
	bucket := versionedBucket(t, s3types.BucketVersioningStatusEnabled, before)
	cli := s3.NewFromConfig(emu.AWSConfig(), awsconf.S3Options(emu.AWSConfig()))
	head := func(key string) (etag, version string) {
		t.Helper()
		out, err := cli.HeadObject(ctx, &s3.HeadObjectInput{Bucket: &bucket, Key: &key})
		if err != nil {
			t.Fatal(err)
		}
		return strings.Trim(aws.ToString(out.ETag), `"`), aws.ToString(out.VersionId)
	}
	overwrite := func(key, body string) {
		t.Helper()
		if _, err := cli.PutObject(ctx, &s3.PutObjectInput{Bucket: &bucket, Key: &key, Body: strings.NewReader(body)}); err != nil {
			t.Fatal(err)
		}
	}
	type pin struct{ etag, version string }
	planned := map[string]pin{}
	for k := range before {
		e, v := head(k)
		if v == "" || v == "null" {
			t.Fatalf("%s has version %q: the bucket is not versioned", k, v)
		}
		planned[k] = pin{e, v}
	}

	e := newEnv(t, formatTasks(), envOptions{noRun: true, inputBuckets: []string{bucket}})
	r := &executor.Runner{CP: e.r.Service, Blob: e.r.Blob, Registry: executor.PublicRegistry(e.reg), Log: newLogCounter().logger()}
	spec := func(name string) []byte {
		return fmt.Appendf(nil, `{"name":%q,"retry":{"maxAttempts":3,"backoff":"10ms"},"stages":[{"name":"s","task":"formats.lines",`+
			`"partitions":{"input":{"prefix":"s3://%s/data/","splitSize":4096}}}]}`, name, bucket)
	}

	// Planned at submit: every task carries its object's ETag and version.
	id := e.submitAs("tester", "overwritten", spec("overwritten"))
	ranged := 0
	for _, tk := range stageTasks(t, e, id, 0) {
		if tk.Input == nil || (pin{tk.Input.ETag, tk.Input.Version}) != planned[tk.Input.Key] {
			t.Fatalf("task %s input %+v, want pinned to %+v", tk.Ref, tk.Input, planned[tk.Input.Key])
		}
		if tk.Input.Key == "data/b.txt" && tk.Input.Start > 0 {
			ranged++
		}
	}
	if ranged == 0 {
		t.Fatal("b.txt is one split; the test needs ranged reads of it")
	}

	// b.txt is overwritten (a new version) after planning, before any task
	// reads it: the job reads the planned version and succeeds.
	overwrite("data/b.txt", numberedLines("B2", 300))
	if now, _ := head("data/b.txt"); now == planned["data/b.txt"].etag {
		t.Fatal("the overwrite kept the ETag")
	}
	workAs(t, e, r, iamrec.FnExecutor)
	got := jobLines(t, e, e.waitJobAs("tester", id, time.Minute))
	if diff := cmp.Diff(lines(before["data/a.txt"]+before["data/b.txt"]), got); diff != "" {
		t.Fatalf("output lines of the overwritten input (-want planned version +got):\n%s", diff)
	}

	t.Run("ranged reads of the version", func(t *testing.T) {
		p := planned["data/b.txt"]
		rc, err := e.r.Blob.OpenPinnedVersion(ctx, bucket, "data/b.txt", p.etag, p.version, 4096)
		if err != nil {
			t.Fatalf("ranged read of the pinned version: %v", err)
		}
		b, err := io.ReadAll(rc)
		rc.Close()
		if err != nil || string(b) != before["data/b.txt"][4096:] {
			t.Fatalf("ranged read of the pinned version: %d bytes, %v; want the planned bytes from 4096", len(b), err)
		}
	})

	// A job planned now pins b's newest version (B2); that version is
	// then deleted for good. The key still holds an object (the first
	// version is current again), but not the planned one: the job fails
	// at once, naming the object and the version.
	t.Run("a deleted version", func(t *testing.T) {
		_, v2 := head("data/b.txt")
		gone := e.submitAs("tester", "gone", spec("gone"))
		for _, tk := range stageTasks(t, e, gone, 0) {
			if tk.Input.Key == "data/b.txt" && tk.Input.Version != v2 {
				t.Fatalf("task %s pinned to version %q, want the newest, %q", tk.Ref, tk.Input.Version, v2)
			}
		}
		if _, err := cli.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: &bucket, Key: aws.String("data/b.txt"), VersionId: &v2}); err != nil {
			t.Fatal(err)
		}
		if _, v := head("data/b.txt"); v != planned["data/b.txt"].version {
			t.Fatalf("after the delete b.txt's current version is %q, want the first, %q", v, planned["data/b.txt"].version)
		}
		workAs(t, e, r, iamrec.FnExecutor)
		st := e.waitJobAs("tester", gone, time.Minute)
		want := fmt.Sprintf("input s3://%s/data/b.txt changed while the job ran: version %s, pinned at planning, is gone", bucket, v2)
		if st.State != string(sm.JobFailed) || !strings.Contains(st.Error, want) {
			t.Fatalf("job %s (%s), want FAILED with %q", st.State, st.Error, want)
		}
		failed := 0
		for _, tk := range stageTasks(t, e, gone, 0) {
			if tk.Input.Key != "data/b.txt" || tk.State != sm.TaskFailed {
				continue
			}
			failed++
			if tk.Attempt != 1 || tk.ErrorClass != domain.ClassInputChanged || !strings.Contains(tk.LastError, want) {
				t.Errorf("task %s: attempt %d, class %q, error %q; want attempt 1, class input_changed, the error naming the version", tk.Ref, tk.Attempt, tk.ErrorClass, tk.LastError)
			}
		}
		if failed == 0 {
			t.Fatal("no task of the deleted version failed")
		}
		if !slices.ContainsFunc(historyOf(t, e, gone), func(ev control.Event) bool { return strings.Contains(ev.Message, want) }) {
			t.Errorf("history of %s has no event naming the version: %+v", gone, historyOf(t, e, gone))
		}
		var out, errOut syncBuffer
		if code := e.cliRun(ctx, "tester", &out, &errOut, "status", gone); !strings.Contains(out.String(), want) {
			t.Errorf("batchwork status (exit %d) does not name the version:\n%s%s", code, out.String(), errOut.String())
		}
		_, err := e.r.Blob.OpenPinnedVersion(ctx, bucket, "data/b.txt", "", v2, 0)
		var ch *blob.InputChangedError
		if !errors.As(err, &ch) || !ch.Deleted || ch.Version != v2 || !errors.Is(err, domain.ErrPermanent) {
			t.Fatalf("read of a deleted version: %v, want a permanent InputChangedError naming version %s", err, v2)
		}
	})
}

// A bucket that is not versioned, or whose versioning is suspended (which
// overwrites its "null" version in place), is planned with ETags alone,
// as before version pinning.
func TestInputVersionPinningOff(t *testing.T) {
	t.Parallel()
	in := map[string]string{"data/a.txt": numberedLines("a", 10)}
	buckets := map[string]string{
		"unversioned": inputBucket(t, in),
		"suspended":   versionedBucket(t, s3types.BucketVersioningStatusSuspended, in),
	}
	var all []string
	for _, b := range buckets {
		all = append(all, b)
	}
	e := newEnv(t, formatTasks(), envOptions{noRun: true, inputBuckets: all})
	for name, bucket := range buckets {
		id := e.submitAs("tester", name, fmt.Appendf(nil, `{"name":%q,"stages":[{"name":"s","task":"formats.lines",`+
			`"partitions":{"input":{"prefix":"s3://%s/data/"}}}]}`, name, bucket))
		for _, tk := range stageTasks(t, e, id, 0) {
			if tk.Input == nil || tk.Input.ETag == "" || tk.Input.Version != "" {
				t.Errorf("%s: task %s input %+v, want an ETag pin and no version", name, tk.Ref, tk.Input)
			}
		}
	}
}

// lines is s's non-empty lines, sorted.
func lines(s string) []string {
	var out []string
	for l := range strings.SplitSeq(s, "\n") {
		if l != "" {
			out = append(out, l)
		}
	}
	slices.Sort(out)
	return out
}

// flakyVersions is the env's blob store whose version pinning fails
// transiently n times (S3 throttling the version listing).
type flakyVersions struct {
	*blob.Store
	mu sync.Mutex
	n  int
}

func (f *flakyVersions) PinVersions(ctx context.Context, bucket, prefix string, objs []split.Object) ([]split.Object, error) {
	f.mu.Lock()
	fail := f.n > 0
	f.n--
	f.mu.Unlock()
	if fail {
		return nil, fmt.Errorf("list versions of s3://%s/%s: %w", bucket, prefix, &smithy.GenericAPIError{Code: "SlowDown", Message: "Please reduce your request rate."})
	}
	return f.Store.PinVersions(ctx, bucket, prefix, objs)
}

// Every function that plans input stages pins versions on a versioned
// bucket, on a context tagged with it, so the IAM check (iam_test.go) sees
// each planner's s3:GetBucketVersioning and s3:ListBucketVersions, as
// iam_paths_test.go does for the rest: the api at submit
// (TestInputVersionPinning), the committer of a stage's last task (the
// commit function, or an executor) planning its downstream stage, and the
// sweep planning a stage whose planning failed. A throttled version
// listing is transient, like a throttled listing: the sweep plans again.
func TestInputVersionPinningPlanners(t *testing.T) {
	t.Parallel()
	twoStage := func(bucket string) string {
		return fmt.Sprintf(`{"name":"iam","stages":[{"name":"a","task":"work","partitions":{"count":1}},
		  {"name":"b","task":"work","after":["a"],"partitions":{"input":{"prefix":"s3://%s/in/"}}}]}`, bucket)
	}
	type rigT struct {
		*iamRig
		cfg control.Config
	}
	rig := func(t *testing.T) (*rigT, string, string) {
		t.Helper()
		bucket := versionedBucket(t, s3types.BucketVersioningStatusEnabled, map[string]string{"in/a.txt": "one\ntwo\n"})
		cli := s3.NewFromConfig(emu.AWSConfig(), awsconf.S3Options(emu.AWSConfig()))
		out, err := cli.HeadObject(context.Background(), &s3.HeadObjectInput{Bucket: &bucket, Key: aws.String("in/a.txt")})
		if err != nil {
			t.Fatal(err)
		}
		reg := batchwork.NewRegistry()
		reg.Register("work", func(ctx context.Context, t *batchwork.Task) error {
			if t.Input == nil { // stage a
				_, err := io.WriteString(t.Out, "a\n")
				return err
			}
			_, err := io.Copy(t.Out, t.Input)
			return err
		})
		r := &rigT{iamRig: &iamRig{clk: newTestClock(), logs: newLogCounter()}}
		r.e = newEnv(t, reg, envOptions{noRun: true, inputBuckets: []string{bucket}})
		r.cfg = testTimings
		r.cfg.InputBuckets = []string{bucket}
		r.svc = newService(r.e, r.cfg, r.e.r.Store, r.e.r.Queue, r.clk, r.logs.logger())
		return r, bucket, aws.ToString(out.VersionId)
	}
	wantPinned := func(t *testing.T, e *env, id string, stage int, version string) {
		t.Helper()
		tasks := stageTasks(t, e, id, stage)
		if len(tasks) != 1 || tasks[0].Input == nil || tasks[0].Input.Version != version {
			t.Fatalf("stage %d tasks %+v, want one pinned to version %s", stage, tasks, version)
		}
	}

	t.Run("commit", func(t *testing.T) {
		t.Parallel()
		r, bucket, version := rig(t)
		ctx, bg := iamrec.WithFunction(context.Background(), iamrec.FnCommit), context.Background()
		id := submitTo(t, r.svc, "commit", twoStage(bucket))
		ref := domain.TaskRef{Job: id, Stage: 0, Partition: 0}
		c, err := r.svc.RemoteClaim(bg, control.RemoteClaimRequest{Task: ref.String()})
		if err != nil {
			t.Fatalf("claim %s: %v", ref, err)
		}
		if err := r.e.r.Blob.PutIfAbsent(bg, blob.OutputKey(id, "a", 0, c.Attempt, 0), []byte("out\n")); err != nil {
			t.Fatal(err)
		}
		if err := remoteCommit(ctx, r.svc, control.RemoteCommitRequest{Claim: c, Outputs: 1}); err != nil {
			t.Fatalf("commit %s: %v", ref, err)
		}
		wantPinned(t, r.e, id, 1, version)
	})

	t.Run("executor", func(t *testing.T) {
		t.Parallel()
		r, bucket, version := rig(t)
		e := r.e
		id := e.submit("exec", []byte(twoStage(bucket)))
		x := &executor.Runner{CP: e.r.Service, Blob: e.r.Blob, Registry: executor.PublicRegistry(e.reg), Log: r.logs.logger()}
		workAs(t, e, x, iamrec.FnExecutor)
		wantPinned(t, e, id, 1, version)
		if st := e.waitJob(id, time.Minute); st.State != string(sm.JobSucceeded) {
			t.Fatalf("job %s (%s), want SUCCEEDED", st.State, st.Error)
		}
	})

	t.Run("sweep", func(t *testing.T) {
		t.Parallel()
		r, bucket, version := rig(t)
		e := r.e
		svc := newServiceWithBlob(e, r.cfg, e.r.Store, &flakyVersions{Store: e.r.Blob, n: 1}, r.clk, r.logs)
		id := submitTo(t, svc, "plan", fmt.Sprintf(`{"name":"plan","stages":[{"name":"s","task":"work","partitions":{"input":{"prefix":"s3://%s/in/"}}}]}`, bucket))
		if st := jobState(t, svc, id); st.State != string(sm.JobRunning) {
			t.Fatalf("job %s (%s) after a throttled version listing, want RUNNING", st.State, st.Error)
		}
		if n := len(stageTasks(t, e, id, 0)); n != 0 {
			t.Fatalf("%d tasks after a failed plan, want none", n)
		}
		r.clk.Advance(testTimings.StartGrace + time.Second)
		if _, err := svc.Sweep(iamrec.WithFunction(context.Background(), iamrec.FnSweep)); err != nil {
			t.Fatalf("sweep: %v", err)
		}
		wantPinned(t, e, id, 0, version)
	})
}
