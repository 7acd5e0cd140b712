package main

import (
	"bytes"
	"context"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func TestRunWritesEnvFileAndStops(t *testing.T) {
	t.Setenv("AWS_ENDPOINT_URL", "")
	t.Setenv("BATCHWORK_EMULATOR", "")
	t.Setenv("BATCHWORK_MOTO_SERVER", "")
	t.Setenv("BATCHWORK_EMULATOR_LOGDIR", t.TempDir())
	envFile := filepath.Join(t.TempDir(), "sub", "emulator.env")

	ctx, cancel := context.WithCancel(context.Background())
	var stdout, stderr syncBuffer
	errc := make(chan error, 1)
	go func() { errc <- run(ctx, &stdout, &stderr, 0, envFile) }()

	var content []byte
	deadline := time.Now().Add(45 * time.Second)
	for {
		var err error
		if content, err = os.ReadFile(envFile); err == nil {
			break
		}
		select {
		case err := <-errc:
			t.Fatalf("run returned early: %v (stderr: %s)", err, stderr.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("env file not written; stderr: %s", stderr.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	line := strings.TrimSpace(string(content))
	url, ok := strings.CutPrefix(line, "AWS_ENDPOINT_URL=http://")
	if !ok {
		t.Fatalf("env file = %q", content)
	}
	time.Sleep(50 * time.Millisecond) // stdout is written right after the file
	if got := stdout.String(); got != line+"\n" {
		t.Fatalf("stdout = %q, want %q", got, line+"\n")
	}
	if !strings.Contains(stderr.String(), "log: ") {
		t.Fatalf("stderr lacks the log path: %q", stderr.String())
	}
	if c, err := net.DialTimeout("tcp", url, time.Second); err != nil {
		t.Fatalf("emulator not reachable at %s: %v", url, err)
	} else {
		c.Close()
	}

	cancel()
	if err := <-errc; err != nil {
		t.Fatalf("run: %v", err)
	}
	if _, err := os.Stat(envFile); !os.IsNotExist(err) {
		t.Fatalf("env file still present after shutdown: %v", err)
	}
	if c, err := net.DialTimeout("tcp", url, time.Second); err == nil {
		c.Close()
		t.Fatalf("emulator still accepting at %s after shutdown", url)
	}
}
