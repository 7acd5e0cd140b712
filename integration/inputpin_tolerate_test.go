package integration

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/batchwork/batchwork/internal/executor"
	"github.com/batchwork/batchwork/shared/awsconf"
	sm "github.com/batchwork/batchwork/statemachine"
)

// A changed input fails the job even in a stage that tolerates failures:
// tolerating it would let the job succeed having silently skipped part of
// its input, which is what pinning exists to prevent. The task's class
// says why it ended.
func TestChangedInputIsNeverTolerated(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	bucket := inputBucket(t, map[string]string{"data/a.txt": numberedLines("a", 50), "data/b.txt": numberedLines("b", 50)})
	cli := s3.NewFromConfig(emu.AWSConfig(), awsconf.S3Options(emu.AWSConfig()))
	e := newEnv(t, formatTasks(), envOptions{noRun: true, inputBuckets: []string{bucket}})
	r := &executor.Runner{CP: e.r.Service, Blob: e.r.Blob, Registry: executor.PublicRegistry(e.reg), Log: newLogCounter().logger()}
	id := e.submitAs("tester", "tolerant", fmt.Appendf(nil, `{"name":"tolerant","retry":{"maxAttempts":3,"backoff":"10ms"},"stages":[{"name":"s","task":"formats.lines",`+
		`"toleratedFailures":{"count":1},"partitions":{"input":{"prefix":"s3://%s/data/"}}}]}`, bucket))
	if _, err := cli.PutObject(ctx, &s3.PutObjectInput{Bucket: &bucket, Key: aws.String("data/b.txt"), Body: strings.NewReader(numberedLines("B2", 50))}); err != nil {
		t.Fatal(err)
	}
	work(t, e, r)
	st := e.waitJobAs("tester", id, time.Minute)
	if st.State != string(sm.JobFailed) || !strings.Contains(st.Error, "data/b.txt changed while the job ran") {
		t.Fatalf("job %s (%q), want FAILED naming the changed input", st.State, st.Error)
	}
	for _, tk := range stageTasks(t, e, id, 0) {
		if tk.Input.Key == "data/b.txt" && (tk.State != sm.TaskFailed || tk.Tolerated || tk.ErrorClass != "input_changed") {
			t.Errorf("task %s: %s tolerated=%v class %q, want FAILED, not tolerated, class input_changed", tk.Ref, tk.State, tk.Tolerated, tk.ErrorClass)
		}
	}
}
