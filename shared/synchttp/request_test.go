package synchttp

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptrace"
	"strings"
	"testing"
	"testing/iotest"
)

// writeRequest writes every request as req.Write does, byte for byte, with
// the same error, the body closed, and writes the common ones itself.
func TestWriteRequestIsRequestWrite(t *testing.T) {
	signed := func(r *http.Request) {
		r.Header["Content-Type"] = []string{"application/x-amz-json-1.0"}
		r.Header["User-Agent"] = []string{"batchwork-ddbwire"}
		r.Header["X-Amz-Target"] = []string{"DynamoDB_20120810.UpdateItem"}
		r.Header["Amz-Sdk-Request"] = []string{"attempt=1; max=3"}
		r.Header["Amz-Sdk-Invocation-Id"] = []string{"8f2c5a1e-0b7d-4c3f-9e6a-2d1b0c9f8e7a"}
		r.Header["X-Amz-Date"] = []string{"20261130T040000Z"}
		r.Header["X-Amz-Security-Token"] = []string{"TOKEN"}
		r.Header["Authorization"] = []string{"AWS4-HMAC-SHA256 Credential=AKID/20261130/us-east-1/dynamodb/aws4_request, SignedHeaders=content-type;host;x-amz-date;x-amz-target, Signature=0123456789abcdef"}
	}
	long := strings.Repeat("b", 9000) // past the writer's 4 KB buffer
	cases := []struct {
		name string
		url  string // http://127.0.0.1:8000/ unless set
		body string // {"k":1} unless set; "-" for none
		edit func(*http.Request)
		fast bool // written without net/http
	}{
		{"an AWS JSON request", "", "", signed, true},
		{"a long body", "", long, signed, true},
		{"a path and query", "http://localhost:4566/a/b%20c?x=1&y", "", signed, true},
		{"a base endpoint's path", "http://h.example.com/base/", "", signed, true},
		{"an IPv6 literal", "http://[::1]:8000/", "", signed, true},
		{"repeated values", "", "", func(r *http.Request) { signed(r); r.Header["X-Multi"] = []string{"b", "a", ""} }, true},
		{"keys out of order", "", "", func(r *http.Request) {
			signed(r)
			r.Header["a-lower"] = []string{"1"}
			r.Header["Zz"] = []string{"2"}
			r.Header["X-Amz-Target"] = []string{"t"}
		}, true},
		{"excluded fields in the header", "", "", func(r *http.Request) {
			signed(r)
			r.Header["Host"] = []string{"other"}
			r.Header["Content-Length"] = []string{"99"}
			r.Header["Transfer-Encoding"] = []string{"chunked"}
			r.Header["Trailer"] = []string{"X"}
		}, true},
		{"Host set", "", "", func(r *http.Request) { signed(r); r.Host = "dynamodb.us-east-1.amazonaws.com" }, true},
		{"Connection field without Close", "", "", func(r *http.Request) { signed(r); r.Header["Connection"] = []string{"close"} }, true},
		{"PUT", "", "", func(r *http.Request) { signed(r); r.Method = http.MethodPut }, true},
		{"no User-Agent", "", "", func(r *http.Request) { signed(r); delete(r.Header, "User-Agent") }, false},
		{"empty User-Agent", "", "", func(r *http.Request) { signed(r); r.Header["User-Agent"] = []string{""} }, false},
		{"two User-Agents", "", "", func(r *http.Request) { signed(r); r.Header["User-Agent"] = []string{"a", "b"} }, true},
		{"a value's line break", "", "", func(r *http.Request) { signed(r); r.Header["X-A"] = []string{"a\r\nX-Evil: 1"} }, false},
		{"a User-Agent's line break", "", "", func(r *http.Request) { signed(r); r.Header["User-Agent"] = []string{"a\nb"} }, false},
		{"a value's spaces", "", "", func(r *http.Request) { signed(r); r.Header["X-A"] = []string{" a\t"} }, false},
		{"a bad key", "", "", func(r *http.Request) { signed(r); r.Header["X A"] = []string{"v"} }, false},
		{"an empty key", "", "", func(r *http.Request) { signed(r); r.Header[""] = []string{"v"} }, false},
		{"Close", "", "", func(r *http.Request) { signed(r); r.Close = true }, false},
		{"chunked", "", "", func(r *http.Request) { signed(r); r.TransferEncoding = []string{"chunked"}; r.ContentLength = -1 }, false},
		{"unknown length", "", "", func(r *http.Request) { signed(r); r.ContentLength = 0 }, false},
		{"no body", "", "-", signed, false},
		{"NoBody", "", "-", func(r *http.Request) { signed(r); r.Body = http.NoBody }, false},
		{"a body shorter than its length", "", "", func(r *http.Request) { signed(r); r.ContentLength = 20 }, true},
		{"a body longer than its length", "", "", func(r *http.Request) { signed(r); r.ContentLength = 3 }, true},
		{"a body that fails", "", "", func(r *http.Request) {
			signed(r)
			r.Body = io.NopCloser(io.MultiReader(strings.NewReader("{\"k"), iotest.ErrReader(errors.New("disk gone"))))
		}, true},
		{"a body that is not in memory", "", "", func(r *http.Request) {
			signed(r)
			r.Body = io.NopCloser(iotest.OneByteReader(strings.NewReader(`{"k":1}`)))
		}, true},
		{"an opaque URL", "", "", func(r *http.Request) { signed(r); r.URL.Opaque = "//h/x" }, false},
		{"a control byte in the path", "", "", func(r *http.Request) { signed(r); r.URL.Path = "/a\x01" }, true}, // escaped
		{"a control byte in the query", "", "", func(r *http.Request) { signed(r); r.URL.RawQuery = "a\x01" }, false},
		{"a non-ASCII host", "http://bücher.example/", "", signed, false},
		{"a zone", "http://[fe80::1%25en0]:8000/", "", signed, false},
		{"a bad host", "", "", func(r *http.Request) { signed(r); r.Host = "a b" }, false},
		{"a bad method", "", "", func(r *http.Request) { signed(r); r.Method = "PO ST" }, false},
		{"a client trace", "", "", func(r *http.Request) {
			signed(r)
			*r = *r.WithContext(httptrace.WithClientTrace(context.Background(), &httptrace.ClientTrace{}))
		}, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			make := func() (*http.Request, *closeCount) {
				u := c.url
				if u == "" {
					u = "http://127.0.0.1:8000/"
				}
				body := c.body
				if body == "" {
					body = `{"k":1}`
				}
				var rd io.Reader
				if body != "-" {
					rd = strings.NewReader(body)
				}
				r, err := http.NewRequest(http.MethodPost, u, rd)
				if err != nil {
					t.Fatal(err)
				}
				if c.edit != nil {
					c.edit(r)
				}
				cc := &closeCount{}
				if r.Body != nil && r.Body != http.NoBody {
					cc.ReadCloser = r.Body
					r.Body = cc
				}
				return r, cc
			}
			want, wantCC := make()
			var wb bytes.Buffer
			wbw := bufio.NewWriterSize(&wb, 4<<10)
			werr := want.Write(wbw)
			wbw.Flush()

			got, gotCC := make()
			if _, _, fast := plainRequest(got, nil); fast != c.fast {
				t.Errorf("written by writeRequest: %v, want %v", fast, c.fast)
			}
			var gb bytes.Buffer
			gbw := bufio.NewWriterSize(&gb, 4<<10)
			gerr := writeRequest(gbw, got)
			gbw.Flush()

			if (gerr == nil) != (werr == nil) || gerr != nil && gerr.Error() != werr.Error() {
				t.Errorf("error %v, want %v", gerr, werr)
			}
			if werr == nil && gb.String() != wb.String() {
				t.Errorf("wrote\n%q\nwant\n%q", gb.String(), wb.String())
			}
			if gotCC.n != wantCC.n {
				t.Errorf("body closed %d times, want %d", gotCC.n, wantCC.n)
			}
		})
	}
}

type closeCount struct {
	io.ReadCloser
	n int
}

func (c *closeCount) Close() error {
	c.n++
	return c.ReadCloser.Close()
}

// BenchmarkWriteRequest: an UpdateItem's request as the lean client sends
// it, written by writeRequest and by Request.Write.
func BenchmarkWriteRequest(b *testing.B) {
	body := []byte(strings.Repeat(`{"k":"v"}`, 80))
	r, err := http.NewRequest(http.MethodPost, "http://127.0.0.1:8000/", nil)
	if err != nil {
		b.Fatal(err)
	}
	r.Header["Content-Type"] = []string{"application/x-amz-json-1.0"}
	r.Header["User-Agent"] = []string{"batchwork-ddbwire"}
	r.Header["X-Amz-Target"] = []string{"DynamoDB_20120810.UpdateItem"}
	r.Header["Amz-Sdk-Request"] = []string{"attempt=1; max=3"}
	r.Header["X-Amz-Date"] = []string{"20261130T040000Z"}
	r.Header["X-Amz-Security-Token"] = []string{"TOKEN"}
	r.Header["Authorization"] = []string{"AWS4-HMAC-SHA256 Credential=AKID/20261130/us-east-1/dynamodb/aws4_request, SignedHeaders=content-type;host;x-amz-date;x-amz-target, Signature=0123456789abcdef"}
	r.ContentLength = int64(len(body))
	for _, w := range []struct {
		name  string
		write func(*bufio.Writer, *http.Request) error
	}{
		{"synchttp", writeRequest},
		{"net-http", func(bw *bufio.Writer, r *http.Request) error { return r.Write(bw) }},
	} {
		b.Run(w.name, func(b *testing.B) {
			bw := bufio.NewWriterSize(io.Discard, 4<<10)
			rd := bytes.NewReader(body)
			r.Body = io.NopCloser(rd)
			b.ReportAllocs()
			for b.Loop() {
				rd.Reset(body)
				if err := w.write(bw, r); err != nil {
					b.Fatal(err)
				}
				bw.Flush()
			}
		})
	}
}
