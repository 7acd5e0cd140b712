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

	"github.com/batchwork/batchwork/internal/testtier"
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
	testtier.SkipUnderShort(t, "the AWS emulator")
	// Unset, not empty: the SDK treats an empty AWS_ENDPOINT_URL as set.
	for _, k := range []string{"AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_DYNAMODB", "BATCHWORK_EMULATOR", "BATCHWORK_MOTO_SERVER", "BATCHWORK_DYNAMODB"} {
		t.Setenv(k, "")
		os.Unsetenv(k)
	}
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
	// moto, and DynamoDB Local for DynamoDB (the default).
	lines := strings.Split(strings.TrimSpace(string(content)), "\n")
	var urls []string
	for i, prefix := range []string{"AWS_ENDPOINT_URL=http://", "AWS_ENDPOINT_URL_DYNAMODB=http://"} {
		if len(lines) != 2 {
			break
		}
		if u, ok := strings.CutPrefix(lines[i], prefix); ok {
			urls = append(urls, u)
		}
	}
	if len(urls) != 2 || urls[0] == urls[1] {
		t.Fatalf("env file = %q, want AWS_ENDPOINT_URL and AWS_ENDPOINT_URL_DYNAMODB lines", content)
	}
	time.Sleep(50 * time.Millisecond) // stdout is written right after the file
	if got := stdout.String(); got != string(content) {
		t.Fatalf("stdout = %q, want %q", got, content)
	}
	if strings.Count(stderr.String(), "log: ") != 2 {
		t.Fatalf("stderr lacks the log paths: %q", stderr.String())
	}
	for _, url := range urls {
		if c, err := net.DialTimeout("tcp", url, time.Second); err != nil {
			t.Fatalf("emulator not reachable at %s: %v", url, err)
		} else {
			c.Close()
		}
	}

	cancel()
	if err := <-errc; err != nil {
		t.Fatalf("run: %v", err)
	}
	if _, err := os.Stat(envFile); !os.IsNotExist(err) {
		t.Fatalf("env file still present after shutdown: %v", err)
	}
	for _, url := range urls {
		if c, err := net.DialTimeout("tcp", url, time.Second); err == nil {
			c.Close()
			t.Fatalf("emulator still accepting at %s after shutdown", url)
		}
	}
}
