package chaostasks

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"time"

	"github.com/batchwork/batchwork/shared/batchwork"
)

// NumberTask numbers its input's lines, slowly, checkpointing as it
// goes: an executor killed mid-way leaves a checkpoint that the retry
// resumes from, and the task's output must still be every line once, in
// order, numbered 1, 2, 3... (CheckNumbered), byte for byte the
// fault-free run's.
const NumberTask = "chaos.number"

// NumberTask's pace: each line takes linePace, so that a task of the
// corpus's 8 KiB splits (about 130 lines) runs some 3 s, long enough for
// kills to land in it; a checkpoint every checkpointEvery lines. (Tasks
// of an input-partitioned stage take no parameters.)
const (
	linePace        = 20 * time.Millisecond
	checkpointEvery = 16
)

func number(ctx context.Context, t *batchwork.Task) error {
	if t.Input == nil {
		return batchwork.Permanent(errors.New("chaos.number: the stage has no input"))
	}
	off, state, _ := t.Resume()
	n := 0
	if len(state) > 0 {
		var err error
		if n, err = strconv.Atoi(string(state)); err != nil {
			return fmt.Errorf("chaos.number: checkpoint state %q: %w", state, err)
		}
	}
	br := bufio.NewReader(t.Input)
	for {
		line, rerr := br.ReadString('\n')
		if len(line) > 0 {
			timer := time.NewTimer(linePace) // the work a line takes
			select {
			case <-ctx.Done():
				timer.Stop()
				return context.Cause(ctx)
			case <-timer.C:
			}
			off += int64(len(line))
			n++
			if _, err := fmt.Fprintf(t.Out, "%d\t%s", n, line); err != nil {
				return err
			}
			if n%checkpointEvery == 0 {
				if err := t.Checkpoint(ctx, off, []byte(strconv.Itoa(n))); err != nil {
					return err
				}
			}
		}
		if rerr == io.EOF {
			return nil
		}
		if rerr != nil {
			return rerr
		}
	}
}

// CheckNumbered says whether an output of NumberTask numbers its lines 1,
// 2, 3... with none skipped or repeated: what a resume from a checkpoint
// at the wrong offset, or with the wrong state, would break.
func CheckNumbered(out []byte) error {
	want := 1
	for len(out) > 0 {
		line := out
		if i := indexByte(out, '\n'); i >= 0 {
			line, out = out[:i], out[i+1:]
		} else {
			out = nil
		}
		tab := indexByte(line, '\t')
		if tab < 0 {
			return fmt.Errorf("line %d has no number: %q", want, line)
		}
		got, err := strconv.Atoi(string(line[:tab]))
		if err != nil || got != want {
			return fmt.Errorf("line %d is numbered %q: records skipped or repeated", want, line[:tab])
		}
		want++
	}
	return nil
}

func indexByte(b []byte, c byte) int {
	for i, x := range b {
		if x == c {
			return i
		}
	}
	return -1
}
