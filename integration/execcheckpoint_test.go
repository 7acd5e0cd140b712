package integration

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/batchwork/batchwork/internal/executor"
	"github.com/batchwork/batchwork/internal/executor/feed"
	"github.com/batchwork/batchwork/shared/batchwork"
	"github.com/batchwork/batchwork/shared/blob"
	"github.com/batchwork/batchwork/shared/control"
	"github.com/batchwork/batchwork/shared/domain"
)

// numberLinesSh is an exec program that checkpoints (the protocol of
// internal/executor/execstage/checkpoint.go): it numbers its stdin's lines (the
// running count is its checkpoint state), writes each as line<TAB>number,
// and checkpoints every 50 lines, waiting for the ack. Its first argument
// says what else it does:
//   - run: nothing;
//   - die: on attempt 1, after the checkpoint at line 150, it writes lines
//     the checkpoint must not keep and kills itself;
//   - fence=DIR: coordinates with TestExecFencedCheckpointIsNeverUsed
//     through files in DIR (see there).
//
// Every attempt that resumes writes its resume point to stderr, and with
// fence=DIR to DIR/started-<attempt>.
const numberLinesSh = `#!/bin/sh
set -eu
mode=$1
n=0
off=0
if [ -n "${BATCHWORK_RESUME_OFFSET:-}" ]; then
	off=$BATCHWORK_RESUME_OFFSET
	n=$(printf %s "$BATCHWORK_RESUME_STATE" | base64 -d)
	echo "resumed at $off with n=$n" >&2
fi
dir=
case $mode in fence=*) dir=${mode#fence=} ;; esac
wait_for() { while [ ! -e "$dir/$1" ]; do sleep 0.05; done; }
if [ -n "$dir" ] && [ "$BATCHWORK_ATTEMPT" != 1 ]; then
	printf %s "${BATCHWORK_RESUME_OFFSET:--1}" > "$dir/started.tmp"
	mv "$dir/started.tmp" "$dir/started-$BATCHWORK_ATTEMPT"
	if [ "$BATCHWORK_ATTEMPT" = 2 ]; then
		wait_for failnow
		echo "injected failure before any checkpoint of attempt 2" >&2
		exit 1
	fi
fi
while IFS= read -r line; do
	off=$((off + ${#line} + 1))
	n=$((n + 1))
	printf '%s\t%d\n' "$line" "$n"
	if [ $((n % 50)) -eq 0 ]; then
		printf 'BATCHWORK_CHECKPOINT\t%d\t%s\n' "$off" "$(printf %s "$n" | base64)" >&"$BATCHWORK_CONTROL_FD"
		read -r ack <&"$BATCHWORK_CHECKPOINT_FD"
		if [ -n "$dir" ] && [ "$BATCHWORK_ATTEMPT" = 1 ] && [ "$n" = 150 ]; then
			sleep 60 # refused: stopped by the executor
		fi
		[ "$ack" = ok ] || { echo "checkpoint: $ack" >&2; exit 1; }
		if [ "$mode" = die ] && [ "$BATCHWORK_ATTEMPT" = 1 ] && [ "$n" = 150 ]; then
			printf 'lost-%d\tafter the checkpoint\n' 1 2 3 4 5
			kill -TERM $$
		fi
		if [ -n "$dir" ] && [ "$BATCHWORK_ATTEMPT" = 1 ] && [ "$n" = 100 ]; then
			printf %s "$off" > "$dir/saved.tmp"
			mv "$dir/saved.tmp" "$dir/saved-1"
			wait_for goon
		fi
	fi
done
`

// execProgramsDir is a programs directory holding numberlines.
func execProgramsDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "numberlines"), []byte(numberLinesSh), 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// waitFile polls for a file the program writes, up to a deadline.
func waitFile(t *testing.T, path string, within time.Duration) string {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		b, err := os.ReadFile(path)
		if err == nil {
			return string(b)
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s not written within %s", filepath.Base(path), within)
		}
		time.Sleep(20 * time.Millisecond) // polling a file another process writes
	}
}

// An exec program that checkpoints and is then killed is retried from
// its checkpoint: its stdin starts at the checkpoint's offset, its state
// comes back in BATCHWORK_RESUME_STATE, the outputs it wrote before the
// checkpoint are kept (sealed when it checkpointed) and those after are
// dropped. Its committed outputs, on every shuffle partition, and what
// the reduce stage makes of them are byte for byte those of a job whose
// program ran through.
func TestExecCheckpointResumeOutputsMatchUninterrupted(t *testing.T) {
	t.Parallel()
	reg := batchwork.NewRegistry()
	reg.Register("collect", collect)
	dir := execProgramsDir(t)
	e := newEnv(t, reg, envOptions{noRun: true, execDir: dir})
	in := e.putInput("tester", "execckpt/resume/in.txt", ckptInput(300))
	spec := func(name, mode string) []byte {
		return []byte(fmt.Sprintf(`{"name":%q,"retry":{"maxAttempts":3,"backoff":"1ms"},"stages":[
		  {"name":"m","exec":["numberlines",%q],"partitions":{"input":{"prefix":%q}},"shuffle":{"partitions":3}},
		  {"name":"r","task":"collect","after":["m"]}]}`, name, mode, in))
	}
	resumed := e.submit("resumed", spec("resumed", "die"))
	through := e.submit("through", spec("through", "run"))
	run := &executor.Runner{CP: e.r.Service, Blob: e.r.Blob, Registry: executor.PublicRegistry(reg), Log: newLogCounter().logger(), ExecDir: dir}
	workUntilEnded(t, e, run, 2*time.Minute, resumed, through)
	wantSucceeded(t, e.r.Service, resumed)
	wantSucceeded(t, e.r.Service, through)

	ctx := context.Background()
	task, err := e.r.Store.TaskGet(ctx, domain.TaskRef{Job: resumed, Stage: 0, Partition: 0})
	if err != nil {
		t.Fatal(err)
	}
	if task.CommittedAttempt != 2 {
		t.Fatalf("resumed job's map task committed attempt %d, want 2 (one kill, one resume)", task.CommittedAttempt)
	}
	if !timelineHas(t, e, resumed, "task.resumed", "resumed from the checkpoint of attempt 1 at offset") {
		t.Fatal("history does not say the task resumed from attempt 1's checkpoint")
	}
	if task, err := e.r.Store.TaskGet(ctx, domain.TaskRef{Job: through, Stage: 0, Partition: 0}); err != nil || task.CommittedAttempt != 1 {
		t.Fatalf("uninterrupted job's map task committed attempt %d (%v), want 1", task.CommittedAttempt, err)
	}
	for r := range 3 {
		got, want := committedOutput(t, e, resumed, "m", 0, 0, r), committedOutput(t, e, through, "m", 0, 0, r)
		if !bytes.Equal(got, want) {
			t.Fatalf("map output %d of the resumed task (%d bytes) differs from the uninterrupted one's (%d bytes):\n%s\nwant:\n%s", r, len(got), len(want), got, want)
		}
		if len(want) == 0 {
			t.Fatalf("map output %d is empty: the test proves nothing", r)
		}
		if bytes.Contains(got, []byte("lost-")) {
			t.Fatalf("map output %d keeps lines written after the checkpoint", r)
		}
		got, want = committedOutput(t, e, resumed, "r", 1, r, 0), committedOutput(t, e, through, "r", 1, r, 0)
		if !bytes.Equal(got, want) {
			t.Fatalf("reduce output %d of the resumed job differs from the uninterrupted job's", r)
		}
	}
	// Every line is numbered once, by its place in the input: the state
	// and the offset came back together.
	var all []byte
	for r := range 3 {
		all = append(all, committedOutput(t, e, resumed, "m", 0, 0, r)...)
	}
	for i, line := range strings.Split(strings.TrimSpace(string(ckptInput(300))), "\n") {
		if !bytes.Contains(all, []byte(line+"\t"+strconv.Itoa(i+1)+"\n")) {
			t.Fatalf("line %d (%s) is not numbered %d in the outputs", i, line, i+1)
		}
	}
}

// An exec program's checkpoint is fenced by the claim token, as a Go
// function's is. Attempt 1 checkpoints at lines 50 and 100; its executor
// is then judged dead and attempt 2 takes the task over, resuming from
// the second. Attempt 1's next checkpoint (line 150) is refused as stale:
// its program gets an error ack and is stopped, and the task record keeps
// pointing at the checkpoint saved while it held the claim. Attempt 2
// fails; attempt 3 resumes from attempt 1's first checkpoint, never the
// fenced one, and commits the outputs of an uninterrupted run.
func TestExecFencedCheckpointIsNeverUsed(t *testing.T) {
	t.Parallel()
	data := ckptInput(300)
	progs := execProgramsDir(t)
	sync := t.TempDir() // the program's coordination files
	e := newEnv(t, batchwork.NewRegistry(), envOptions{noRun: true, execDir: progs})
	ctx := context.Background()
	in := e.putInput("tester", "execckpt/fence/in.txt", data)
	id := e.submit("fence", []byte(fmt.Sprintf(`{"name":"fence","retry":{"maxAttempts":3,"backoff":"1ms"},
	  "stages":[{"name":"m","exec":["numberlines","fence=%s"],"partitions":{"input":{"prefix":%q}}}]}`, sync, in)))
	ref := domain.TaskRef{Job: id, Stage: 0, Partition: 0}
	url := e.r.Resources.Queues.Normal
	msgs := receiveVisible(t, e, url)
	if len(msgs) != 1 {
		t.Fatalf("%d messages, want the task's one", len(msgs))
	}
	newRunner := func(every time.Duration) *executor.Runner {
		return &executor.Runner{CP: e.r.Service, Blob: e.r.Blob, Registry: executor.NewRegistry(),
			Log: newLogCounter().logger(), HeartbeatEvery: every, ExecDir: progs}
	}
	d := feed.Delivery{Body: msgs[0].Body, SentAt: msgs[0].SentAt}
	file := func(name string) string { return waitFile(t, filepath.Join(sync, name), time.Minute) }
	touch := func(name string) {
		if err := os.WriteFile(filepath.Join(sync, name), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}

	// Attempt 1, on an executor without a liveness record: any other
	// executor may take its task over. It beats rarely, so it learns of
	// the takeover from its checkpoint.
	resA := make(chan feed.Result, 1)
	go func() { resA <- newRunner(time.Hour).Handle(control.WithExecutor(ctx, "ghost-executor"), d, nil) }()
	off1, err := strconv.ParseInt(file("saved-1"), 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	if task, err := e.r.Store.TaskGet(ctx, ref); err != nil || task.Checkpoint != (domain.CheckpointRef{Attempt: 1, Seq: 2, Offset: off1}) {
		t.Fatalf("after attempt 1's checkpoint the task points at %+v (err %v), want attempt 1's checkpoint 2 at %d", task.Checkpoint, err, off1)
	}

	// Attempt 2 takes over and resumes from attempt 1's checkpoint.
	resB := make(chan feed.Result, 1)
	go func() { resB <- newRunner(0).Handle(ctx, d, nil) }()
	if got := file("started-2"); got != strconv.FormatInt(off1, 10) {
		t.Fatalf("attempt 2 resumed at %s, want attempt 1's checkpoint at %d", got, off1)
	}

	// Attempt 1 goes on; its next checkpoint is refused and it is stopped
	// (whether its program reads the error ack before it is killed is a
	// race, so the test does not look).
	touch("goon")
	if res := <-resA; res.Action != feed.Leave {
		t.Fatalf("fenced attempt ended with %v (%v), want leave", res.Action, res.Err)
	}
	task, err := e.r.Store.TaskGet(ctx, ref)
	if err != nil {
		t.Fatal(err)
	}
	if task.Checkpoint != (domain.CheckpointRef{Attempt: 1, Seq: 2, Offset: off1}) {
		t.Fatalf("after the refused checkpoint the task points at %+v, want attempt 1's checkpoint 2", task.Checkpoint)
	}
	// The refused checkpoint's record was written before the fence
	// refused it: only the fence keeps it from being used.
	if _, err := e.r.Blob.Get(ctx, blob.CheckpointKey(id, "m", 0, 1, 3)); err != nil {
		t.Fatalf("the fenced attempt's checkpoint record: %v, want it written (and never used)", err)
	}

	// Attempt 2 fails; attempt 3 resumes from the same checkpoint.
	touch("failnow")
	if res := <-resB; res.Action != feed.Hide {
		t.Fatalf("attempt 2 ended with %v (%v), want a retry", res.Action, res.Err)
	}
	if err := e.r.Queue.ChangeVisibility(ctx, url, msgs[0].Receipt, 0); err != nil {
		t.Fatal(err)
	}
	work(t, e, newRunner(0))
	if got := file("started-3"); got != strconv.FormatInt(off1, 10) {
		t.Fatalf("attempt 3 resumed at %s, want attempt 1's unfenced checkpoint at %d", got, off1)
	}
	wantSucceeded(t, e.r.Service, id)
	var want bytes.Buffer
	for i, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		fmt.Fprintf(&want, "%s\t%d\n", line, i+1)
	}
	if got := committedOutput(t, e, id, "m", 0, 0, 0); !bytes.Equal(got, want.Bytes()) {
		t.Fatalf("outputs after a fenced checkpoint (%d bytes) differ from an uninterrupted run's (%d bytes):\n%s", len(got), want.Len(), got)
	}
}
