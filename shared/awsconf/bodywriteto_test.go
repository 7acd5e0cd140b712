package awsconf

import (
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
)

// writerToBody is a request body like smithy-go's: it has WriteTo.
type writerToBody struct{ *strings.Reader }

func (writerToBody) Close() error { return nil }

// bodyTypeRecorder is a transport that records whether each request's
// body has WriteTo and answers 200.
type bodyTypeRecorder struct{ writeTo []bool }

func (r *bodyTypeRecorder) RoundTrip(req *http.Request) (*http.Response, error) {
	_, ok := req.Body.(io.WriterTo)
	r.writeTo = append(r.writeTo, ok)
	b, err := io.ReadAll(req.Body)
	if err != nil || string(b) != "payload" {
		return nil, io.ErrUnexpectedEOF
	}
	return &http.Response{StatusCode: 200, Body: http.NoBody, Request: req}, nil
}

// Requests the client hands to net/http carry a body without WriteTo:
// smithy-go closes a request's body when the answer's header arrives, and
// its closed body's WriteTo returns io.EOF, which net/http's write loop,
// still checking the body for bytes past Content-Length, takes for a
// failed write: it closes the connection under the answer and the SDK
// retries a request the service applied (aws-sdk-go-v2 #2737).
func TestNetHTTPRequestBodiesHaveNoWriteTo(t *testing.T) {
	for _, tc := range []struct {
		name   string
		target string
		proxy  bool
	}{
		{name: "REST request (S3)"},
		{name: "JSON RPC request through a proxy", target: "DynamoDB_20120810.PutItem", proxy: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := &bodyTypeRecorder{}
			c := httpClient{full: &http.Client{Transport: rec}, rpc: rec}
			if tc.proxy {
				c.rpc = &bodyTypeRecorder{} // must not be used
				c.proxy = http.ProxyURL(mustURL(t, "http://proxy.invalid:3128"))
			}
			req, err := http.NewRequest(http.MethodPost, "http://127.0.0.1:1/", writerToBody{strings.NewReader("payload")})
			if err != nil {
				t.Fatal(err)
			}
			req.ContentLength = int64(len("payload"))
			if tc.target != "" {
				req.Header.Set("X-Amz-Target", tc.target)
			}
			resp, err := c.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if len(rec.writeTo) != 1 {
				t.Fatalf("%d requests reached net/http, want 1", len(rec.writeTo))
			}
			if rec.writeTo[0] {
				t.Fatal("net/http was handed a body with WriteTo")
			}
		})
	}
}

func mustURL(t *testing.T, s string) *url.URL {
	t.Helper()
	u, err := url.Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	return u
}
