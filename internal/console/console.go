// Package console is Batchwork's web console: a small local web server
// (loopback only) that serves one page, and proxies the page's requests to
// a Batchwork API through an Upstream that holds the caller's credentials.
//
// The page sees only what the public API shows its owner, and only through
// an allowlist: the GET routes of jobs, tasks, history, logs, bad records,
// schedules and whoami, and POST /jobs/{id}/cancel (of the job, or with
// ?task= of one task). Nothing the page sends
// reaches the API but the route, its allowed query parameters and the
// method; nothing of the credentials reaches the page.
//
// Other local web sites (and DNS rebinding) are kept out by a random
// per-run token in every URL path, a check of the Host header against the
// listening address, a check of Origin and Sec-Fetch-Site, and a custom
// header that every API call must carry (a cross-origin request with it
// needs a CORS preflight, which this server never grants).
package console

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"embed"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"time"
)

// Upstream sends one request to the Batchwork API with the caller's
// credentials and returns the answer's status and JSON body. An API error
// (4xx, 5xx) is an answer, not an error: err is for requests that got no
// answer (network, no credentials).
type Upstream func(ctx context.Context, method, path string, query url.Values) (status int, body []byte, err error)

// Options configure a console.
type Options struct {
	Upstream Upstream
	// API describes the API for the page's header (its endpoint).
	API string
	// TraceURL, when set, links a task's trace id to the operator's trace
	// viewer: an http(s) URL in which {traceId} stands for the id (the
	// CLI takes it from BATCHWORK_TRACE_URL). Unset, the page shows the id
	// as text.
	TraceURL string
}

// TraceURLPlaceholder is what Options.TraceURL's template replaces with a
// task's trace id.
const TraceURLPlaceholder = "{traceId}"

// ErrBadTraceURL: Options.TraceURL is not an http(s) URL with {traceId}.
var ErrBadTraceURL = errors.New("want an http or https URL containing " + TraceURLPlaceholder + ", such as https://tempo.example.com/trace/" + TraceURLPlaceholder)

// checkTraceURL refuses a template the page could not link safely: only
// http(s), so that no javascript: or data: URL reaches an href.
func checkTraceURL(t string) error {
	if t == "" {
		return nil
	}
	u, err := url.Parse(strings.ReplaceAll(t, TraceURLPlaceholder, "0"))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || !strings.Contains(t, TraceURLPlaceholder) {
		return fmt.Errorf("trace URL %q: %w", t, ErrBadTraceURL)
	}
	return nil
}

// ErrNotLoopback: the console listens on a loopback IP address and port
// only, never on a name or another interface.
var ErrNotLoopback = errors.New("want a loopback IP address and port, such as 127.0.0.1:8090 or [::1]:0")

// APIHeader must be on every API call of the page.
const APIHeader = "X-Batchwork-Console"

//go:embed static
var static embed.FS

// Server is a running console.
type Server struct {
	o     Options
	token string
	ln    net.Listener
	hosts map[string]bool
	srv   *http.Server
	done  chan struct{} // closed when the server stopped
}

// Start listens on addr, which must be a loopback IP address and port
// ("127.0.0.1:8090", "[::1]:0"), and serves the console until ctx ends or
// Close is called.
func Start(ctx context.Context, addr string, o Options) (*Server, error) {
	if o.Upstream == nil {
		return nil, errors.New("console: no upstream")
	}
	if err := checkTraceURL(o.TraceURL); err != nil {
		return nil, err
	}
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, fmt.Errorf("listen address %q: %w: %w", addr, ErrNotLoopback, err)
	}
	if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() {
		return nil, fmt.Errorf("listen address %q: %w", addr, ErrNotLoopback)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		ln.Close()
		return nil, err
	}
	s := &Server{o: o, token: hex.EncodeToString(b[:]), ln: ln, done: make(chan struct{})}
	// The names this server answers to: its own address, and localhost.
	port := ln.Addr().(*net.TCPAddr).Port
	s.hosts = map[string]bool{ln.Addr().String(): true, fmt.Sprintf("localhost:%d", port): true}
	s.srv = &http.Server{Handler: s, ReadHeaderTimeout: 10 * time.Second, BaseContext: func(net.Listener) context.Context { return ctx }}
	go func() { _ = s.srv.Serve(ln); close(s.done) }()
	go func() {
		select {
		case <-ctx.Done():
			s.Close()
		case <-s.done:
		}
	}()
	return s, nil
}

// URL is the console's address, with its token: the only way in.
func (s *Server) URL() string {
	return "http://" + s.ln.Addr().String() + "/" + s.token + "/"
}

// Close stops the server.
func (s *Server) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	return s.srv.Shutdown(ctx)
}

// Wait blocks until the server stops.
func (s *Server) Wait() { <-s.done }

var (
	jobID      = `j[0-9a-f]{21}`
	scheduleID = `s[0-9a-f]{21}`
	// routes are the API routes the page may call with GET, and the query
	// parameters each may carry.
	getRoutes = []struct {
		re    *regexp.Regexp
		query []string
	}{
		{regexp.MustCompile(`^/jobs$`), []string{"status", "name", "limit", "cursor"}},
		{regexp.MustCompile(`^/jobs/` + jobID + `$`), nil},
		{regexp.MustCompile(`^/jobs/` + jobID + `/tasks$`), []string{"stage", "state", "limit", "cursor"}},
		{regexp.MustCompile(`^/jobs/` + jobID + `/history$`), []string{"limit", "cursor"}},
		{regexp.MustCompile(`^/jobs/` + jobID + `/logs$`), []string{"task", "since", "limit", "cursor"}},
		{regexp.MustCompile(`^/jobs/` + jobID + `/bad-records$`), []string{"stage", "limit", "cursor"}},
		{regexp.MustCompile(`^/schedules$`), []string{"limit", "cursor"}},
		{regexp.MustCompile(`^/schedules/` + scheduleID + `$`), nil},
		{regexp.MustCompile(`^/schedules/` + scheduleID + `/runs$`), []string{"limit", "cursor"}},
		{regexp.MustCompile(`^/whoami$`), nil},
	}
	cancelRoute = regexp.MustCompile(`^/jobs/` + jobID + `/cancel$`)
)

func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Content-Security-Policy", "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'")
	h.Set("X-Frame-Options", "DENY")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("Cache-Control", "no-store")
	h.Set("Cross-Origin-Resource-Policy", "same-origin")
	// DNS rebinding: a page of another site whose name now points here
	// sends its own name as Host.
	if !s.hosts[r.Host] {
		http.Error(w, "console: wrong Host", http.StatusForbidden)
		return
	}
	if o := r.Header.Get("Origin"); o != "" && o != "http://"+r.Host {
		http.Error(w, "console: cross-origin request refused", http.StatusForbidden)
		return
	}
	if sf := r.Header.Get("Sec-Fetch-Site"); sf != "" && sf != "same-origin" && sf != "none" {
		http.Error(w, "console: cross-site request refused", http.StatusForbidden)
		return
	}
	tok, rest, ok := strings.Cut(strings.TrimPrefix(r.URL.Path, "/"), "/")
	if subtle.ConstantTimeCompare([]byte(tok), []byte(s.token)) != 1 {
		http.Error(w, "console: not found; open the URL that 'batchwork ui' printed", http.StatusNotFound)
		return
	}
	if !ok {
		http.Redirect(w, r, "/"+s.token+"/", http.StatusFound)
		return
	}
	if api, isAPI := strings.CutPrefix(rest, "api/"); isAPI {
		s.proxy(w, r, "/"+api)
		return
	}
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		http.Error(w, "console: method not allowed", http.StatusMethodNotAllowed)
		return
	}
	name, ctype := "", ""
	switch rest {
	case "", "index.html":
		name, ctype = "static/index.html", "text/html; charset=utf-8"
	case "app.js":
		name, ctype = "static/app.js", "text/javascript; charset=utf-8"
	case "style.css":
		name, ctype = "static/style.css", "text/css; charset=utf-8"
	case "failures.js":
		name, ctype = "static/failures.js", "text/javascript; charset=utf-8"
	case "failures.css":
		name, ctype = "static/failures.css", "text/css; charset=utf-8"
	default:
		http.NotFound(w, r)
		return
	}
	b, err := fs.ReadFile(static, name)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	h.Set("Content-Type", ctype)
	_, _ = w.Write(b)
}

// proxy forwards an allowed API call: the method, the route and its
// allowed query parameters, nothing else of the page's request.
func (s *Server) proxy(w http.ResponseWriter, r *http.Request, path string) {
	if r.Header.Get(APIHeader) != "1" {
		writeErr(w, http.StatusForbidden, "forbidden", "console: API calls need the "+APIHeader+" header")
		return
	}
	if path == "/info" && r.Method == http.MethodGet {
		writeJSON(w, http.StatusOK, map[string]string{"api": s.o.API, "traceUrl": s.o.TraceURL})
		return
	}
	var allowed []string
	switch r.Method {
	case http.MethodGet:
		found := false
		for _, rt := range getRoutes {
			if rt.re.MatchString(path) {
				found, allowed = true, rt.query
				break
			}
		}
		if !found {
			writeErr(w, http.StatusNotFound, "not_found", "console: no such route")
			return
		}
	case http.MethodPost:
		// Browsers send Origin with every POST they make; a request
		// without one did not come from this page.
		if !cancelRoute.MatchString(path) || r.Header.Get("Origin") == "" {
			writeErr(w, http.StatusForbidden, "forbidden", "console: the only change the console makes is cancelling a job")
			return
		}
		allowed = []string{"task"} // one task's cancel instead of the job's
	default:
		writeErr(w, http.StatusMethodNotAllowed, "method_not_allowed", "console: method not allowed")
		return
	}
	q := url.Values{}
	for _, k := range allowed {
		if v := r.URL.Query().Get(k); v != "" {
			if len(v) > 1024 {
				writeErr(w, http.StatusBadRequest, "invalid_request", "console: "+k+" is too long")
				return
			}
			q.Set(k, v)
		}
	}
	status, body, err := s.o.Upstream(r.Context(), r.Method, path, q)
	if err != nil {
		if r.Context().Err() != nil {
			return
		}
		writeErr(w, http.StatusBadGateway, "upstream", err.Error())
		return
	}
	if !json.Valid(body) {
		writeErr(w, http.StatusBadGateway, "upstream", fmt.Sprintf("the API answered %d without JSON", status))
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

func writeErr(w http.ResponseWriter, status int, code, msg string) {
	writeJSON(w, status, map[string]string{"code": code, "message": msg, "field": ""})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
