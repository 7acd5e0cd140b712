package execstage

// Checkpoints of exec stages' programs: the protocol by which a program
// saves its progress, as a Go function does with Task.Checkpoint, and
// resumes from it on a retry, as with Task.Resume (executor's checkpoint.go). The
// semantics are the Go path's: the same limits (domain.CheckArgs), the
// same fencing (only the holder of the task's claim can make a
// checkpoint usable), the outputs so far sealed as segments before the
// checkpoint is recorded, so a resumed task's outputs are byte for byte
// an uninterrupted run's.
//
// To checkpoint, a program:
//
//  1. flushes its stdout (everything it wrote so far belongs before the
//     checkpoint; with a shuffle, it ends every line);
//  2. writes one line to its control channel, file descriptor 3
//     (BATCHWORK_CONTROL_FD; control.go), never to stderr:
//
//     BATCHWORK_CHECKPOINT<TAB><offset><TAB><state in base64>
//
//     offset being the bytes of its stdin consumed, counted from the
//     first byte of the task's input (so from BATCHWORK_RESUME_OFFSET on
//     a resumed attempt), on a record boundary, and state at most
//     domain.MaxCheckpointState bytes before encoding (standard base64,
//     padded; empty for none);
//  3. reads one line from file descriptor 4 (BATCHWORK_CHECKPOINT_FD)
//     before writing anything more to stdout: "ok" once the checkpoint
//     is saved, or "error <why>" when it was refused (a bad line, an
//     offset behind the last, a state too big, or the attempt lost its
//     claim, in which case the program is being stopped anyway).
//
// Why the program must wait: its stdout and its control channel are two
// pipes, read apart, so the runner cannot tell from the control line
// alone how much of stdout came before it. The runner writes a marker of
// its own (an attempt-unique random token) into the stdout pipe after it
// reads the line; since the program wrote (flushed) its outputs before
// the line, they are all in the pipe ahead of the marker, and the runner
// seals what it read up to the marker. Output the program wrote after
// the line and before the ack would be sealed into the checkpoint though
// it belongs after it, hence the wait. In a shell:
//
//	printf 'BATCHWORK_CHECKPOINT\t%d\t%s\n' "$off" "$(printf %s "$n" | base64)" >&"$BATCHWORK_CONTROL_FD"
//	read -r ack <&"$BATCHWORK_CHECKPOINT_FD"; case $ack in ok) ;; *) echo "$ack" >&2; exit 1;; esac
//
// A retry of the task (any later attempt) resumes from its last usable
// checkpoint: the program's stdin starts at the checkpoint's offset, its
// outputs start as the checkpoint's, and BATCHWORK_RESUME_OFFSET and
// BATCHWORK_RESUME_STATE (base64) say where and with what state. They
// are unset when the task starts afresh.
//
// As for a Go function, the first checkpoint switches the attempt's
// outputs to segments: it is refused if the program has already written
// a part's worth (8 MiB) to one output partition. A program that writes
// more than that before its first real checkpoint checkpoints at offset
// 0 first (`BATCHWORK_CHECKPOINT<TAB>0<TAB>`).

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/batchwork/batchwork/shared/domain"
)

// ExecCheckpointPrefix starts the control line by which an exec program
// checkpoints (see the file comment).
const ExecCheckpointPrefix = "BATCHWORK_CHECKPOINT\t"

// Environment of a program that can checkpoint.
const (
	// EnvCheckpointFD is the file descriptor the program reads acks
	// from: always 4.
	EnvCheckpointFD = "BATCHWORK_CHECKPOINT_FD"
	// EnvResumeOffset and EnvResumeState are the checkpoint the attempt
	// resumes from: its offset in the task's input (where stdin starts)
	// and its state, base64. Unset when the task starts afresh.
	EnvResumeOffset = "BATCHWORK_RESUME_OFFSET"
	EnvResumeState  = "BATCHWORK_RESUME_STATE"
)

// maxCheckpointLine bounds a checkpoint line: the prefix, an
// offset, and the largest state in base64.
var maxCheckpointLine = len(ExecCheckpointPrefix) + 20 + 1 + base64.StdEncoding.EncodedLen(domain.MaxCheckpointState)

// ackTimeout bounds writing one ack: a program that never reads its
// acks must not stall the runner once the pipe is full.
const ackTimeout = time.Second

// parseCheckpointLine parses a checkpoint line's text after the prefix:
// "<offset>\t<base64 state>". Its errors name the field and the problem.
func parseCheckpointLine(rest string) (int64, []byte, error) {
	offText, stateText, ok := strings.Cut(rest, "\t")
	if !ok {
		return 0, nil, fmt.Errorf("%w: checkpoint line: want BATCHWORK_CHECKPOINT<TAB>offset<TAB>base64 state, got no tab after the offset %q",
			domain.ErrCheckpoint, truncate(offText, 40))
	}
	off, err := strconv.ParseInt(offText, 10, 64)
	if err != nil {
		return 0, nil, fmt.Errorf("%w: checkpoint line: offset %q is not a whole number of bytes", domain.ErrCheckpoint, truncate(offText, 40))
	}
	if off < 0 {
		return 0, nil, fmt.Errorf("%w: checkpoint line: offset %d is negative", domain.ErrCheckpoint, off)
	}
	if strings.ContainsAny(stateText, "\t") {
		return 0, nil, fmt.Errorf("%w: checkpoint line: state has a tab; want one base64 field", domain.ErrCheckpoint)
	}
	if n := base64.StdEncoding.DecodedLen(len(stateText)); n > domain.MaxCheckpointState+2 {
		return 0, nil, fmt.Errorf("%w: checkpoint line: state of about %d bytes is over the %d-byte limit; keep data in outputs",
			domain.ErrCheckpoint, n, domain.MaxCheckpointState)
	}
	state, err := base64.StdEncoding.DecodeString(stateText)
	if err != nil {
		return 0, nil, fmt.Errorf("%w: checkpoint line: state is not standard base64: %v", domain.ErrCheckpoint, err)
	}
	if len(state) > domain.MaxCheckpointState {
		return 0, nil, fmt.Errorf("%w: checkpoint line: state of %d bytes is over the %d-byte limit; keep data in outputs",
			domain.ErrCheckpoint, len(state), domain.MaxCheckpointState)
	}
	return off, state, nil
}

// execCheckpoints is one program's checkpoint protocol: the control
// channel hands it checkpoint lines, and it answers on the ack pipe.
type execCheckpoints struct {
	ctx  context.Context
	t    *Attempt
	pump *stdoutPump
	ack  *os.File // write end; the program reads fd 3
	// ackFailed: an ack could not be written (the program does not read
	// them, or exited); later ones are not tried.
	ackFailed bool
}

// handle takes a checkpoint line's text after the prefix (cut: the line
// was longer than maxControlLine) and answers it. It runs on the control
// channel's goroutine: the program waits for the ack, so nothing else of
// its control lines is due meanwhile.
func (x *execCheckpoints) handle(rest string, cut bool) {
	var err error
	if cut {
		err = errCheckpointLineCut
	} else {
		err = x.save(rest)
	}
	if err != nil && x.t.Log != nil {
		x.t.Log.Warn("exec checkpoint refused", "err", err)
	}
	x.reply(err)
}

// cutCheckpoint is the error of a checkpoint line cut for its length.
var errCheckpointLineCut = fmt.Errorf("%w: checkpoint line: longer than %d bytes (state over the %d-byte limit?)",
	domain.ErrCheckpoint, maxCheckpointLine, domain.MaxCheckpointState)

func (x *execCheckpoints) save(rest string) error {
	if len(ExecCheckpointPrefix)+len(rest) >= maxCheckpointLine {
		return errCheckpointLineCut
	}
	off, state, err := parseCheckpointLine(rest)
	if err != nil {
		return err
	}
	if x.t.Checkpoints == nil {
		return fmt.Errorf("%w: this task cannot checkpoint (a control plane without checkpoints)", domain.ErrCheckpoint)
	}
	// Everything the program wrote to stdout before the line is read
	// into the outputs before they are sealed.
	if err := x.pump.sync(x.ctx); err != nil {
		return fmt.Errorf("checkpoint: %w", err)
	}
	return x.t.Checkpoints.Save(x.ctx, off, state)
}

func (x *execCheckpoints) reply(err error) {
	if x.ackFailed {
		return
	}
	msg := "ok\n"
	if err != nil {
		msg = "error " + strings.ReplaceAll(err.Error(), "\n", " ") + "\n"
	}
	_ = x.ack.SetWriteDeadline(time.Now().Add(ackTimeout))
	if _, werr := io.WriteString(x.ack, msg); werr != nil {
		x.ackFailed = true
		if x.t.Log != nil {
			x.t.Log.Warn("exec checkpoint: the program does not read its acks on fd 4", "err", werr)
		}
	}
}

// resumeEnv is the environment saying where a resumed attempt starts:
// none when it starts afresh.
func resumeEnv(t *Attempt) []string {
	if t.Checkpoints == nil || t.Resume == nil {
		return nil
	}
	return []string{
		EnvResumeOffset + "=" + strconv.FormatInt(t.Resume.Offset, 10),
		EnvResumeState + "=" + base64.StdEncoding.EncodeToString(t.Resume.State),
	}
}

// stdoutPump copies the program's stdout pipe into the stdout sink, and
// syncs with checkpoints: sync writes a marker into the same pipe and
// returns once the pump has read up to it, so everything the program
// wrote before is in the outputs. The marker is random per attempt (16
// bytes, hex) and never reaches the outputs.
type stdoutPump struct {
	r    *os.File // read end
	w    *os.File // the runner's own write end, for markers
	sink *stdoutSink
	tok  []byte

	mu      sync.Mutex
	pending bool
	synced  chan error // one per marker
	done    chan struct{}
}

func newStdoutPump(sink *stdoutSink) (*stdoutPump, error) {
	r, w, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		r.Close()
		w.Close()
		return nil, err
	}
	tok := []byte("\x00BATCHWORK-SYNC-" + hex.EncodeToString(b[:]) + "\x00")
	return &stdoutPump{r: r, w: w, sink: sink, tok: tok, synced: make(chan error, 1), done: make(chan struct{})}, nil
}

// run copies until the pipe ends (every write end closed) or is closed.
func (p *stdoutPump) run() {
	defer close(p.done)
	buf := make([]byte, 32<<10)
	var carry []byte
	for {
		n, err := p.r.Read(buf)
		data := buf[:n]
		p.mu.Lock()
		pending := p.pending
		p.mu.Unlock()
		if pending && n > 0 {
			data = append(carry, data...)
			carry = nil
			if i := bytes.Index(data, p.tok); i >= 0 {
				p.write(data[:i])
				var err error
				if p.sink.shuffle && p.sink.partial.Len() > 0 {
					err = fmt.Errorf("%w: stdout has an unfinished line; end every key<TAB>value line before checkpointing", domain.ErrCheckpoint)
				}
				p.signal(err)
				data = data[i+len(p.tok):]
			} else {
				// The marker may be cut between reads: keep what could
				// be its start.
				keep := min(len(data), len(p.tok)-1)
				carry = bytes.Clone(data[len(data)-keep:])
				data = data[:len(data)-keep]
			}
		}
		p.write(data)
		if err != nil {
			p.write(carry)
			p.mu.Lock()
			pending := p.pending
			p.mu.Unlock()
			if pending {
				p.signal(errors.New("stdout closed before the checkpoint's marker came through"))
			}
			return
		}
	}
}

// write hands bytes to the sink; once the sink failed (it stops the
// program) the rest is drained, so that markers still come through.
func (p *stdoutPump) write(b []byte) {
	if len(b) > 0 && p.sink.failed() == nil {
		_, _ = p.sink.Write(b)
	}
}

func (p *stdoutPump) signal(err error) {
	p.mu.Lock()
	p.pending = false
	p.mu.Unlock()
	select {
	case p.synced <- err:
	default: // a sync that gave up (its context ended) left one unread
	}
}

// sync returns once everything written to stdout before it was read into
// the sink.
func (p *stdoutPump) sync(ctx context.Context) error {
	p.mu.Lock()
	p.pending = true
	p.mu.Unlock()
	// At most PIPE_BUF bytes: written whole, never interleaved with the
	// program's writes.
	if _, err := p.w.Write(p.tok); err != nil {
		p.mu.Lock()
		p.pending = false
		p.mu.Unlock()
		return fmt.Errorf("sync stdout: %w", err)
	}
	select {
	case err := <-p.synced:
		return err
	case <-ctx.Done():
		return context.Cause(ctx)
	case <-p.done:
		select {
		case err := <-p.synced:
			return err
		default:
			return errors.New("sync stdout: stdout ended")
		}
	}
}

// finish closes the runner's write end once the program exited and waits
// for the pump to read the rest, up to wait: false when the pipe stayed
// open longer (a background process the program started holds it), and
// the pump was stopped.
func (p *stdoutPump) finish(wait time.Duration) bool {
	p.w.Close()
	tm := time.NewTimer(wait)
	defer tm.Stop()
	select {
	case <-p.done:
		p.r.Close()
		return true
	case <-tm.C:
		p.r.Close() // unblocks the pump's read
		<-p.done
		return false
	}
}

// plumbExec wires a program's stdout through a pump (sinking into out),
// its control channel as fd 3 (control.go) and, for a task that can
// checkpoint, its checkpoint protocol: the ack pipe as fd 4 and the resume
// point in its environment. cmd.Env must be set. The returned func,
// called once the program has been waited for, releases them and gives
// the program's error, which is exec.ErrWaitDelay when stdout or the
// control channel stayed open past execWaitDelay after the program
// exited.
func plumbExec(ctx context.Context, cmd *exec.Cmd, t *Attempt, out *stdoutSink) (func(runErr error) error, error) {
	pump, err := newStdoutPump(out)
	if err != nil {
		return nil, fmt.Errorf("stdout: %w", err)
	}
	ctl, err := newExecControl(t.Log, t.Rejects)
	if err != nil {
		pump.r.Close()
		pump.w.Close()
		return nil, fmt.Errorf("control channel: %w", err)
	}
	cmd.ExtraFiles = []*os.File{ctl.w} // fd 3
	cmd.Env = append(cmd.Env, EnvControlFD+"=3")
	var ackR, ackW *os.File
	if t.Checkpoints != nil {
		if ackR, ackW, err = os.Pipe(); err != nil {
			pump.r.Close()
			pump.w.Close()
			ctl.r.Close()
			ctl.w.Close()
			return nil, fmt.Errorf("checkpoint acks: %w", err)
		}
		cmd.ExtraFiles = append(cmd.ExtraFiles, ackR) // fd 4
		cmd.Env = append(cmd.Env, EnvCheckpointFD+"=4")
		cmd.Env = append(cmd.Env, resumeEnv(t)...)
		ctl.ckpt = &execCheckpoints{ctx: ctx, t: t, pump: pump, ack: ackW}
	}
	cmd.Stdout = pump.w
	go pump.run()
	go ctl.run()
	return func(runErr error) error {
		deadline := time.Now().Add(execWaitDelay)
		// The control lines first: a checkpoint's sync needs the pump.
		ctlDone := ctl.finish(deadline)
		if ackR != nil {
			ackR.Close()
			ackW.Close()
		}
		if !pump.finish(time.Until(deadline)) || !ctlDone {
			if runErr == nil {
				runErr = exec.ErrWaitDelay
			}
		}
		return runErr
	}, nil
}
