package chaostasks

import (
	"bufio"
	"context"
	"errors"
	"io"
	"time"

	"github.com/batchwork/batchwork/shared/batchwork"
)

// CopyTask copies its input's lines to its output, slowly: a task of a
// whole DynSplitBytes object runs some 3 s, so that an executor whose
// split trigger is a second (BATCHWORK_SPLIT_AFTER) offers the unread
// rest of it as new tasks, which are short enough not to split again.
// Every line of the input must reach the outputs once, whichever task
// read it.
const CopyTask = "chaos.copy"

// CopyTask's pace: copyPause after every copyChunk bytes read.
const (
	copyChunk = 4 << 10
	copyPause = 40 * time.Millisecond
)

// The dynamic-split workload's input: DynSplitFiles objects of about
// DynSplitBytes each (wordcount.Corpus ends on a whole line), read as
// one split each (splitSize twice that),
// large enough that the rest of a split read for a second is worth
// giving away (the executor gives pieces of 64 KiB or more).
const (
	DynSplitFiles = 2
	DynSplitBytes = 320 << 10
)

func copyLines(ctx context.Context, t *batchwork.Task) error {
	if t.Input == nil {
		return batchwork.Permanent(errors.New("chaos.copy: the stage has no input"))
	}
	br := bufio.NewReader(t.Input)
	read := 0
	for {
		line, rerr := br.ReadString('\n')
		if len(line) > 0 {
			if _, err := io.WriteString(t.Out, line); err != nil {
				return err
			}
			if read += len(line); read >= copyChunk {
				read = 0
				timer := time.NewTimer(copyPause) // the work a chunk takes
				select {
				case <-ctx.Done():
					timer.Stop()
					return context.Cause(ctx)
				case <-timer.C:
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
