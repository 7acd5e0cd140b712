package synchttp

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"testing/iotest"
)

// readAnswer gives what http.ReadResponse gives for every answer (its
// fields, its header, its body and its errors, and the bytes it leaves
// for the next answer), and parses the common ones itself.
func TestReadAnswerIsReadResponse(t *testing.T) {
	long := strings.Repeat("v", 6000) // past the reader's 4 KB buffer
	longKey := "X-" + strings.Repeat("k", 70)
	cases := []struct {
		name   string
		method string // POST unless set
		raw    string
		fast   bool // parsed without net/http
	}{
		{"DynamoDB Local", "", "HTTP/1.1 200 OK\r\nDate: Mon, 30 Nov 2026 01:00:00 GMT\r\nContent-Type: application/x-amz-json-1.0\r\nx-amz-crc32: 2745614147\r\nx-amzn-RequestId: 4a6b7c8d\r\nContent-Length: 2\r\nServer: Jetty(12.0.14)\r\n\r\n{}", true},
		{"moto", "", "HTTP/1.1 200 OK\r\nServer: Werkzeug/3.0.1 Python/3.12.3\r\nDate: Mon, 30 Nov 2026 01:00:00 GMT\r\nContent-Type: application/x-amz-json-1.0\r\nContent-Length: 13\r\nx-amzn-RequestId: abc\r\nx-amz-crc32: 1\r\naccess-control-allow-origin: *\r\naccess-control-allow-methods: HEAD, GET\r\n\r\n{\"Messages\":1}", true},
		{"an error's answer", "", "HTTP/1.1 400 Bad Request\r\nx-amzn-ErrorType: ConditionalCheckFailedException:\r\nContent-Length: 9\r\n\r\n{\"a\":\"b\"}", true},
		{"empty body", "", "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n", true},
		{"no reason phrase", "", "HTTP/1.1 503\r\nContent-Length: 1\r\n\r\nx", true},
		{"bare line feeds", "", "HTTP/1.1 200 OK\nContent-Length: 1\nX-A: b\n\nx", true},
		{"repeated field", "", "HTTP/1.1 200 OK\r\nVary: a\r\nContent-Length: 1\r\nvary: b\r\nVARY: c\r\n\r\nx", true},
		{"spaces and tabs around a value", "", "HTTP/1.1 200 OK\r\nX-A: \t a b \t\r\nX-B:c\r\nX-Empty:\r\nX-Spaces:   \r\nContent-Length: 1\r\n\r\nx", true},
		{"keys in any case", "", "HTTP/1.1 200 OK\r\ncontent-length: 1\r\nx-amzn-requestid: r\r\nX-CUSTOM-KEY: v\r\nx_under.score: u\r\n\r\nx", true},
		{"obs-text and punctuation in a value", "", "HTTP/1.1 200 OK\r\nX-A: caf\xc3\xa9 \"q\" ;,=\r\nContent-Length: 1\r\n\r\nx", true},
		{"a long value", "", "HTTP/1.1 200 OK\r\nX-Long: " + long + "\r\nContent-Length: 1\r\n\r\nx", true},
		{"bytes after the body", "", "HTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\nxGARBAGE", true},
		{"many fields", "", "HTTP/1.1 200 OK\r\n" + strings.Repeat("a:\r\n", maxFastFields) + "Content-Length: 1\r\n\r\nx", false},
		{"a long key", "", "HTTP/1.1 200 OK\r\n" + longKey + ": v\r\nContent-Length: 1\r\n\r\nx", false},
		{"folded line", "", "HTTP/1.1 200 OK\r\nX-A: one\r\n  two\r\n\ttwo more\r\nContent-Length: 1\r\n\r\nx", false},
		{"first field folded", "", "HTTP/1.1 200 OK\r\n X-A: one\r\nContent-Length: 1\r\n\r\nx", false},
		{"space before the colon", "", "HTTP/1.1 200 OK\r\nX-A : one\r\nContent-Length: 1\r\n\r\nx", false},
		{"no colon", "", "HTTP/1.1 200 OK\r\nX-A one\r\nContent-Length: 1\r\n\r\nx", false},
		{"empty key", "", "HTTP/1.1 200 OK\r\n: one\r\nContent-Length: 1\r\n\r\nx", false},
		{"a key's bad byte", "", "HTTP/1.1 200 OK\r\nX@A: one\r\nContent-Length: 1\r\n\r\nx", false},
		{"a value's control byte", "", "HTTP/1.1 200 OK\r\nX-A: o\x01ne\r\nContent-Length: 1\r\n\r\nx", false},
		{"a value's carriage return", "", "HTTP/1.1 200 OK\r\nX-A: o\rne\r\nContent-Length: 1\r\n\r\nx", false},
		{"chunked with a trailer", "", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nTrailer: X-T\r\n\r\n2\r\nab\r\n1\r\nc\r\n0\r\nX-T: t\r\n\r\nNEXT", false},
		{"chunked and a length", "", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nContent-Length: 100\r\n\r\n1\r\na\r\n0\r\n\r\n", false},
		{"other transfer coding", "", "HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\nx", false},
		{"two equal lengths", "", "HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 1\r\n\r\nx", false},
		{"two lengths", "", "HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nxy", false},
		{"bad length", "", "HTTP/1.1 200 OK\r\nContent-Length: 1x\r\n\r\nx", false},
		{"negative length", "", "HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\nx", false},
		{"signed length", "", "HTTP/1.1 200 OK\r\nContent-Length: +1\r\n\r\nx", false},
		{"empty length", "", "HTTP/1.1 200 OK\r\nContent-Length:\r\n\r\nx", false},
		{"huge length", "", "HTTP/1.1 200 OK\r\nContent-Length: 99999999999999999999\r\n\r\nx", false},
		{"Connection: close", "", "HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 1\r\n\r\nx", false},
		{"Connection: keep-alive", "", "HTTP/1.1 200 OK\r\nconnection: keep-alive\r\nContent-Length: 1\r\n\r\nx", false},
		{"no length: to the end", "", "HTTP/1.1 200 OK\r\nX-A: b\r\n\r\nall of it", false},
		{"no field", "", "HTTP/1.1 200 OK\r\n\r\nall of it", false},
		{"204", "", "HTTP/1.1 204 No Content\r\nContent-Length: 0\r\n\r\nNEXT", false},
		{"304", "", "HTTP/1.1 304 Not Modified\r\nContent-Length: 5\r\n\r\nNEXT", false},
		{"1xx", "", "HTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\nx", false},
		{"HEAD", http.MethodHead, "HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nNEXT", false},
		{"HTTP/1.0", "", "HTTP/1.0 200 OK\r\nContent-Length: 1\r\n\r\nx", false},
		{"HTTP/1.0 keep-alive", "", "HTTP/1.0 200 OK\r\nConnection: keep-alive\r\nContent-Length: 1\r\n\r\nx", false},
		{"four-digit status", "", "HTTP/1.1 2000 OK\r\nContent-Length: 1\r\n\r\nx", false},
		{"status not a number", "", "HTTP/1.1 2x0 OK\r\nContent-Length: 1\r\n\r\nx", false},
		{"spaces before the status", "", "HTTP/1.1   200 OK\r\nContent-Length: 1\r\n\r\nx", false},
		{"no status", "", "HTTP/1.1\r\nContent-Length: 1\r\n\r\nx", false},
		{"other protocol", "", "HTTP/2.0 200 OK\r\nContent-Length: 1\r\n\r\nx", false},
		{"garbage", "", "hello\r\n\r\n", false},
		{"nothing", "", "", false},
		{"part of the status line", "", "HTTP/1.1 20", false},
		{"part of the header", "", "HTTP/1.1 200 OK\r\nContent-Length: 10\r\nContent-Ty", false},
		{"no empty line", "", "HTTP/1.1 200 OK\r\nContent-Length: 10\r\n", false},
		{"truncated body", "", "HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n{\"a\"", true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			method := c.method
			if method == "" {
				method = http.MethodPost
			}
			req, _ := http.NewRequest(method, "http://example.com/", nil)
			// The whole answer in the first read, and a byte a read (the
			// header read line by line, not found in the buffer).
			for _, oneByte := range []bool{false, true} {
				src := func() io.Reader {
					if oneByte {
						return iotest.OneByteReader(strings.NewReader(c.raw))
					}
					return strings.NewReader(c.raw)
				}
				want := readWith(func(br *bufio.Reader) (*http.Response, *bufio.Reader, error) {
					resp, err := http.ReadResponse(br, req)
					return resp, nil, err
				}, src())
				got := readWith(func(br *bufio.Reader) (*http.Response, *bufio.Reader, error) {
					return readAnswer(br, req)
				}, src())
				if got.String() != want.String() {
					t.Fatalf("a byte a read %v: readAnswer:\n%s\nhttp.ReadResponse:\n%s", oneByte, got, want)
				}
				if got.fast != c.fast {
					t.Fatalf("a byte a read %v: parsed without net/http: %v, want %v", oneByte, got.fast, c.fast)
				}
			}
		})
	}
}

// answerRead is what reading one answer (and a second, after a 1xx) gave.
type answerRead struct {
	answers []string
	rest    string // the bytes left for what follows
	fast    bool
}

func (a answerRead) String() string {
	return strings.Join(a.answers, "\n") + fmt.Sprintf("\nleft: %q", a.rest)
}

func readWith(read func(*bufio.Reader) (*http.Response, *bufio.Reader, error), src io.Reader) answerRead {
	br := bufio.NewReaderSize(src, 4<<10)
	var a answerRead
	a.fast = true
	var spill *bufio.Reader
	for range 2 {
		resp, s, err := read(br)
		if s != nil {
			a.fast = false
			spill = s
		}
		if err != nil {
			a.answers = append(a.answers, "error: "+err.Error())
			a.fast = false
			break
		}
		body, berr := io.ReadAll(resp.Body)
		a.answers = append(a.answers, fmt.Sprintf("%q %d %q %d.%d len %d close %v te %q trailer %v body %q (%v) nobody %v\n  header %v",
			resp.Status, resp.StatusCode, resp.Proto, resp.ProtoMajor, resp.ProtoMinor, resp.ContentLength,
			resp.Close, resp.TransferEncoding, resp.Trailer, body, berr, resp.Body == http.NoBody, sortedHeader(resp.Header)))
		if resp.StatusCode >= 200 {
			break
		}
	}
	var rest bytes.Buffer
	if spill != nil {
		b, _ := spill.Peek(spill.Buffered())
		rest.Write(b)
	}
	io.Copy(&rest, br)
	a.rest = rest.String()
	return a
}

func sortedHeader(h http.Header) string {
	var b strings.Builder
	for _, k := range sortedKeys(h) {
		fmt.Fprintf(&b, "%q=%q ", k, h[k])
	}
	return b.String()
}

func sortedKeys(h http.Header) []string {
	ks := make([]string, 0, len(h))
	for k := range h {
		ks = append(ks, k)
	}
	for i := range ks {
		for j := i + 1; j < len(ks); j++ {
			if ks[j] < ks[i] {
				ks[i], ks[j] = ks[j], ks[i]
			}
		}
	}
	return ks
}

// A body read past its end in the reader net/http parsed it with still
// counts: the connection is not reused (what a server sent after an answer
// makes it unusable).
func TestSpilledBytesEndTheConnection(t *testing.T) {
	bothSchemes(t, func(t *testing.T, tlsOn bool) {
		s := newServer(t, tlsOn, func(w http.ResponseWriter, r *http.Request) {
			io.Copy(io.Discard, r.Body)
			c, bw, err := w.(http.Hijacker).Hijack()
			if err != nil {
				panic(err)
			}
			defer c.Close()
			bw.WriteString("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n1\r\nq\r\n0\r\n\r\nEXTRA")
			bw.Flush()
			// A request on this connection would wait for an answer that
			// never comes: close it at the first byte (or the client's close).
			c.Read(make([]byte, 1))
		})
		for range 2 {
			if got := s.call(t, "q"); got != "q" {
				t.Fatalf("body %q, want q", got)
			}
		}
		if n := s.dials.Load(); n != 2 {
			t.Fatalf("%d dials for 2 requests, want 2", n)
		}
	})
}

// The parse of a DynamoDB Local answer, body read: readAnswer against
// http.ReadResponse (make bench's CPU per task is the figure that counts;
// this isolates the parser's share).
func BenchmarkReadAnswer(b *testing.B) {
	raw := "HTTP/1.1 200 OK\r\nDate: Mon, 30 Nov 2026 01:00:00 GMT\r\nContent-Type: application/x-amz-json-1.0\r\nx-amz-crc32: 2745614147\r\nx-amzn-RequestId: 4a6b7c8d-aaaa-bbbb-cccc-0123456789ab\r\nContent-Length: 2\r\nServer: Jetty(12.0.14)\r\n\r\n{}"
	req, _ := http.NewRequest(http.MethodPost, "http://example.com/", nil)
	for _, c := range []struct {
		name string
		read func(*bufio.Reader) (*http.Response, error)
	}{
		{"readAnswer", func(br *bufio.Reader) (*http.Response, error) {
			resp, _, err := readAnswer(br, req)
			return resp, err
		}},
		{"ReadResponse", func(br *bufio.Reader) (*http.Response, error) { return http.ReadResponse(br, req) }},
	} {
		b.Run(c.name, func(b *testing.B) {
			sr := strings.NewReader(raw)
			br := bufio.NewReaderSize(sr, 4<<10)
			b.ReportAllocs()
			for b.Loop() {
				sr.Reset(raw)
				br.Reset(sr)
				resp, err := c.read(br)
				if err != nil {
					b.Fatal(err)
				}
				io.Copy(io.Discard, resp.Body)
			}
		})
	}
}
