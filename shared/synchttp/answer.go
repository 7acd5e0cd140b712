package synchttp

import (
	"bufio"
	"bytes"
	"io"
	"net/http"
	"strconv"
)

// readAnswer reads an answer's status line and header from br, as
// http.ReadResponse does, for a fraction of its CPU in the common case:
// net/http's parser (net/textproto's lines, canonical keys, a string and
// a map entry per line, the transfer rules) was about 4% of a no-op
// task's CPU in the bench. The common case is an HTTP/1.1 answer with a
// status other than 1xx, 204 and 304 to a request other than HEAD, one
// Content-Length, no Connection, Transfer-Encoding, Trailer or Pragma
// field, and only plain "Key: value" lines; its header is one string the
// values share, its keys canonical (interned for the fields AWS and the
// emulators send), its body the Content-Length's bytes of br.
//
// Every other answer (chunked, unbounded, folded lines, malformed, 1xx,
// a read error mid-header) is parsed by http.ReadResponse itself over the
// header's bytes already read followed by br, so its answer, its errors
// and its body are net/http's. Such a body may read past the answer into
// that reader's buffer; spill is the reader, whose buffered bytes a
// later alive check counts (a server sends nothing after an answer until
// the next request, so any is a broken connection).
func readAnswer(br *bufio.Reader, req *http.Request) (resp *http.Response, spill *bufio.Reader, err error) {
	block, rerr := peekHead(br)
	switch {
	case rerr != nil:
		// Nothing read: net/http meets the error first.
	case block != nil:
		// In br's buffer: parsed in place (fastAnswer copies what it
		// keeps), or copied out before br reads on.
		if resp, ok := fastAnswer(block, br, req); ok {
			br.Discard(len(block))
			return resp, nil, nil
		}
		block = bytes.Clone(block)
		br.Discard(len(block))
	default:
		block, rerr = readHead(br)
		if rerr == nil {
			if resp, ok := fastAnswer(block, br, req); ok {
				return resp, nil, nil
			}
		}
	}
	var rest io.Reader = br
	if rerr != nil {
		rest = errReader{rerr}
	}
	spill = bufio.NewReaderSize(io.MultiReader(bytes.NewReader(block), rest), 4<<10)
	resp, err = http.ReadResponse(spill, req)
	return resp, spill, err
}

// errReader returns err: what reading the header met, handed to
// http.ReadResponse after the bytes read before it.
type errReader struct{ err error }

func (e errReader) Read([]byte) (int, error) { return 0, e.err }

// peekHead is the status line and header's lines up to and with the
// empty line that ends them, when br's buffer holds them all after the
// first read (a small answer's header comes in one segment): a slice of
// br's buffer, not consumed. Nil: readHead reads them.
func peekHead(br *bufio.Reader) ([]byte, error) {
	if _, err := br.Peek(1); err != nil {
		return nil, err
	}
	b, _ := br.Peek(br.Buffered())
	pos := bytes.IndexByte(b, '\n') + 1
	if pos == 0 {
		return nil, nil
	}
	for {
		i := bytes.IndexByte(b[pos:], '\n')
		if i < 0 {
			return nil, nil
		}
		if i == 0 || i == 1 && b[pos] == '\r' {
			return b[:pos+i+1], nil
		}
		pos += i + 1
	}
}

// readHead reads the status line and the header's lines up to and with
// the empty line ("\r\n" or "\n") that ends them.
func readHead(br *bufio.Reader) ([]byte, error) {
	var block []byte
	lineStart := 0
	for {
		chunk, err := br.ReadSlice('\n')
		block = append(block, chunk...)
		if err == bufio.ErrBufferFull {
			continue
		}
		if err != nil {
			return block, err
		}
		line := block[lineStart:]
		if lineStart > 0 && (len(line) == 1 || len(line) == 2 && line[0] == '\r') {
			return block, nil
		}
		lineStart = len(block)
	}
}

// fastAnswer parses block (readHead's) when the answer is the common case
// readAnswer describes; ok false: leave it to net/http.
func fastAnswer(block []byte, br *bufio.Reader, req *http.Request) (*http.Response, bool) {
	if req.Method == http.MethodHead {
		return nil, false
	}
	nl := bytes.IndexByte(block, '\n')
	status := trimEOL(block[:nl])
	// "HTTP/1.1 200" and an optional reason: net/http's parse of this
	// shape gives the same Status and StatusCode.
	if len(status) < 12 || string(status[:9]) != "HTTP/1.1 " || len(status) > 12 && status[12] != ' ' {
		return nil, false
	}
	code := 0
	for _, c := range status[9:12] {
		if c < '0' || c > '9' {
			return nil, false
		}
		code = code*10 + int(c-'0')
	}
	if code < 200 || code == http.StatusNoContent || code == http.StatusNotModified {
		return nil, false
	}
	lines := block[nl+1:]
	n := bytes.Count(lines, []byte{'\n'}) - 1 // the empty line's is not a field's
	if n < 1 {
		return nil, false // no Content-Length
	}
	if n > maxFastFields {
		return nil, false // sized by lines before they are checked: net/http's is linear
	}
	text := string(lines) // the values' one allocation
	h := make(http.Header, n)
	vals := make([]string, n)
	length := int64(-1)
	pos := 0
	for range n {
		end := pos + bytes.IndexByte(lines[pos:], '\n')
		line := trimEOL(lines[pos:end])
		valStart := pos
		pos = end + 1
		colon := bytes.IndexByte(line, ':')
		if colon <= 0 || colon > 64 {
			return nil, false
		}
		var kbuf [64]byte
		key, ok := canonicalKey(kbuf[:0], line[:colon])
		if !ok {
			return nil, false
		}
		v := line[colon+1:]
		i, j := 0, len(v)
		for i < j && (v[i] == ' ' || v[i] == '\t') {
			i++
		}
		for j > i && (v[j-1] == ' ' || v[j-1] == '\t') {
			j--
		}
		for _, c := range v[i:j] {
			if !valueByte(c) {
				return nil, false
			}
		}
		value := text[valStart+colon+1+i : valStart+colon+1+j]
		switch key {
		case "Connection", "Transfer-Encoding", "Trailer", "Pragma":
			// Pragma: http.ReadResponse may add a Cache-Control field
			// (fixPragmaCacheControl).
			return nil, false
		case "Content-Length":
			if length >= 0 || value == "" {
				return nil, false // repeated (net/http's rules), or invalid
			}
			l, err := strconv.ParseUint(value, 10, 63)
			if err != nil {
				return nil, false
			}
			length = int64(l)
		}
		if vv := h[key]; vv != nil {
			h[key] = append(vv, value)
			continue
		}
		vv := vals[:1:1]
		vals = vals[1:]
		vv[0] = value
		h[key] = vv
	}
	if length < 0 {
		return nil, false
	}
	resp := &http.Response{
		Status:        string(status[9:]),
		StatusCode:    code,
		Proto:         "HTTP/1.1",
		ProtoMajor:    1,
		ProtoMinor:    1,
		Header:        h,
		ContentLength: length,
		Request:       req,
		Body:          http.NoBody,
	}
	if length > 0 {
		resp.Body = &fixedBody{br: br, left: length}
	}
	return resp, true
}

// trimEOL drops a line's "\n" or "\r\n".
func trimEOL(b []byte) []byte {
	if n := len(b); n > 0 && b[n-1] == '\n' {
		b = b[:n-1]
	}
	if n := len(b); n > 0 && b[n-1] == '\r' {
		b = b[:n-1]
	}
	return b
}

// canonicalKey appends k's canonical form to buf as net/textproto makes it
// (upper case first and after each '-', lower case elsewhere); ok false
// if k has a byte that is not a token's (textproto's errors and its keys
// kept as sent are left to it).
func canonicalKey(buf, k []byte) (string, bool) {
	upper := true
	for _, c := range k {
		if !tokenBytes[c] {
			return "", false
		}
		if upper && 'a' <= c && c <= 'z' {
			c -= 'a' - 'A'
		} else if !upper && 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		buf = append(buf, c)
		upper = c == '-'
	}
	return internKey(buf), true
}

// internKey is the canonical key in buf as a string, without an
// allocation for the fields DynamoDB, SQS, EventBridge, CloudWatch Logs
// and the emulators answer with.
func internKey(buf []byte) string {
	switch string(buf) {
	case "Content-Type":
		return "Content-Type"
	case "Content-Length":
		return "Content-Length"
	case "Date":
		return "Date"
	case "Server":
		return "Server"
	case "Connection":
		return "Connection"
	case "Keep-Alive":
		return "Keep-Alive"
	case "X-Amzn-Requestid":
		return "X-Amzn-Requestid"
	case "X-Amz-Crc32":
		return "X-Amz-Crc32"
	case "X-Amz-Id-2":
		return "X-Amz-Id-2"
	case "X-Amz-Request-Id":
		return "X-Amz-Request-Id"
	case "X-Amzn-Errortype":
		return "X-Amzn-Errortype"
	case "X-Amzn-Query-Mode":
		return "X-Amzn-Query-Mode"
	case "X-Amzn-Trace-Id":
		return "X-Amzn-Trace-Id"
	case "Access-Control-Allow-Origin":
		return "Access-Control-Allow-Origin"
	case "Access-Control-Expose-Headers":
		return "Access-Control-Expose-Headers"
	case "Access-Control-Allow-Methods":
		return "Access-Control-Allow-Methods"
	case "Access-Control-Allow-Headers":
		return "Access-Control-Allow-Headers"
	case "Vary":
		return "Vary"
	case "Cache-Control":
		return "Cache-Control"
	case "Content-Encoding":
		return "Content-Encoding"
	case "Transfer-Encoding":
		return "Transfer-Encoding"
	case "Trailer":
		return "Trailer"
	}
	return string(buf)
}

// tokenBytes: net/textproto's validHeaderFieldByte (RFC 7230's tchar).
var tokenBytes = func() (t [256]bool) {
	for c := range 256 {
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
			t[c] = true
		}
	}
	for _, c := range "!#$%&'*+-.^_`|~" {
		t[c] = true
	}
	return t
}()

// valueByte: net/textproto's validHeaderValueByte (tab, visible ASCII,
// space, obs-text).
func valueByte(c byte) bool {
	return c == '\t' || c >= 0x20 && c != 0x7f
}

// fixedBody is a Content-Length body: its last bytes come with io.EOF, so
// the connection goes back to the pool on the read that finishes it.
type fixedBody struct {
	br   *bufio.Reader
	left int64
}

func (b *fixedBody) Read(p []byte) (int, error) {
	if b.left <= 0 {
		return 0, io.EOF
	}
	if int64(len(p)) > b.left {
		p = p[:b.left]
	}
	n, err := b.br.Read(p)
	b.left -= int64(n)
	switch {
	case b.left == 0:
		return n, io.EOF
	case err == io.EOF:
		return n, io.ErrUnexpectedEOF
	}
	return n, err
}

func (b *fixedBody) Close() error { return nil }

// maxFastFields is the most header fields the fast path takes: the
// answers it is for carry fewer than a dozen, and its map and values are
// sized by the header's line count before the lines are checked, which a
// header of many tiny lines would turn into an allocation many times its
// size.
const maxFastFields = 64
