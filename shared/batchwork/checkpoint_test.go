package batchwork_test

import (
	"bufio"
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"

	"github.com/batchwork/batchwork/shared/batchwork"
)

// sumLines adds up its input's numbers, one a line, checkpointing the
// running sum (its state) after every line.
func sumLines(ctx context.Context, t *batchwork.Task) error {
	off, state, _ := t.Resume()
	sum := 0
	if state != nil {
		sum, _ = strconv.Atoi(string(state))
	}
	br := bufio.NewReader(t.Input)
	for {
		line, err := br.ReadString('\n')
		if len(line) > 0 {
			n, _ := strconv.Atoi(strings.TrimSpace(line))
			sum += n
			off += int64(len(line))
			if err := t.Checkpoint(ctx, off, []byte(strconv.Itoa(sum))); err != nil {
				return err
			}
		}
		if err != nil {
			_, werr := t.Out.Write([]byte(strconv.Itoa(sum) + "\n"))
			return werr
		}
	}
}

// Under RunTask, checkpoints are recorded and a resumed task's Input
// starts at its checkpoint's offset with its state restored, as on an
// executor.
func TestRunTaskCheckpointAndResume(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	in := "1\n2\n30\n400\n"
	res, err := batchwork.RunTask(ctx, sumLines, batchwork.TaskInput{Input: strings.NewReader(in)})
	if err != nil {
		t.Fatal(err)
	}
	if got := string(res.Parts[0]); got != "433\n" || len(res.Checkpoints) != 4 || res.Checkpoints[1].Offset != 4 || string(res.Checkpoints[1].State) != "3" {
		t.Fatalf("output %q, checkpoints %+v; want 433 and one checkpoint a line", got, res.Checkpoints)
	}
	// Resumed after the second line: the first two are skipped, their sum
	// comes from the state.
	res, err = batchwork.RunTask(ctx, sumLines, batchwork.TaskInput{Input: strings.NewReader(in), Resume: &res.Checkpoints[1]})
	if err != nil {
		t.Fatal(err)
	}
	if got := string(res.Parts[0]); got != "433\n" || len(res.Checkpoints) != 2 {
		t.Fatalf("resumed: output %q, %d checkpoints; want 433 and 2", got, len(res.Checkpoints))
	}
}

// Bad checkpoints are refused with an error naming the problem.
func TestRunTaskCheckpointRefusals(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		resume *batchwork.Checkpoint
		offset int64
		state  int
		want   string
	}{
		{"negative offset", nil, -5, 0, "offset -5 is negative"},
		{"behind the resumed checkpoint", &batchwork.Checkpoint{Offset: 3}, 2, 0, "offset 2 is behind the last checkpoint's 3"},
		{"state too large", nil, 0, batchwork.MaxCheckpointState + 1, "65537 bytes is over the 65536-byte limit"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fn := func(ctx context.Context, t *batchwork.Task) error {
				return t.Checkpoint(ctx, tc.offset, make([]byte, tc.state))
			}
			res, err := batchwork.RunTask(context.Background(), fn, batchwork.TaskInput{Input: strings.NewReader("abcdef\n"), Resume: tc.resume})
			if !errors.Is(err, batchwork.ErrCheckpoint) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want a refused checkpoint saying %q", err, tc.want)
			}
			if len(res.Checkpoints) != 0 {
				t.Fatalf("a refused checkpoint was recorded: %+v", res.Checkpoints)
			}
		})
	}
}
