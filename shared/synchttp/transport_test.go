package synchttp

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws/retry"
)

// server is a test endpoint, plain or TLS, and a transport to it that
// counts its dials.
type server struct {
	*httptest.Server
	t     *Transport
	dials atomic.Int32
}

func newServer(t *testing.T, tlsOn bool, h http.HandlerFunc) *server {
	t.Helper()
	s := &server{Server: httptest.NewUnstartedServer(h)}
	cfg := Config{MaxIdleConnsPerHost: 16}
	if tlsOn {
		s.StartTLS()
		cfg.TLSClientConfig = s.Client().Transport.(*http.Transport).TLSClientConfig
		cfg.TLSHandshakeTimeout = 10 * time.Second
	} else {
		s.Start()
	}
	t.Cleanup(s.Close)
	d := &net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}
	cfg.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
		s.dials.Add(1)
		return d.DialContext(ctx, network, addr)
	}
	s.t = New(cfg)
	t.Cleanup(s.t.CloseIdleConnections)
	return s
}

// post sends a JSON RPC-like request with body through the transport.
func (s *server) post(ctx context.Context, body string) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.URL+"/", strings.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("X-Amz-Target", "DynamoDB_20120810.GetItem")
	return s.t.RoundTrip(req)
}

// call posts body and reads the whole answer.
func (s *server) call(t *testing.T, body string) string {
	t.Helper()
	resp, err := s.post(context.Background(), body)
	if err != nil {
		t.Fatal(err)
	}
	data, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

func echo(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	w.Header().Set("Content-Type", "application/x-amz-json-1.0")
	w.Write(b)
}

func bothSchemes(t *testing.T, f func(t *testing.T, tlsOn bool)) {
	for _, tlsOn := range []bool{false, true} {
		name := "http"
		if tlsOn {
			name = "https"
		}
		t.Run(name, func(t *testing.T) { f(t, tlsOn) })
	}
}

// Sequential requests whose answers are read to the end share one
// connection.
func TestReusesConnections(t *testing.T) {
	bothSchemes(t, func(t *testing.T, tlsOn bool) {
		s := newServer(t, tlsOn, echo)
		for i := range 20 {
			want := `{"n":` + strconv.Itoa(i) + `}`
			if got := s.call(t, want); got != want {
				t.Fatalf("answer %q, want %q", got, want)
			}
		}
		if n := s.dials.Load(); n != 1 {
			t.Fatalf("%d dials for 20 sequential requests, want 1", n)
		}
	})
}

// An idle connection the server closed is not used: the next request
// dials and succeeds (no error for the retryer to retry).
func TestServerClosedIdleConnection(t *testing.T) {
	bothSchemes(t, func(t *testing.T, tlsOn bool) {
		s := newServer(t, tlsOn, echo)
		s.call(t, "a")
		s.CloseClientConnections()
		if got := s.call(t, "b"); got != "b" {
			t.Fatalf("answer %q", got)
		}
		if n := s.dials.Load(); n != 2 {
			t.Fatalf("%d dials, want 2 (the closed connection dropped, a new one dialed)", n)
		}
	})
}

// An idle connection older than the idle timeout is closed, not reused.
func TestIdleTimeout(t *testing.T) {
	s := newServer(t, false, echo)
	var mu sync.Mutex
	clock := time.Unix(1000, 0)
	s.t.now = func() time.Time { mu.Lock(); defer mu.Unlock(); return clock }
	s.t.idleTimeout = time.Minute
	advance := func(d time.Duration) { mu.Lock(); clock = clock.Add(d); mu.Unlock() }
	s.call(t, "a")
	advance(59 * time.Second)
	s.call(t, "b")
	if n := s.dials.Load(); n != 1 {
		t.Fatalf("%d dials after an idle 59 s, want 1", n)
	}
	advance(time.Minute)
	s.call(t, "c")
	if n := s.dials.Load(); n != 2 {
		t.Fatalf("%d dials after an idle minute, want 2", n)
	}
}

// hijack answers with raw bytes, then closes the connection.
func hijack(raw string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		c, bw, err := w.(http.Hijacker).Hijack()
		if err != nil {
			panic(err)
		}
		bw.WriteString(raw)
		bw.Flush()
		c.Close()
	}
}

// A server that closes the connection before or during the answer's
// header fails the request with an error the SDK's retryer retries as a
// connection error (the request may have been processed: a lost answer),
// wrapped as shared/awsconf wraps it; a truncated body fails its read and
// the connection is not reused.
func TestServerClosesMidAnswer(t *testing.T) {
	retryer := retry.NewStandard()
	for _, c := range []struct{ name, raw string }{
		{"no answer", ""},
		{"part of the status line", "HTTP/1.1 20"},
		{"part of the header", "HTTP/1.1 200 OK\r\nContent-Length: 10\r\nContent-Ty"},
	} {
		bothSchemes(t, func(t *testing.T, tlsOn bool) {
			t.Run(c.name, func(t *testing.T) {
				s := newServer(t, tlsOn, hijack(c.raw))
				_, err := s.post(context.Background(), "{}")
				if err == nil {
					t.Fatal("no error")
				}
				uerr := &url.Error{Op: "Post", URL: s.URL, Err: err}
				if !retryer.IsErrorRetryable(uerr) {
					t.Fatalf("error %v not retryable", uerr)
				}
			})
		})
	}
	bothSchemes(t, func(t *testing.T, tlsOn bool) {
		s := newServer(t, tlsOn, hijack("HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n{\"a\""))
		resp, err := s.post(context.Background(), "{}")
		if err != nil {
			t.Fatal(err)
		}
		_, err = io.ReadAll(resp.Body)
		resp.Body.Close()
		if !errors.Is(err, io.ErrUnexpectedEOF) {
			t.Fatalf("reading a truncated body: %v, want io.ErrUnexpectedEOF", err)
		}
		if idle := s.t.idleCount(); idle != 0 {
			t.Fatalf("%d idle connections after a truncated body, want 0", idle)
		}
	})
}

func (t *Transport) idleCount() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := 0
	for _, cs := range t.idle {
		n += len(cs)
	}
	return n
}

// Which answers leave their connection for the next request.
func TestConnectionReuseByAnswer(t *testing.T) {
	big := strings.Repeat("x", 64<<10)
	cases := []struct {
		name    string
		handler http.HandlerFunc
		read    int // bytes of the body read before Close; -1: to its end
		want    string
		reused  bool
	}{
		{"read to its end", echo, -1, "q", true},
		{"closed before its end", func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, big) }, 10, big[:10], false},
		{"Connection: close", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Connection", "close")
			io.WriteString(w, "q")
		}, -1, "q", false},
		{"chunked", func(w http.ResponseWriter, r *http.Request) {
			io.WriteString(w, "q1")
			w.(http.Flusher).Flush()
			io.WriteString(w, "q2")
		}, -1, "q1q2", true},
		{"no body", func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusNoContent) }, -1, "", true},
		{"1xx before the answer", func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(http.StatusEarlyHints)
			io.WriteString(w, "q")
		}, -1, "q", true},
	}
	for _, c := range cases {
		bothSchemes(t, func(t *testing.T, tlsOn bool) {
			t.Run(c.name, func(t *testing.T) {
				s := newServer(t, tlsOn, c.handler)
				for range 2 {
					resp, err := s.post(context.Background(), "q")
					if err != nil {
						t.Fatal(err)
					}
					var got []byte
					if c.read < 0 {
						got, err = io.ReadAll(resp.Body)
					} else {
						got = make([]byte, c.read)
						_, err = io.ReadFull(resp.Body, got)
					}
					resp.Body.Close()
					if err != nil {
						t.Fatal(err)
					}
					if string(got) != c.want {
						t.Fatalf("body %.20q, want %.20q", got, c.want)
					}
				}
				want := int32(2)
				if c.reused {
					want = 1
				}
				if n := s.dials.Load(); n != want {
					t.Fatalf("%d dials for 2 requests, want %d", n, want)
				}
			})
		})
	}
}

// expiring is a context whose deadline passes when the test says.
type expiring struct {
	context.Context
	done chan struct{}
	once sync.Once
}

func newExpiring() *expiring {
	return &expiring{Context: context.Background(), done: make(chan struct{})}
}

func (e *expiring) Done() <-chan struct{} { return e.done }

func (e *expiring) Err() error {
	select {
	case <-e.done:
		return context.DeadlineExceeded
	default:
		return nil
	}
}

func (e *expiring) expire() { e.once.Do(func() { close(e.done) }) }

// A canceled or expired context aborts a read blocked on the server,
// before the answer's header or within its body, and is the error.
func TestContextAbortsBlockedRead(t *testing.T) {
	type abort struct {
		name string
		ctx  func() (context.Context, func())
		want error
	}
	aborts := []abort{
		{"cancel", func() (context.Context, func()) { return context.WithCancel(context.Background()) }, context.Canceled},
		{"deadline", func() (context.Context, func()) { e := newExpiring(); return e, e.expire }, context.DeadlineExceeded},
	}
	for _, inBody := range []bool{false, true} {
		for _, a := range aborts {
			t.Run(fmt.Sprintf("%s/inBody=%v", a.name, inBody), func(t *testing.T) {
				release := make(chan struct{})
				got := make(chan struct{}, 1)
				s := newServer(t, false, func(w http.ResponseWriter, r *http.Request) {
					io.Copy(io.Discard, r.Body)
					if inBody {
						w.Header().Set("Content-Length", "100")
						io.WriteString(w, "part")
						w.(http.Flusher).Flush()
					}
					got <- struct{}{}
					<-release
				})
				defer close(release) // before the server's Close waits for the handler
				ctx, stop := a.ctx()
				defer stop()
				start := time.Now()
				var err error
				if inBody {
					resp, perr := s.post(ctx, "{}")
					if perr != nil {
						t.Fatal(perr)
					}
					part := make([]byte, 4)
					if _, err := io.ReadFull(resp.Body, part); err != nil {
						t.Fatal(err)
					}
					stop()
					_, err = io.ReadAll(resp.Body)
					resp.Body.Close()
				} else {
					go func() {
						<-got
						stop()
					}()
					_, err = s.post(ctx, "{}")
				}
				if !errors.Is(err, a.want) {
					t.Fatalf("error %v, want %v", err, a.want)
				}
				if d := time.Since(start); d > 5*time.Second {
					t.Fatalf("returned after %v", d)
				}
				if idle := s.t.idleCount(); idle != 0 {
					t.Fatalf("%d idle connections, want the aborted one closed", idle)
				}
			})
		}
	}
	t.Run("a real timeout", func(t *testing.T) {
		release := make(chan struct{})
		s := newServer(t, false, func(w http.ResponseWriter, r *http.Request) { <-release })
		defer close(release)
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		defer cancel()
		if _, err := s.post(ctx, "{}"); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("error %v, want context.DeadlineExceeded", err)
		}
	})
}

// A context already done fails the request before it is sent.
func TestContextDoneBefore(t *testing.T) {
	var hits atomic.Int32
	s := newServer(t, false, func(w http.ResponseWriter, r *http.Request) { hits.Add(1) })
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := s.post(ctx, "{}"); !errors.Is(err, context.Canceled) {
		t.Fatalf("error %v, want context.Canceled", err)
	}
	if hits.Load() != 0 {
		t.Fatal("the request reached the server")
	}
}

// Concurrent requests each get their own answer, and the pool keeps no
// more connections than were in flight.
func TestConcurrentRequests(t *testing.T) {
	bothSchemes(t, func(t *testing.T, tlsOn bool) {
		s := newServer(t, tlsOn, echo)
		const workers, each = 8, 50
		var wg sync.WaitGroup
		errs := make(chan error, workers)
		for w := range workers {
			wg.Go(func() {
				for i := range each {
					want := fmt.Sprintf(`{"w":%d,"i":%d}`, w, i)
					resp, err := s.post(context.Background(), want)
					if err != nil {
						errs <- err
						return
					}
					got, err := io.ReadAll(resp.Body)
					resp.Body.Close()
					if err != nil || string(got) != want {
						errs <- fmt.Errorf("answer %q, %v; want %q", got, err, want)
						return
					}
				}
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
		if n := s.dials.Load(); n > workers {
			t.Fatalf("%d dials for %d workers", n, workers)
		}
	})
}

// Past MaxIdleConnsPerHost a finished connection is closed.
func TestMaxIdlePerHost(t *testing.T) {
	release := make(chan struct{})
	var inFlight sync.WaitGroup
	s := newServer(t, false, func(w http.ResponseWriter, r *http.Request) {
		inFlight.Done()
		<-release
	})
	s.t.maxIdle = 2
	const n = 4
	inFlight.Add(n)
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			resp, err := s.post(context.Background(), "{}")
			if err != nil {
				t.Error(err)
				return
			}
			io.ReadAll(resp.Body)
			resp.Body.Close()
		})
	}
	inFlight.Wait() // all 4 on their own connections
	close(release)
	wg.Wait()
	if idle := s.t.idleCount(); idle != 2 {
		t.Fatalf("%d idle connections, want 2", idle)
	}
}

// The request on the wire is the one net/http writes: what the server
// sees, header and body.
func TestRequestOnTheWire(t *testing.T) {
	lines := make(chan string, 1)
	s := newServer(t, false, func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		lines <- fmt.Sprintf("%s %s %s host=%s len=%d target=%s body=%s", r.Method, r.RequestURI, r.Proto, r.Host, r.ContentLength, r.Header.Get("X-Amz-Target"), b)
	})
	s.call(t, `{"k":1}`)
	u, _ := url.Parse(s.URL)
	want := "POST / HTTP/1.1 host=" + u.Host + ` len=7 target=DynamoDB_20120810.GetItem body={"k":1}`
	if got := <-lines; got != want {
		t.Fatalf("server saw %q, want %q", got, want)
	}
}

// Informational answers past max1xx end the request, as in net/http.
func TestTooManyInformationalAnswers(t *testing.T) {
	s := newServer(t, false, hijack(strings.Repeat("HTTP/1.1 103 Early Hints\r\n\r\n", max1xx+1)+"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n"))
	if _, err := s.post(context.Background(), "{}"); !errors.Is(err, errTooMany1xx) {
		t.Fatalf("error %v, want errTooMany1xx", err)
	}
	s2 := newServer(t, false, hijack(strings.Repeat("HTTP/1.1 103 Early Hints\r\n\r\n", max1xx)+"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"))
	resp, err := s2.post(context.Background(), "{}")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(b) != "ok" {
		t.Fatalf("body %q", b)
	}
}

// A body read after its end or after an error gets what ended it again;
// after Close, an error.
func TestBodyReadsAfterItsEnd(t *testing.T) {
	s := newServer(t, false, hijack("HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nshort"))
	resp, err := s.post(context.Background(), "{}")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.ReadAll(resp.Body); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("first read to the end: %v", err)
	}
	if _, err := resp.Body.Read(make([]byte, 1)); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("read again: %v, want io.ErrUnexpectedEOF again", err)
	}
	resp.Body.Close()
	if _, err := resp.Body.Read(make([]byte, 1)); !errors.Is(err, errBodyClosed) {
		t.Fatalf("read after Close: %v", err)
	}
}
