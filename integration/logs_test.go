package integration

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/cloudwatchlogs"
	cwtypes "github.com/aws/aws-sdk-go-v2/service/cloudwatchlogs/types"

	"github.com/batchwork/batchwork/cmd/batchwork/cli"
	"github.com/batchwork/batchwork/shared/batchwork"
	"github.com/batchwork/batchwork/shared/control"
	"github.com/batchwork/batchwork/shared/logs"
)

// batchwork logs on the local runner: a job's lines, its task functions'
// own included, each naming its task, attempt and executor, read through
// GET /jobs/{id}/logs from the runner's log file; --task keeps one task's;
// --follow prints lines as they come until the job ends; another owner
// reads nothing. The attempts' executors and starts reach the task list.
func TestCLILogs(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	var failed atomic.Bool
	reg := batchwork.NewRegistry()
	reg.Register("say", func(ctx context.Context, tk *batchwork.Task) error {
		tk.Log.Info("hello from the task", "n", tk.Partition)
		if tk.Partition == 1 && !failed.Swap(true) {
			return errors.New("first attempt of say/1 fails")
		}
		select {
		case <-release:
		case <-ctx.Done():
			return ctx.Err()
		}
		return nil
	})
	e := newEnv(t, reg, envOptions{logFile: filepath.Join(t.TempDir(), "runner.log")})
	ctx := context.Background()
	id := e.submit("logs", []byte(`{"name":"logs","retry":{"maxAttempts":2,"backoff":"100ms"},"stages":[{"name":"say","task":"say","partitions":{"count":2}}]}`))

	// Follow from the start, while the tasks wait.
	var fOut, fErr syncBuffer
	followed := make(chan int, 1)
	go func() {
		followed <- e.cliRun(ctx, "tester", &fOut, &fErr, "logs", id, "--follow", "--interval", "100ms")
	}()
	waitFor(t, time.Minute, "--follow to print both tasks' lines, say/1's second attempt included", func() bool {
		return strings.Contains(fOut.String(), "say/0#1@") && strings.Contains(fOut.String(), "say/1#2@")
	})
	close(release)
	if st := e.waitJob(id, time.Minute); st.State != "SUCCEEDED" {
		t.Fatalf("job %s: %+v", st.State, st)
	}
	select {
	case code := <-followed:
		if code != cli.ExitOK {
			t.Fatalf("logs --follow: exit %d: %s", code, fErr.String())
		}
	case <-time.After(time.Minute):
		t.Fatalf("logs --follow did not end with the job:\n%s", fOut.String())
	}
	if !strings.Contains(fOut.String(), "task committed") {
		t.Fatalf("--follow missed the commits:\n%s", fOut.String())
	}

	// The whole job, as JSON: every line is the job's, the task
	// function's own lines carry the task's ids and the executor's.
	var jOut, jErr syncBuffer
	if code := e.cliRun(ctx, "tester", &jOut, &jErr, "logs", id, "-o", "json"); code != cli.ExitOK {
		t.Fatalf("logs -o json: exit %d: %s", code, jErr.String())
	}
	hello := map[string]bool{}
	executors := map[string]bool{}
	for _, line := range strings.Split(strings.TrimSpace(jOut.String()), "\n") {
		var f struct {
			Msg, JobID, Task, ExecutorID string
			Attempt                      int
		}
		var raw map[string]any
		if err := json.Unmarshal([]byte(line), &raw); err != nil {
			t.Fatalf("line %q: %v", line, err)
		}
		f.Msg, _ = raw["msg"].(string)
		f.JobID, _ = raw["job_id"].(string)
		f.Task, _ = raw["task"].(string)
		f.ExecutorID, _ = raw["executor_id"].(string)
		if a, ok := raw["attempt"].(float64); ok {
			f.Attempt = int(a)
		}
		if f.JobID != id {
			t.Fatalf("a line of another job: %s", line)
		}
		if f.Msg == "hello from the task" {
			if f.Task == "" || f.Attempt == 0 || f.ExecutorID == "" {
				t.Fatalf("a task function's line without its task, attempt or executor: %s", line)
			}
			hello[fmt.Sprintf("%s#%d", f.Task, f.Attempt)] = true
			executors[f.ExecutorID] = true
		}
	}
	for _, want := range []string{id + "/0/0#1", id + "/0/1#1", id + "/0/1#2"} {
		if !hello[want] {
			t.Fatalf("no line of the task function's attempt %s; have %v\n%s", want, hello, jOut.String())
		}
	}
	if len(executors) == 0 {
		t.Fatal("no executor ids")
	}

	// One task.
	var tOut, tErr syncBuffer
	if code := e.cliRun(ctx, "tester", &tOut, &tErr, "logs", id, "--task", "say/1"); code != cli.ExitOK {
		t.Fatalf("logs --task: exit %d: %s", code, tErr.String())
	}
	t.Logf("batchwork logs %s --task say/1:\n%s", id, tOut.String())
	lines := strings.Split(strings.TrimSpace(tOut.String()), "\n")
	if len(lines) < 3 {
		t.Fatalf("logs --task say/1:\n%s", tOut.String())
	}
	for _, l := range lines {
		if !strings.Contains(l, " say/1#") {
			t.Fatalf("logs --task say/1 printed another task's line: %q\n%s", l, tOut.String())
		}
	}
	if !strings.Contains(tOut.String(), "first attempt of say/1 fails") {
		t.Fatalf("logs --task say/1 misses the failed attempt:\n%s", tOut.String())
	}

	// Another owner's job: not found, whatever the flags.
	for _, args := range [][]string{{"logs", id}, {"logs", id, "--task", "say/1"}} {
		var oOut, oErr syncBuffer
		if code := e.cliRun(ctx, "mallory", &oOut, &oErr, args...); code != cli.ExitNotFound || oOut.String() != "" {
			t.Fatalf("%v as another owner: exit %d, printed %q", args, code, oOut.String())
		}
	}

	// The attempts' executors and starts, through the API and the CLI.
	tl, err := e.r.Service.ListTasks(ctx, control.ListTasksRequest{Owner: "tester", ID: id})
	if err != nil {
		t.Fatal(err)
	}
	for _, tk := range tl.Tasks {
		for _, a := range tk.Attempts {
			if a.Executor == "" || a.Started == nil || a.At == nil || a.Started.After(*a.At) || !executors[a.Executor] {
				t.Fatalf("task %s attempt %+v: want its executor (one that logged) and a start before its end", tk.ID, a)
			}
		}
	}
	var lOut, lErr syncBuffer
	if code := e.cliRun(ctx, "tester", &lOut, &lErr, "tasks", id); code != cli.ExitOK {
		t.Fatalf("tasks: exit %d: %s", code, lErr.String())
	}
	if !strings.Contains(lOut.String(), "EXECUTOR") || !strings.Contains(lOut.String(), tl.Tasks[0].Attempts[0].Executor) {
		t.Fatalf("tasks shows no executors:\n%s", lOut.String())
	}
}

// The CloudWatch Logs source against the emulator's CloudWatch Logs:
// lines of two jobs in two groups, merged by time, one job's only, and
// followed with a cursor. moto does not evaluate JSON filter patterns (it
// returns every event for one), so this proves the calls, the paging and
// the source's own check of each line, not the pattern; the pattern's
// text is checked in shared/logs.
func TestCloudWatchLogSource(t *testing.T) {
	t.Parallel()
	if emu.Kind != "moto" {
		t.Skipf("the CloudWatch Logs test runs on moto, not %s", emu.Kind)
	}
	ctx := context.Background()
	client := cloudwatchlogs.NewFromConfig(emu.AWSConfig())
	suffix := fmt.Sprint(time.Now().UnixNano())
	groups := []string{"/bw/api-" + suffix, "/bw/executor-" + suffix}
	base := time.Now().Add(-time.Minute).Truncate(time.Millisecond)
	put := func(group string, lines ...[2]any) {
		t.Helper()
		if _, err := client.CreateLogStream(ctx, &cloudwatchlogs.CreateLogStreamInput{LogGroupName: aws.String(group), LogStreamName: aws.String("s")}); err != nil {
			var exists *cwtypes.ResourceAlreadyExistsException
			if !errors.As(err, &exists) {
				t.Fatal(err)
			}
		}
		var evs []cwtypes.InputLogEvent
		for _, l := range lines {
			evs = append(evs, cwtypes.InputLogEvent{Timestamp: aws.Int64(base.Add(time.Duration(l[0].(int)) * time.Second).UnixMilli()), Message: aws.String(l[1].(string))})
		}
		if _, err := client.PutLogEvents(ctx, &cloudwatchlogs.PutLogEventsInput{LogGroupName: aws.String(group), LogStreamName: aws.String("s"), LogEvents: evs}); err != nil {
			t.Fatal(err)
		}
	}
	for _, g := range groups {
		if _, err := client.CreateLogGroup(ctx, &cloudwatchlogs.CreateLogGroupInput{LogGroupName: aws.String(g)}); err != nil {
			t.Fatal(err)
		}
	}
	put(groups[0], [2]any{0, `{"msg":"job submitted","job_id":"j1"}`}, [2]any{1, `{"msg":"job submitted","job_id":"j2"}`}, [2]any{5, `{"msg":"job succeeded","job_id":"j1"}`})
	put(groups[1], [2]any{2, `{"msg":"hello","job_id":"j1","task":"j1/0/0","attempt":1,"executor_id":"e1"}`},
		[2]any{3, `{"msg":"hello","job_id":"j2","task":"j2/0/0","attempt":1,"executor_id":"e1"}`},
		[2]any{4, `START RequestId: 1 Version: $LATEST`})
	src := logs.CloudWatch{Client: client, Groups: groups}
	msgs := func(pg logs.Page) string {
		var out []string
		for _, l := range pg.Lines {
			var f struct{ Msg string }
			_ = json.Unmarshal(l.Fields, &f)
			out = append(out, f.Msg)
		}
		return strings.Join(out, ",")
	}
	pg, err := src.Query(ctx, logs.Query{Job: "j1"})
	if err != nil {
		t.Fatal(err)
	}
	if got := msgs(pg); got != "job submitted,hello,job succeeded" {
		t.Fatalf("j1's lines: %s", got)
	}
	if pg, err = src.Query(ctx, logs.Query{Job: "j1", Task: "j1/0/0"}); err != nil || msgs(pg) != "hello" {
		t.Fatalf("j1/0/0's lines: %s, %v", msgs(pg), err)
	}
	// Following: nothing new, then a new line once.
	if pg, err = src.Query(ctx, logs.Query{Job: "j1"}); err != nil {
		t.Fatal(err)
	}
	q := logs.Query{Job: "j1", Cursor: pg.Next}
	if pg, err = src.Query(ctx, q); err != nil || len(pg.Lines) != 0 {
		t.Fatalf("after the last line: %s, %v", msgs(pg), err)
	}
	put(groups[1], [2]any{6, `{"msg":"late","job_id":"j1","task":"j1/0/0"}`})
	q.Cursor = pg.Next
	if pg, err = src.Query(ctx, q); err != nil || msgs(pg) != "late" {
		t.Fatalf("a new line: %s, %v", msgs(pg), err)
	}
}
