package synchttp

import (
	"context"
	"net"
	"strings"
	"sync/atomic"
	"testing"
)

// countingConn counts the calls that reach the socket.
type countingConn struct {
	net.Conn
	reads, writes *atomic.Int32
}

func (c *countingConn) Read(p []byte) (int, error) {
	c.reads.Add(1)
	return c.Conn.Read(p)
}

func (c *countingConn) Write(p []byte) (int, error) {
	c.writes.Add(1)
	return c.Conn.Write(p)
}

// A request goes out in one write, its head and body together, and an
// answer that fits the read buffer comes in one read: each socket call is
// a system call, and on loopback a wake-up of the other side.
func TestOneWriteOneReadPerRequest(t *testing.T) {
	s := newServer(t, false, echo)
	var reads, writes atomic.Int32
	dial := s.t.dial
	s.t.dial = func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := dial(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return &countingConn{Conn: c, reads: &reads, writes: &writes}, nil
	}
	s.call(t, "dial")
	reads.Store(0)
	writes.Store(0)
	const n = 10
	body := strings.Repeat("x", 2000)
	for range n {
		if got := s.call(t, body); got != body {
			t.Fatalf("answer of %d bytes, want %d", len(got), len(body))
		}
	}
	if w, r := writes.Load(), reads.Load(); w != n || r != n {
		t.Fatalf("%d writes and %d reads for %d requests, want one of each a request", w, r, n)
	}
	if d := s.dials.Load(); d != 1 {
		t.Fatalf("%d dials, want 1", d)
	}
}
