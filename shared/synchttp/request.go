package synchttp

import (
	"bufio"
	"fmt"
	"io"
	"net/http"
	"net/http/httptrace"
	"slices"
	"strconv"
	"strings"
)

// writeRequest writes req to bw as req.Write does, byte for byte, for a
// fraction of its CPU in the common case: Request.Write formats the
// request line and two fields with fmt, copies and sorts the header's
// keys through a pooled sorter, and runs every value through a
// strings.Replacer (about 7% of the bench runner's CPU). The common case
// is what the lean AWS clients send: a method and host of plain bytes, a
// URL without an opaque part, a User-Agent field, a body of a known
// positive length, no Connection: close, transfer coding, trailer or
// client trace, and fields whose keys are tokens and whose values need
// no cleaning (no line break, no space or tab at either end). Every
// other request is written by req.Write itself. The body follows the
// header in the buffer without the flush Request.Write puts between them
// for a body it does not know to be in memory: the transport writes the
// whole request before it reads, and its requests' bodies are in memory.
func writeRequest(bw *bufio.Writer, req *http.Request) error {
	var fbuf [24]field
	uri, fields, ok := plainRequest(req, fbuf[:0])
	if !ok {
		return req.Write(bw)
	}
	host := req.Host
	if host == "" {
		host = req.URL.Host
	}
	bw.WriteString(req.Method)
	bw.WriteByte(' ')
	bw.WriteString(uri)
	bw.WriteString(" HTTP/1.1\r\nHost: ")
	bw.WriteString(host)
	bw.WriteString("\r\nUser-Agent: ")
	bw.WriteString(req.Header["User-Agent"][0])
	bw.WriteString("\r\nContent-Length: ")
	bw.Write(strconv.AppendInt(bw.AvailableBuffer(), req.ContentLength, 10))
	bw.WriteString("\r\n")
	slices.SortFunc(fields, func(a, b field) int { return strings.Compare(a.key, b.key) })
	for _, f := range fields {
		for _, v := range f.values {
			bw.WriteString(f.key)
			bw.WriteString(": ")
			bw.WriteString(v)
			bw.WriteString("\r\n")
		}
	}
	bw.WriteString("\r\n")
	return writeBody(bw, req)
}

// writeBody copies the body as net/http's transfer writer does: its
// ContentLength bytes, then whatever is left read and dropped, a length
// other than ContentLength an error, the body closed in every case.
func writeBody(bw *bufio.Writer, req *http.Request) (err error) {
	body := req.Body
	defer func() {
		if cerr := body.Close(); cerr != nil && err == nil {
			err = cerr
		}
	}()
	n, err := io.Copy(bw, &io.LimitedReader{R: body, N: req.ContentLength})
	if err != nil {
		return err
	}
	extra, err := io.Copy(io.Discard, body)
	if err != nil {
		return err
	}
	if n+extra != req.ContentLength {
		return fmt.Errorf("http: ContentLength=%d with Body length %d", req.ContentLength, n+extra)
	}
	return nil
}

// field is a header field writeRequest writes from the header.
type field struct {
	key    string
	values []string
}

// plainRequest says whether writeRequest writes req itself, with the
// request URI and the header's fields (appended to fields, unsorted) it
// writes.
func plainRequest(req *http.Request, fields []field) (string, []field, bool) {
	u := req.URL
	if u == nil || u.Opaque != "" || req.Close || req.TransferEncoding != nil || req.Trailer != nil ||
		req.ContentLength <= 0 || req.Body == nil || req.Body == http.NoBody || req.Method == http.MethodConnect {
		return "", nil, false
	}
	if !token(req.Method) {
		return "", nil, false
	}
	host := req.Host
	if host == "" {
		host = u.Host
	}
	if !plainHost(host) {
		return "", nil, false
	}
	ua := req.Header["User-Agent"]
	if len(ua) == 0 || ua[0] == "" {
		return "", nil, false
	}
	for k, vv := range req.Header {
		if !token(k) {
			return "", nil, false
		}
		for _, v := range vv {
			if !plainValue(v) {
				return "", nil, false
			}
		}
		if !excluded(k) {
			fields = append(fields, field{k, vv})
		}
	}
	uri := u.RequestURI()
	for i := 0; i < len(uri); i++ {
		if c := uri[i]; c < ' ' || c == 0x7f {
			return "", nil, false
		}
	}
	if httptrace.ContextClientTrace(req.Context()) != nil {
		return "", nil, false
	}
	return uri, fields, true
}

// excluded: the fields Request.Write writes from the request's own fields
// (Host, Content-Length) or first (User-Agent), or never from the header.
func excluded(k string) bool {
	switch k {
	case "Host", "User-Agent", "Content-Length", "Transfer-Encoding", "Trailer":
		return true
	}
	return false
}

// token: a non-empty string of RFC 7230 tchars (net/http drops a header
// field whose key is not one).
func token(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if !tokenBytes[s[i]] {
			return false
		}
	}
	return true
}

// plainHost: a host and port that net/http writes unchanged (ASCII, so no
// punycode; no zone; only the bytes of names and IP literals).
func plainHost(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		case c == '.', c == '-', c == ':', c == '[', c == ']', c == '_':
		default:
			return false
		}
	}
	return true
}

// plainValue: a field value net/http writes unchanged (its replacer turns
// line breaks into spaces, then it trims spaces, tabs and line breaks at
// both ends).
func plainValue(v string) bool {
	if v == "" {
		return true
	}
	if c := v[0]; c == ' ' || c == '\t' {
		return false
	}
	if c := v[len(v)-1]; c == ' ' || c == '\t' {
		return false
	}
	return strings.IndexByte(v, '\n') < 0 && strings.IndexByte(v, '\r') < 0
}
