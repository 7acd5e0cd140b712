package synchttp

import (
	"bufio"
	"context"
	"crypto/tls"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// rawTLSListener is a TLS listener with httptest's certificate, whose
// records are as large as TLS allows (no dynamic record sizing: a write
// of up to 16 KB is one record), and a transport that trusts it.
func rawTLSListener(t *testing.T) (net.Listener, *Transport) {
	t.Helper()
	hs := httptest.NewTLSServer(http.NotFoundHandler())
	srvCfg := hs.TLS.Clone()
	cliCfg := hs.Client().Transport.(*http.Transport).TLSClientConfig.Clone()
	hs.Close()
	srvCfg.DynamicRecordSizingDisabled = true
	srvCfg.NextProtos = []string{"http/1.1"}
	ln, err := tls.Listen("tcp", "127.0.0.1:0", srvCfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	tr := New(Config{TLSClientConfig: cliCfg, MaxIdleConnsPerHost: 4})
	t.Cleanup(tr.CloseIdleConnections)
	return ln, tr
}

// A server (or a middlebox before it) that sends bytes past an answer's
// Content-Length leaves the connection unusable: net/http's transport sees
// them (its read loop peeks at the idle connection, "Unsolicited response
// received on idle HTTP channel") and closes it; this transport checks its
// own buffer and the socket, and over TLS the bytes can sit decrypted in
// the tls.Conn, in neither. The next request on the connection then reads
// them as its answer: an answer read from the wrong request.
func TestReviewTLSBufferedBytesAfterAnswer(t *testing.T) {
	ln, tr := rawTLSListener(t)
	var first atomic.Bool
	first.Store(true)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				br := bufio.NewReader(c)
				for {
					req, err := http.ReadRequest(br)
					if err != nil {
						return
					}
					io.Copy(io.Discard, req.Body)
					if first.Swap(false) {
						// One write, one TLS record: a 12000-byte
						// answer and 40 stray bytes after it.
						body := strings.Repeat("x", 12000)
						c.Write([]byte("HTTP/1.1 200 OK\r\nContent-Length: 12000\r\n\r\n" + body +
							"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nstale"))
						continue
					}
					c.Write([]byte("HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nfresh"))
				}
			}()
		}
	}()
	url := "https://" + ln.Addr().String() + "/"
	send := func() string {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader("{}"))
		req.Header.Set("X-Amz-Target", "DynamoDB_20120810.GetItem")
		resp, err := tr.RoundTrip(req)
		if err != nil {
			return "error: " + err.Error()
		}
		defer resp.Body.Close()
		// As the SDK's closeResponseBody and any reader with a
		// buffer of 8 KB or more read it.
		var sb strings.Builder
		if _, err := io.Copy(&sb, io.LimitReader(resp.Body, 1<<20)); err != nil {
			return "error: " + err.Error()
		}
		return sb.String()
	}
	if got := send(); len(got) != 12000 {
		t.Fatalf("first answer: %d bytes %.60q", len(got), got)
	}
	if got := send(); got != "fresh" {
		t.Fatalf("second request's answer %q, want %q (the server's answer to it)", got, "fresh")
	}
}

// A peer that answers with an endless stream of 1xx informational answers
// keeps the request blocked until its context ends (forever without a
// deadline): exchange skips 1xx answers without a bound. net/http's
// transport fails the request once the 1xx headers pass
// MaxResponseHeaderBytes (earlier Go: after five 1xx answers).
func TestReviewEndless1xxAnswers(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		br := bufio.NewReader(c)
		if _, err := http.ReadRequest(br); err != nil {
			return
		}
		for {
			if _, err := c.Write([]byte("HTTP/1.1 100 Continue\r\n\r\n")); err != nil {
				return
			}
		}
	}()
	tr := New(Config{})
	defer tr.CloseIdleConnections()
	// net/http gives up after 10 MB of 1xx answers: well within this
	// deadline, even under the race detector.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+ln.Addr().String()+"/", strings.NewReader("{}"))
	req.Header.Set("X-Amz-Target", "DynamoDB_20120810.GetItem")
	start := time.Now()
	resp, err := tr.RoundTrip(req)
	if err == nil {
		resp.Body.Close()
		t.Fatal("an answer")
	}
	if ctx.Err() != nil {
		t.Fatalf("the request ended only with its context, after %v: %v", time.Since(start).Round(time.Millisecond), err)
	}
}
