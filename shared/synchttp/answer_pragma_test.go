package synchttp

import (
	"bufio"
	"net/http"
	"strings"
	"testing"
)

// http.ReadResponse adds "Cache-Control: no-cache" to an answer with
// "Pragma: no-cache" and no Cache-Control (fixPragmaCacheControl, RFC 7234
// 5.4); readAnswer's own parse must give the same header for the answers
// it takes (its doc and TestReadAnswerIsReadResponse promise net/http's
// answers).
func TestReadAnswerPragmaNoCacheReview(t *testing.T) {
	raw := "HTTP/1.1 200 OK\r\nPragma: no-cache\r\nContent-Length: 1\r\n\r\nx"
	req, _ := http.NewRequest(http.MethodPost, "http://example.com/", nil)
	want := readWith(func(br *bufio.Reader) (*http.Response, *bufio.Reader, error) {
		resp, err := http.ReadResponse(br, req)
		return resp, nil, err
	}, strings.NewReader(raw))
	got := readWith(func(br *bufio.Reader) (*http.Response, *bufio.Reader, error) {
		return readAnswer(br, req)
	}, strings.NewReader(raw))
	if got.String() != want.String() {
		t.Fatalf("readAnswer:\n%s\nhttp.ReadResponse:\n%s", got, want)
	}
}
