package console

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
)

type call struct {
	method, path string
	query        url.Values
}

// start runs a console over a fake API that records the calls it gets.
func start(t *testing.T, fail error) (*Server, func() []call) {
	t.Helper()
	var mu sync.Mutex
	var calls []call
	up := func(_ context.Context, method, path string, q url.Values) (int, []byte, error) {
		mu.Lock()
		defer mu.Unlock()
		calls = append(calls, call{method, path, q})
		if fail != nil {
			return 0, nil, fail
		}
		if strings.HasSuffix(path, "/cancel") {
			return http.StatusConflict, []byte(`{"code":"job_ended","message":"job ended","field":""}`), nil
		}
		return http.StatusOK, []byte(`{"jobs":[]}`), nil
	}
	ctx, cancel := context.WithCancel(context.Background())
	s, err := Start(ctx, "127.0.0.1:0", Options{Upstream: up, API: "http://api.example"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cancel(); s.Wait() })
	return s, func() []call {
		mu.Lock()
		defer mu.Unlock()
		out := calls
		calls = nil
		return out
	}
}

func do(t *testing.T, method, u string, header ...string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, u, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(header); i += 2 {
		if header[i] == "Host" {
			req.Host = header[i+1]
		} else {
			req.Header.Set(header[i], header[i+1])
		}
	}
	c := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.Header.Get("Content-Security-Policy") == "" || resp.Header.Get("X-Frame-Options") != "DENY" {
		t.Errorf("%s %s: no CSP or frame guard: %v", method, u, resp.Header)
	}
	return resp.StatusCode, string(b)
}

// The page and its assets are served under the run's token only; the API
// calls the page may make are forwarded with their allowed parameters
// only, and everything else is refused before the API sees it.
func TestConsoleRoutesAndGuards(t *testing.T) {
	s, calls := start(t, nil)
	u := s.URL()
	root := strings.TrimSuffix(u, s.token+"/")
	host := strings.TrimSuffix(strings.TrimPrefix(root, "http://"), "/")
	con := []string{APIHeader, "1"}
	same := append([]string{"Origin", "http://" + host}, con...)

	for _, asset := range []string{"", "app.js", "style.css"} {
		if code, body := do(t, "GET", u+asset); code != 200 || body == "" {
			t.Errorf("GET %s: %d", asset, code)
		}
	}
	if code, _ := do(t, "GET", strings.TrimSuffix(u, "/")); code != http.StatusFound {
		t.Errorf("the token without a slash: %d, want a redirect", code)
	}
	if code, body := do(t, "GET", u+"api/info", con...); code != 200 || !strings.Contains(body, "http://api.example") {
		t.Errorf("info: %d %s", code, body)
	}

	id := "j" + strings.Repeat("a", 21)
	if code, _ := do(t, "GET", u+"api/jobs?status=RUNNING&presign=true&cursor=c", con...); code != 200 {
		t.Errorf("list jobs: %d", code)
	}
	if code, body := do(t, "POST", u+"api/jobs/"+id+"/cancel", same...); code != http.StatusConflict || !strings.Contains(body, "job_ended") {
		t.Errorf("cancel: %d %s, want the API's 409", code, body)
	}
	got := calls()
	if len(got) != 2 || got[0].method != "GET" || got[0].path != "/jobs" || got[0].query.Encode() != "cursor=c&status=RUNNING" ||
		got[1].method != "POST" || got[1].path != "/jobs/"+id+"/cancel" {
		t.Fatalf("calls to the API: %+v", got)
	}
	// One task's cancel carries its task, and nothing else of the query.
	do(t, "POST", u+"api/jobs/"+id+"/cancel?task=map%2F3&owner=mallory", same...)
	if got := calls(); len(got) != 1 || got[0].path != "/jobs/"+id+"/cancel" || got[0].query.Encode() != "task=map%2F3" {
		t.Fatalf("a task's cancel reached the API as %+v", got)
	}

	for _, c := range []struct {
		what, method, url string
		header            []string
		want              int
	}{
		{"no token", "GET", root, nil, 404},
		{"a wrong token", "GET", root + strings.Repeat("0", 32) + "/api/jobs", con, 404},
		{"an unknown asset", "GET", u + "secret", nil, 404},
		{"another Host", "GET", u + "api/jobs", append([]string{"Host", "evil.example"}, con...), 403},
		{"another Origin", "GET", u + "api/jobs", append([]string{"Origin", "http://evil.example"}, con...), 403},
		{"a cross-site request", "GET", u + "api/jobs", append([]string{"Sec-Fetch-Site", "cross-site"}, con...), 403},
		{"without the console's header", "GET", u + "api/jobs", nil, 403},
		{"outputs (presigned URLs)", "GET", u + "api/jobs/" + id + "/manifest", con, 404},
		{"a bad job id", "GET", u + "api/jobs/" + id + "x", con, 404},
		{"a dot segment", "GET", u + "api/jobs/%2e%2e/whoami", con, 404},
		{"a submission", "POST", u + "api/jobs", same, 403},
		{"a schedule change", "POST", u + "api/schedules/s" + strings.Repeat("a", 21) + "/pause", same, 403},
		{"a cancel without Origin", "POST", u + "api/jobs/" + id + "/cancel", con, 403},
		{"a deletion", "DELETE", u + "api/jobs/" + id + "/data", same, 405},
		{"a POST of the page", "POST", u, same, 405},
	} {
		if code, body := do(t, c.method, c.url, c.header...); code != c.want {
			t.Errorf("%s: %s %s: %d, want %d: %s", c.what, c.method, c.url, code, c.want, body)
		}
	}
	if got := calls(); len(got) != 0 {
		t.Fatalf("refused requests reached the API: %+v", got)
	}
}

// An API that cannot be reached is a 502 with the reason, as JSON.
func TestConsoleUpstreamError(t *testing.T) {
	s, _ := start(t, errors.New("cannot reach the API"))
	code, body := do(t, "GET", s.URL()+"api/whoami", APIHeader, "1")
	if code != http.StatusBadGateway || !strings.Contains(body, "cannot reach the API") {
		t.Fatalf("%d %s", code, body)
	}
}

// The console listens on loopback IP addresses only.
func TestConsoleLoopbackOnly(t *testing.T) {
	up := func(context.Context, string, string, url.Values) (int, []byte, error) { return 200, []byte("{}"), nil }
	for _, addr := range []string{"0.0.0.0:0", ":0", "localhost:0", "192.0.2.1:0", "nonsense"} {
		if _, err := Start(context.Background(), addr, Options{Upstream: up}); !errors.Is(err, ErrNotLoopback) {
			t.Errorf("Start(%q): %v, want ErrNotLoopback", addr, err)
		}
	}
}
