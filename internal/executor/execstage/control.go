package execstage

// The control channel of exec stages' programs: the lines by which a
// program rejects records (executor.Rejects) and checkpoints (checkpoint.go). They
// travel on a pipe of their own, file descriptor 3 in the program
// (EnvControlFD), never on stderr: a program that logs the data it reads
// to stderr would otherwise let that data forge them, and a forged
// checkpoint makes a retry skip records. Whatever reaches stderr is log
// text, whatever it starts with. A line on the channel is
//
//	BATCHWORK_REJECT<TAB><reason><TAB><record>
//	BATCHWORK_CHECKPOINT<TAB><offset><TAB><state in base64>
//
// ended by a newline; any other line is logged as a warning and ignored.
// A checkpoint's answer comes back on file descriptor 4
// (EnvCheckpointFD), present only when the task can checkpoint.

import (
	"bufio"
	"bytes"
	"errors"
	"log/slog"
	"os"
	"strings"
	"time"
)

// ExecRejectPrefix starts the control line by which an
// exec stage's program rejects a record: the prefix, the reason, a tab,
// and the record as the rest of the line (it may hold tabs, not a
// newline), as in
//
//	printf 'BATCHWORK_REJECT\tnot a number\t%s\n' "$line" >&"$BATCHWORK_CONTROL_FD"
//
// The record's offset in the input is found as for a Go function's
// Task.Reject. A record
// longer than domain.MaxBadRecordBytes is cut. A line with the prefix but
// no tab after the reason rejects the empty record.
const ExecRejectPrefix = "BATCHWORK_REJECT\t"

// EnvControlFD is the file descriptor a program writes its control lines
// to: always 3.
const EnvControlFD = "BATCHWORK_CONTROL_FD"

// maxControlLine bounds a control line: the longest is a checkpoint's,
// with the largest state. Longer lines are cut; a cut checkpoint line is
// refused.
var maxControlLine = maxCheckpointLine

// execControl reads a program's control lines and acts on them, one at a
// time, in the order the program wrote them.
type execControl struct {
	r, w    *os.File // the pipe: read end, and the runner's copy of the write end
	log     *slog.Logger
	rejects Rejects          // nil: the task cannot reject records
	ckpt    *execCheckpoints // nil: the task cannot checkpoint
	done    chan struct{}
}

func newExecControl(log *slog.Logger, rejects Rejects) (*execControl, error) {
	r, w, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	return &execControl{r: r, w: w, log: log, rejects: rejects, done: make(chan struct{})}, nil
}

// run reads lines until every write end is closed (the program and what
// it started have exited, and finish closed the runner's) or the read end
// is closed.
func (c *execControl) run() {
	defer close(c.done)
	br := bufio.NewReaderSize(c.r, 64<<10)
	var line []byte
	cut := false
	for {
		frag, err := br.ReadSlice('\n')
		if room := maxControlLine - len(line); len(frag) > room {
			line = append(line, frag[:max(0, room)]...)
			cut = true
		} else {
			line = append(line, frag...)
		}
		switch {
		case err == nil:
			c.line(strings.TrimSuffix(strings.TrimSuffix(string(line), "\n"), "\r"), cut)
			line, cut = line[:0], false
		case errors.Is(err, bufio.ErrBufferFull):
		default:
			if len(bytes.TrimSpace(line)) > 0 {
				c.line(string(line), cut)
			}
			return
		}
	}
}

// line acts on one control line; cut says it was longer than
// maxControlLine.
func (c *execControl) line(l string, cut bool) {
	if rest, ok := strings.CutPrefix(l, ExecCheckpointPrefix); ok {
		if c.ckpt == nil {
			c.warn("exec control: a checkpoint line, but this task cannot checkpoint (no " + EnvCheckpointFD + ")")
			return
		}
		c.ckpt.handle(rest, cut)
		return
	}
	if rest, ok := strings.CutPrefix(l, ExecRejectPrefix); ok {
		if c.rejects == nil {
			c.warn("exec control: a reject line, but this task cannot reject records")
			return
		}
		reason, record, _ := strings.Cut(rest, "\t")
		// Past the limit the attempt fails when the program ends (the
		// runner checks Rejects.Err); the program is left to finish or
		// fail itself.
		_ = c.rejects.Reject(-1, []byte(record), reason)
		return
	}
	c.warn("exec control: not a control line (want BATCHWORK_REJECT or BATCHWORK_CHECKPOINT); ignored", "line", truncate(l, 80))
}

func (c *execControl) warn(msg string, args ...any) {
	if c.log != nil {
		c.log.Warn(msg, args...)
	}
}

// finish closes the runner's write end once the program exited and waits
// for the reader to act on the lines left, until deadline: past it (a
// background process the program started holds the pipe), the reader is
// stopped and false returned.
func (c *execControl) finish(deadline time.Time) bool {
	c.w.Close()
	tm := time.NewTimer(time.Until(deadline))
	defer tm.Stop()
	select {
	case <-c.done:
		c.r.Close()
		return true
	case <-tm.C:
		c.r.Close() // unblocks the reader
		<-c.done
		return false
	}
}
