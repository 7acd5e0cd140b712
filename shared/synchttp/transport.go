// Package synchttp is an HTTP/1.1 client transport that writes a request
// and reads its answer in the caller's goroutine. net/http's transport
// runs a read loop and a write loop per connection and hands every request
// and answer between them and the caller over channels: for the small
// JSON RPC requests a process sends to DynamoDB, SQS and EventBridge those
// hand-offs and goroutine wake-ups cost about 20 µs of CPU per request on
// loopback (BenchmarkUpdateItem in shared/ddbwire). Here a request takes
// an idle connection (or dials one), writes itself, and reads the answer's
// header on the same goroutine; its body reads straight from the
// connection and gives it back to the pool at its end.
//
// It speaks HTTP/1.1 only, without proxies, redirects, transparent gzip or
// 100-continue: shared/awsconf sends it only requests that need none of
// them.
package synchttp

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"sync"
	"syscall"
	"time"
)

// DefaultIdleConnTimeout is how long a connection may sit idle when the
// config sets no limit: net/http's DefaultTransport's.
const DefaultIdleConnTimeout = 90 * time.Second

// Config is what the transport takes from the SDK's HTTP transport.
type Config struct {
	// DialContext dials a TCP connection (the SDK's dialer: its timeout
	// and keep-alive). Nil: a net.Dialer's defaults.
	DialContext func(ctx context.Context, network, addr string) (net.Conn, error)
	// TLSClientConfig is cloned per connection for https endpoints, with
	// ServerName the request's host when it sets none.
	TLSClientConfig *tls.Config
	// TLSHandshakeTimeout bounds a handshake; 0: only the context does.
	TLSHandshakeTimeout time.Duration
	// MaxIdleConnsPerHost bounds the idle connections kept per endpoint;
	// past it a finished connection is closed. 0: http.DefaultMaxIdleConnsPerHost.
	MaxIdleConnsPerHost int
	// IdleConnTimeout: an idle connection older than this is closed, not
	// reused. 0: DefaultIdleConnTimeout.
	IdleConnTimeout time.Duration
}

// Transport is an http.RoundTripper; safe for concurrent use.
type Transport struct {
	dial        func(ctx context.Context, network, addr string) (net.Conn, error)
	tls         *tls.Config
	tlsTimeout  time.Duration
	maxIdle     int
	idleTimeout time.Duration
	now         func() time.Time // time.Now; a test's clock

	mu sync.Mutex
	// idle holds each endpoint's idle connections, oldest first: a
	// request takes the newest (the likeliest to be alive), and the
	// oldest expire from the front.
	idle map[endpoint][]*conn
}

// New returns a transport with cfg's settings.
func New(cfg Config) *Transport {
	t := &Transport{
		dial:        cfg.DialContext,
		tls:         cfg.TLSClientConfig,
		tlsTimeout:  cfg.TLSHandshakeTimeout,
		maxIdle:     cfg.MaxIdleConnsPerHost,
		idleTimeout: cfg.IdleConnTimeout,
		now:         time.Now,
		idle:        map[endpoint][]*conn{},
	}
	if t.dial == nil {
		t.dial = (&net.Dialer{}).DialContext
	}
	if t.maxIdle <= 0 {
		t.maxIdle = http.DefaultMaxIdleConnsPerHost
	}
	if t.idleTimeout <= 0 {
		t.idleTimeout = DefaultIdleConnTimeout
	}
	return t
}

// ConnError is a connection's failure after it was taken or dialed:
// writing the request or reading the answer's header. The request may
// have reached the server (a lost answer), which the SDK's retryer
// retries as a connection error (ConnectionError), as it does net/http's
// through the SDK's RequestSendError.
type ConnError struct {
	Op  string // "write" or "read"
	Err error
}

func (e *ConnError) Error() string { return "synchttp: " + e.Op + ": " + e.Err.Error() }

func (e *ConnError) Unwrap() error { return e.Err }

// ConnectionError marks it for the SDK's retryer
// (retry.RetryableConnectionError).
func (e *ConnError) ConnectionError() bool { return true }

// errScheme: the transport speaks http and https only.
var errScheme = errors.New("synchttp: unsupported protocol scheme")

// aLongTimeAgo as a deadline makes a blocked read or write return at once.
var aLongTimeAgo = time.Unix(1, 0)

// RoundTrip sends req and reads its answer's header. The answer's body
// must be read to its end (io.EOF) for the connection to be reused;
// closing it before, an error, an answer with Connection: close or a
// canceled context close the connection. A deadline or cancel of
// req.Context() aborts a blocked dial, write or read (the body's too) and
// is the error returned.
func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	ctx := req.Context()
	c, err := t.conn(ctx, req)
	if err != nil {
		if req.Body != nil {
			req.Body.Close()
		}
		return nil, err
	}
	var stop func() bool
	if ctx.Done() != nil {
		nc := c.nc
		stop = context.AfterFunc(ctx, func() { nc.SetDeadline(aLongTimeAgo) })
	}
	resp, err := c.exchange(req)
	if err != nil {
		if stop != nil {
			stop()
		}
		c.nc.Close()
		if cerr := ctx.Err(); cerr != nil {
			return nil, cerr
		}
		return nil, err
	}
	reuse := !resp.Close && !req.Close && resp.StatusCode != http.StatusSwitchingProtocols
	if resp.Body == http.NoBody || resp.Body == nil {
		t.release(c, stop, reuse)
		return resp, nil
	}
	resp.Body = &body{rc: resp.Body, t: t, c: c, ctx: ctx, stop: stop, reuse: reuse}
	return resp, nil
}

// CloseIdleConnections closes the connections now idle.
func (t *Transport) CloseIdleConnections() {
	t.mu.Lock()
	idle := t.idle
	t.idle = map[endpoint][]*conn{}
	t.mu.Unlock()
	for _, cs := range idle {
		for _, c := range cs {
			c.nc.Close()
		}
	}
}

// conn takes an idle connection to req's endpoint that is alive, or dials
// one.
func (t *Transport) conn(ctx context.Context, req *http.Request) (*conn, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	u := req.URL
	if u == nil {
		return nil, errors.New("synchttp: nil Request.URL")
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return nil, errScheme
	}
	k := endpoint{u.Scheme, u.Host}
	now := t.now()
	for {
		t.mu.Lock()
		cs := t.idle[k]
		var c *conn
		if n := len(cs); n > 0 {
			c = cs[n-1]
			cs[n-1] = nil
			t.idle[k] = cs[:n-1]
		}
		t.mu.Unlock()
		if c == nil {
			break
		}
		if now.Sub(c.idleSince) < t.idleTimeout && c.alive() {
			return c, nil
		}
		c.nc.Close()
	}
	return t.dialConn(ctx, k, u)
}

// endpoint keys the idle pool: a URL's scheme and host (with its port if
// it names one).
type endpoint struct{ scheme, host string }

func (t *Transport) dialConn(ctx context.Context, k endpoint, u *url.URL) (*conn, error) {
	host, port := u.Hostname(), u.Port()
	if port == "" {
		port = "80"
		if k.scheme == "https" {
			port = "443"
		}
	}
	raw, err := t.dial(ctx, "tcp", net.JoinHostPort(host, port))
	if err != nil {
		return nil, err
	}
	c := &conn{key: k, nc: raw}
	if sc, ok := raw.(syscall.Conn); ok {
		if rc, err := sc.SyscallConn(); err == nil {
			c.raw = rc
		}
	}
	if k.scheme == "https" {
		cfg := &tls.Config{}
		if t.tls != nil {
			cfg = t.tls.Clone()
		}
		if cfg.ServerName == "" {
			cfg.ServerName = host
		}
		// HTTP/1.1 only: offering h2 could have the server pick it.
		cfg.NextProtos = []string{"http/1.1"}
		tc := tls.Client(raw, cfg)
		hctx := ctx
		if t.tlsTimeout > 0 {
			var cancel context.CancelFunc
			hctx, cancel = context.WithTimeout(ctx, t.tlsTimeout)
			defer cancel()
		}
		if err := tc.HandshakeContext(hctx); err != nil {
			raw.Close()
			if cerr := ctx.Err(); cerr != nil {
				return nil, cerr
			}
			return nil, err
		}
		c.nc = tc
	}
	c.lim = limitedReader{r: c.nc, left: -1}
	c.br = bufio.NewReaderSize(&c.lim, 4<<10)
	c.bw = bufio.NewWriterSize(c.nc, 4<<10)
	return c, nil
}

// release gives c back to the pool, or closes it. stop is the context's
// AfterFunc's: if it already ran, the connection's deadline is in the past
// and it cannot be reused.
func (t *Transport) release(c *conn, stop func() bool, reuse bool) {
	if stop != nil && !stop() {
		reuse = false
	}
	if !reuse {
		c.nc.Close()
		return
	}
	now := t.now()
	c.idleSince = now
	var expired []*conn
	t.mu.Lock()
	cs := t.idle[c.key]
	i := 0
	for i < len(cs) && now.Sub(cs[i].idleSince) >= t.idleTimeout {
		i++
	}
	if i > 0 {
		expired = append(expired, cs[:i]...)
		cs = append(cs[:0], cs[i:]...)
		clear(cs[len(cs):cap(cs)])
	}
	full := len(cs) >= t.maxIdle
	if !full {
		cs = append(cs, c)
	}
	t.idle[c.key] = cs
	t.mu.Unlock()
	if full {
		c.nc.Close()
	}
	for _, e := range expired {
		e.nc.Close()
	}
}

// conn is one connection: used by one request at a time, or idle.
type conn struct {
	key       endpoint
	nc        net.Conn        // what requests read and write: TCP, or TLS over it
	raw       syscall.RawConn // the TCP connection's, for alive; nil if the dialer's conn has none
	lim       limitedReader   // what br reads: nc, bounded while a header is read
	br        *bufio.Reader
	spill     *bufio.Reader // the last answer's reader when net/http parsed it (readAnswer); nil when br was read
	bw        *bufio.Writer
	idleSince time.Time
}

// exchange writes req and reads its answer's header (after at most max1xx
// informational answers).
func (c *conn) exchange(req *http.Request) (*http.Response, error) {
	if err := writeRequest(c.bw, req); err != nil { // request.go
		return nil, &ConnError{Op: "write", Err: err}
	}
	if err := c.bw.Flush(); err != nil {
		return nil, &ConnError{Op: "write", Err: err}
	}
	c.lim.left = maxHeaderBytes
	for range max1xx + 1 {
		resp, spill, err := readAnswer(c.br, req) // answer.go
		c.spill = spill
		if err != nil {
			return nil, &ConnError{Op: "read", Err: err}
		}
		if resp.StatusCode >= 100 && resp.StatusCode < 200 && resp.StatusCode != http.StatusSwitchingProtocols {
			continue
		}
		c.lim.left = -1
		return resp, nil
	}
	return nil, errTooMany1xx
}

// max1xx bounds the informational answers skipped before the answer, as
// net/http does.
const max1xx = 5

var errTooMany1xx = errors.New("synchttp: too many 1xx informational responses")

// maxHeaderBytes bounds what an answer's header takes from the connection,
// its 1xx answers' included: net/http's default MaxResponseHeaderBytes.
const maxHeaderBytes = 10 << 20

var errHeaderTooLarge = errors.New("synchttp: answer header (1xx answers included) exceeded 10 MB")

// limitedReader reads r; while left >= 0 it reads no more than left bytes
// and fails past them.
type limitedReader struct {
	r    io.Reader
	left int64
}

func (l *limitedReader) Read(p []byte) (int, error) {
	if l.left < 0 {
		return l.r.Read(p)
	}
	if l.left == 0 {
		return 0, errHeaderTooLarge
	}
	if int64(len(p)) > l.left {
		p = p[:l.left]
	}
	n, err := l.r.Read(p)
	l.left -= int64(n)
	return n, err
}

// alive says whether an idle connection can take a request: no bytes
// buffered (in its readers, or in its TLS layer), and the socket neither
// at its end (the server closed it) nor holding unread bytes (an idle
// HTTP/1.1 connection gets none; on TLS, an alert before the close). A read with a past deadline would not tell:
// Go returns its timeout without reading the socket.
func (c *conn) alive() bool {
	if c.br.Buffered() > 0 || c.spill != nil && c.spill.Buffered() > 0 {
		return false
	}
	if tc, ok := c.nc.(*tls.Conn); ok && tlsBuffered(tc) {
		return false
	}
	if c.raw == nil {
		return true
	}
	return peekAlive(c.raw)
}

// tlsBuffered says whether tc holds bytes past the last answer that its
// reader has not taken: decrypted, or whole records read off the socket
// (a TLS read copies at most what the caller asks for and keeps the rest
// of the record). A read with a past deadline returns them, and does not
// touch the socket: its timeout (which tls.Conn does not keep as an
// error) says there are none.
func tlsBuffered(tc *tls.Conn) bool {
	tc.SetReadDeadline(aLongTimeAgo)
	var b [1]byte
	n, err := tc.Read(b[:])
	tc.SetReadDeadline(time.Time{})
	return n > 0 || !errors.Is(err, os.ErrDeadlineExceeded)
}

// body is an answer's body: its end gives the connection back.
type body struct {
	rc    io.ReadCloser
	t     *Transport
	c     *conn // nil once given back or closed
	ctx   context.Context
	stop  func() bool
	reuse bool
	shut  bool  // Close was called
	err   error // what ended it: io.EOF or the read's error
}

var errBodyClosed = errors.New("synchttp: read on closed response body")

func (b *body) Read(p []byte) (int, error) {
	if b.shut {
		return 0, errBodyClosed
	}
	if b.c == nil {
		return 0, b.err
	}
	n, err := b.rc.Read(p)
	switch {
	case err == io.EOF:
		b.err = err
		b.finish(b.reuse)
	case err != nil:
		if cerr := b.ctx.Err(); cerr != nil {
			err = cerr
		}
		b.err = err
		b.finish(false)
	}
	return n, err
}

// Close before the end closes the connection: what is left of the answer
// would have to be read first.
func (b *body) Close() error {
	b.shut = true
	b.finish(false)
	return nil
}

func (b *body) finish(reuse bool) {
	c := b.c
	if c == nil {
		return
	}
	b.c = nil
	b.t.release(c, b.stop, reuse)
}
