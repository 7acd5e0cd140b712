package integration

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/batchwork/batchwork/internal/executor"
	"github.com/batchwork/batchwork/shared/batchwork"
	"github.com/batchwork/batchwork/shared/domain"
)

// echoSh is an exec program that copies its stdin to stdout and echoes
// every line to stderr, as a program logging the records it reads does.
// On attempt 1 it checkpoints through the control channel after line 3
// and fails after line 5; a resumed attempt starts at its checkpoint.
const echoSh = `#!/bin/sh
set -eu
off=${BATCHWORK_RESUME_OFFSET:-0}
n=0
while IFS= read -r line; do
	off=$((off + ${#line} + 1))
	n=$((n + 1))
	printf '%s\n' "$line"
	printf '%s\n' "$line" >&2
	if [ "$BATCHWORK_ATTEMPT" = 1 ] && [ "$n" = 3 ]; then
		printf 'BATCHWORK_CHECKPOINT\t%d\t\n' "$off" >&"$BATCHWORK_CONTROL_FD"
		read -r ack <&"$BATCHWORK_CHECKPOINT_FD"
		[ "$ack" = ok ] || { echo "checkpoint: $ack" >&2; exit 1; }
	fi
	if [ "$BATCHWORK_ATTEMPT" = 1 ] && [ "$n" = 5 ]; then
		echo "injected failure after the checkpoint" >&2
		exit 1
	fi
done
`

// The control lines of an exec program (checkpoints, rejected records)
// travel on their own file descriptor, so data a program echoes to stderr
// cannot forge them. The input holds a checkpoint line pointing at its
// end and a reject line; the program echoes both to stderr at the start
// of a line. They are log text: no record is rejected (the stage allows
// none), and the retry resumes from the checkpoint the program made on
// the control channel, not from the forged one, so no record is skipped.
func TestExecForgedControlLinesOnStderrAreLogText(t *testing.T) {
	t.Parallel()
	progs := t.TempDir()
	if err := os.WriteFile(filepath.Join(progs, "echo"), []byte(echoSh), 0o755); err != nil {
		t.Fatal(err)
	}
	e := newEnv(t, batchwork.NewRegistry(), envOptions{noRun: true, execDir: progs})
	// The forged checkpoint's offset is the input's end: taken, it would
	// make the retry skip every record after it.
	lines := []string{"line 1", "", "line 3", "line 4", "line 5", "line 6", "line 7"}
	size := 0
	for _, l := range lines {
		size += len(l) + 1
	}
	forged := fmt.Sprintf("BATCHWORK_CHECKPOINT\t%d\t", 0)
	for {
		// The forged line's own length is part of the input's size.
		next := fmt.Sprintf("BATCHWORK_CHECKPOINT\t%d\t", size+len(forged)+1)
		if next == forged {
			break
		}
		forged = next
	}
	lines[1] = forged
	lines[3] = "BATCHWORK_REJECT\tforged\tline 4"
	var data []byte
	for _, l := range lines {
		data = append(data, l+"\n"...)
	}
	in := e.putInput("tester", "execcontrol/in.txt", data)
	id := e.submit("forged", []byte(fmt.Sprintf(`{"name":"forged","retry":{"maxAttempts":3,"backoff":"1ms"},
	  "stages":[{"name":"m","exec":["echo"],"partitions":{"input":{"prefix":%q}}}]}`, in)))
	run := &executor.Runner{CP: e.r.Service, Blob: e.r.Blob, Registry: executor.NewRegistry(), Log: newLogCounter().logger(), ExecDir: progs}
	workUntilEnded(t, e, run, 2*time.Minute, id)
	wantSucceeded(t, e.r.Service, id)

	task, err := e.r.Store.TaskGet(context.Background(), domain.TaskRef{Job: id, Stage: 0, Partition: 0})
	if err != nil {
		t.Fatal(err)
	}
	wantOff := int64(len(lines[0]) + len(lines[1]) + len(lines[2]) + 3)
	if task.CommittedAttempt != 2 || task.Checkpoint.Attempt != 1 || task.Checkpoint.Offset != wantOff {
		t.Fatalf("task committed attempt %d with checkpoint %+v; want attempt 2, resumed from attempt 1's checkpoint at %d",
			task.CommittedAttempt, task.Checkpoint, wantOff)
	}
	if got := committedOutput(t, e, id, "m", 0, 0, 0); string(got) != string(data) {
		t.Fatalf("committed output %q, want every input line %q", got, data)
	}
}
