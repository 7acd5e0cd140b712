package batchwork_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/batchwork/batchwork/shared/batchwork"
)

// A task that checkpoints: it counts the bytes of Input it has consumed
// (whole lines), saves them with its running total every 1000 lines, and
// when asked to continue in a new invocation (batchwork.ErrContinue, on
// Lambda near its time limit) saves where it is and returns. A retry or
// continuation starts where the last checkpoint left off: Input already
// skips the consumed bytes, the outputs written before it are kept, and
// Resume gives back the total.
func ExampleTask_Checkpoint() {
	total := func(ctx context.Context, t *batchwork.Task) error {
		off, state, _ := t.Resume() // before writing any output
		sum, _ := strconv.Atoi(string(state))
		br := bufio.NewReader(t.Input)
		for n := 1; ; n++ {
			if errors.Is(context.Cause(ctx), batchwork.ErrContinue) {
				if err := t.Checkpoint(ctx, off, []byte(strconv.Itoa(sum))); err != nil {
					return err
				}
				return context.Cause(ctx)
			}
			line, err := br.ReadString('\n')
			if err == io.EOF && line == "" {
				_, err := fmt.Fprintln(t.Out, "total", sum)
				return err
			}
			if err != nil && err != io.EOF {
				return err
			}
			v, _ := strconv.Atoi(strings.TrimSpace(line))
			sum += v
			off += int64(len(line)) // a record boundary: the line is done
			if n%1000 == 0 {
				if err := t.Checkpoint(ctx, off, []byte(strconv.Itoa(sum))); err != nil {
					return err
				}
			}
		}
	}
	// Resumed after the first two lines ("1\n2\n", 4 bytes, total 3).
	res, err := batchwork.RunTask(context.Background(), total, batchwork.TaskInput{
		Input:  strings.NewReader("1\n2\n30\n400\n"),
		Resume: &batchwork.Checkpoint{Offset: 4, State: []byte("3")},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Print(string(res.Parts[0]))
	// Output: total 433
}
