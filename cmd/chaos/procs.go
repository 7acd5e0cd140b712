package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"
)

// buildBinaries builds batchwork-local and the chaos executor
// (batchwork-executor with the chaos workloads' task) into dir, from the
// module this command belongs to.
func buildBinaries(ctx context.Context, dir string) (local, executor string, err error) {
	root, err := moduleRoot(ctx)
	if err != nil {
		return "", "", err
	}
	cmd := exec.CommandContext(ctx, "go", "build", "-tags", "faults", "-o", dir+string(filepath.Separator), "./cmd/batchwork-local", "./cmd/chaos/executor")
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", "", fmt.Errorf("go build the binaries: %w\n%s", err, out)
	}
	return filepath.Join(dir, "batchwork-local"), filepath.Join(dir, "executor"), nil
}

func moduleRoot(ctx context.Context) (string, error) {
	out, err := exec.CommandContext(ctx, "go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOMOD: %w", err)
	}
	mod := strings.TrimSpace(string(out))
	if mod == "" || mod == os.DevNull {
		return "", errors.New("not inside the batchwork module (go env GOMOD is empty)")
	}
	return filepath.Dir(mod), nil
}

// proc is one child process whose combined output is a stream of JSON
// log lines (slog), each handed to the harness and copied to the log.
type proc struct {
	name string
	cmd  *exec.Cmd
	// done is closed once the process has exited and every line it wrote
	// has been read: after it, the harness knows all the process said.
	done    chan struct{}
	waitErr error
	tail    *tailBuffer
}

// line is one log line of a process, decoded.
type line struct {
	proc   string
	fields map[string]any
}

// startProc starts bin and pumps its output to onLine and logw.
func startProc(name, bin string, args, env []string, logw io.Writer, onLine func(line)) (*proc, error) {
	r, w, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("%s: pipe: %w", name, err)
	}
	cmd := exec.Command(bin, args...)
	cmd.Env = env
	cmd.Stdout, cmd.Stderr = w, w
	if err := cmd.Start(); err != nil {
		r.Close()
		w.Close()
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	w.Close() // the child holds the only write end: EOF when it exits
	p := &proc{name: name, cmd: cmd, done: make(chan struct{}), tail: &tailBuffer{max: 40}}
	pumped := make(chan struct{})
	go func() {
		defer close(pumped)
		defer r.Close()
		pump(p, r, logw, onLine)
	}()
	go func() {
		p.waitErr = cmd.Wait()
		<-pumped
		close(p.done)
	}()
	return p, nil
}

func pump(p *proc, r io.Reader, logw io.Writer, onLine func(line)) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 4<<20)
	for sc.Scan() {
		text := sc.Text()
		fmt.Fprintf(logw, "%s %s\n", p.name, text)
		p.tail.add(text)
		var fields map[string]any
		if json.Unmarshal([]byte(text), &fields) == nil {
			onLine(line{proc: p.name, fields: fields})
		}
	}
}

// kill sends SIGKILL and waits until the process is gone and its output
// read.
func (p *proc) kill() {
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.done
}

// stop asks the process to finish (SIGTERM: executors drain their running
// tasks) and kills it if it has not within grace.
func (p *proc) stop(grace time.Duration) {
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(grace):
		p.kill()
	}
}

// exited reports whether the process has ended.
func (p *proc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// tailBuffer keeps a process's last lines, for an error message.
type tailBuffer struct {
	mu    sync.Mutex
	max   int
	lines []string
}

func (t *tailBuffer) add(s string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.lines) == t.max {
		t.lines = t.lines[1:]
	}
	t.lines = append(t.lines, s)
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return strings.Join(t.lines, "\n")
}

// syncWriter serialises the processes' lines into one log file.
type syncWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (s *syncWriter) Write(b []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(b)
}

// baseEnv is this process's environment without AWS or Batchwork
// settings, so a developer's profile or endpoint never leaks into the
// children: they get exactly the emulator's. The log level passes
// through (BATCHWORK_LOG_LEVEL=debug make chaos).
func baseEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if strings.HasPrefix(kv, "BATCHWORK_LOG_LEVEL=") {
			env = append(env, kv)
			continue
		}
		if strings.HasPrefix(kv, "AWS_") || strings.HasPrefix(kv, "BATCHWORK_") {
			continue
		}
		env = append(env, kv)
	}
	return env
}
