package console

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"testing"
)

// The operator's trace link template reaches the page through /info only
// when it is an http(s) URL with {traceId}: anything else (a javascript:
// or data: URL, no placeholder, no host) is refused at start, so the page
// never puts it in an href.
func TestConsoleTraceURL(t *testing.T) {
	up := func(context.Context, string, string, url.Values) (int, []byte, error) {
		return http.StatusOK, []byte(`{}`), nil
	}
	for _, tc := range []struct {
		tmpl string
		ok   bool
	}{
		{"", true},
		{"https://grafana.example.com/explore?traceId={traceId}", true},
		{"http://127.0.0.1:16686/trace/{traceId}", true},
		{"https://console.aws.amazon.com/cloudwatch/home#xray:traces/1-{traceId}", true},
		{"https://tempo.example.com/trace/", false},
		{"javascript:alert('{traceId}')", false},
		{"data:text/html,{traceId}", false},
		{"/trace/{traceId}", false},
		{"https:///{traceId}", false},
		{"ftp://example.com/{traceId}", false},
	} {
		t.Run(tc.tmpl, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			s, err := Start(ctx, "127.0.0.1:0", Options{Upstream: up, API: "http://api.example", TraceURL: tc.tmpl})
			if !tc.ok {
				if !errors.Is(err, ErrBadTraceURL) {
					t.Fatalf("Start: %v, want ErrBadTraceURL", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			defer func() { cancel(); s.Wait() }()
			code, body := do(t, "GET", s.URL()+"api/info", APIHeader, "1")
			var info map[string]string
			if err := json.Unmarshal([]byte(body), &info); code != 200 || err != nil {
				t.Fatalf("info: %d %s %v", code, body, err)
			}
			if info["traceUrl"] != tc.tmpl || info["api"] != "http://api.example" {
				t.Errorf("info = %v, want traceUrl %q", info, tc.tmpl)
			}
		})
	}
}
