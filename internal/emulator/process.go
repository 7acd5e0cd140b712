package emulator

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os/exec"
	"runtime"
	"sync"
	"syscall"
	"time"
)

// process is a running emulator child (moto_server, DynamoDB Local).
type process struct {
	name    string // for errors: "moto server", "DynamoDB Local"
	cmd     *exec.Cmd
	logPath string
	done    chan struct{} // closed when the process has exited
	waitErr error         // valid after done is closed

	mu          sync.Mutex
	stopping    bool
	diedEarlier bool // exited before stop was called
}

// start starts the process from a goroutine locked to its OS thread, which
// stays alive (and locked) until the process has exited: on Linux the
// parent-death signal fires when the *thread* that forked the child exits,
// and a locked thread is never reused or retired by the Go runtime meanwhile.
func (p *process) start() error {
	started := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		if err := p.cmd.Start(); err != nil {
			started <- err
			return
		}
		started <- nil
		p.waitErr = p.cmd.Wait()
		p.mu.Lock()
		p.diedEarlier = !p.stopping
		p.mu.Unlock()
		close(p.done)
	}()
	return <-started
}

func (p *process) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// httpOK is a health check: one GET of url answers 200.
func httpOK(url string) func(context.Context) error {
	return func(ctx context.Context) error {
		code, err := probe(ctx, url, 2*time.Second)
		if err == nil && code != http.StatusOK {
			err = fmt.Errorf("GET %s: status %d", url, code)
		}
		return err
	}
}

// waitHealthy polls check until it succeeds, the process exits or the
// timeout passes.
func (p *process) waitHealthy(ctx context.Context, check func(context.Context) error, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var lastErr error = errors.New("no health check completed")
	for {
		if p.exited() {
			return fmt.Errorf("process exited: %v", p.waitErr)
		}
		err := check(ctx)
		if err == nil {
			if p.exited() {
				return fmt.Errorf("process exited: %v", p.waitErr)
			}
			return nil
		}
		if ctx.Err() == nil {
			lastErr = err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w; last health check: %v", ctx.Err(), lastErr)
		case <-p.done:
			return fmt.Errorf("process exited: %v", p.waitErr)
		case <-time.After(healthPollInterval):
		}
	}
}

// stop sends SIGTERM to the process group, SIGKILL after grace, and waits.
func (p *process) stop(grace time.Duration) error {
	p.mu.Lock()
	p.stopping = true
	p.mu.Unlock()

	if p.exited() {
		return p.earlyExit()
	}
	pid := p.cmd.Process.Pid
	_ = signalGroup(pid, syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(grace):
		_ = signalGroup(pid, syscall.SIGKILL)
		select {
		case <-p.done:
		case <-time.After(10 * time.Second):
			return fmt.Errorf("emulator: %s pid %d did not exit after SIGKILL (log: %s)", p.name, pid, p.logPath)
		}
	}
	return p.earlyExit()
}

// earlyExit reports a process that died before stop was called.
func (p *process) earlyExit() error {
	p.mu.Lock()
	early := p.diedEarlier
	p.mu.Unlock()
	if early {
		return fmt.Errorf("emulator: %s had already exited: %v (log: %s)", p.name, p.waitErr, p.logPath)
	}
	return nil
}
