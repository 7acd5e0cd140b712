package emulator

import (
	"bufio"
	"errors"
	"io"
	"net"
	"net/http"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// keepAliveApp is a WSGI app for the launcher's keep-alive part: /echo
// answers the request body, /raise fails before answering, /cut fails
// halfway through a body whose length it has announced.
const keepAliveApp = `
import sys
from werkzeug.serving import make_server
from werkzeug.wrappers import Request
def app(environ, start_response):
    path = environ["PATH_INFO"]
    if path == "/raise":
        raise RuntimeError("before the answer")
    if path == "/cut":
        start_response("200 OK", [("Content-Length", "10")])
        def body():
            yield b"12345"
            raise RuntimeError("halfway")
        return body()
    answer = b"echo:" + Request(environ).get_data()
    start_response("200 OK", [("Content-Length", str(len(answer)))])
    return [answer]
server = make_server("127.0.0.1", 0, app, threaded=True)
print(server.socket.getsockname()[1], flush=True)
server.serve_forever()
`

// TestKeepAliveClosesWhenItMust drives the launcher's keep-alive part
// around a werkzeug server on one connection at a time: requests with a
// known body length keep the connection; a chunked body, the client's own
// "Connection: close", and an app that fails (before or during its answer)
// close it, and the answers are whole.
func TestKeepAliveClosesWhenItMust(t *testing.T) {
	skipUnderShort(t)
	clearEnv(t)
	bin, err := findMotoServer()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(filepath.Join(filepath.Dir(bin), "python"), "-c", motoKeepAlive+keepAliveApp)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	port, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		t.Fatalf("server port: %v", err)
	}
	addr := "127.0.0.1:" + strings.TrimSpace(port)

	var conn net.Conn
	var br *bufio.Reader
	for _, step := range []struct {
		request    string
		method     string
		wantStatus int
		wantBody   string
		wantClose  bool
		cut        bool // the answer's headers went out before the app failed: no "Connection: close", the body ends short
	}{
		{request: "POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello", wantStatus: 200, wantBody: "echo:hello"},
		{request: "GET /echo HTTP/1.1\r\nHost: x\r\n\r\n", wantStatus: 200, wantBody: "echo:"},
		{request: "HEAD /echo HTTP/1.1\r\nHost: x\r\n\r\n", method: "HEAD", wantStatus: 200},
		{request: "POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n", wantStatus: 200, wantBody: "echo:"},
		{request: "POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n", wantStatus: 200, wantBody: "echo:hello", wantClose: true},
		{request: "POST /raise HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\nhi", wantStatus: 500, wantClose: true},
		{request: "GET /echo HTTP/1.1\r\nHost: x\r\n\r\n", wantStatus: 200, wantBody: "echo:"},
		{request: "GET /cut HTTP/1.1\r\nHost: x\r\n\r\n", wantStatus: 200, wantBody: "12345", wantClose: true, cut: true},
		{request: "POST /echo HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Length: 2\r\n\r\nhi", wantStatus: 200, wantBody: "echo:hi", wantClose: true},
	} {
		name := strings.SplitN(step.request, "\r\n", 2)[0]
		if conn == nil {
			conn, err = net.Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			br = bufio.NewReader(conn)
		}
		if err := conn.SetDeadline(time.Now().Add(30 * time.Second)); err != nil {
			t.Fatal(err)
		}
		if _, err := io.WriteString(conn, step.request); err != nil {
			t.Fatalf("%s: write: %v", name, err)
		}
		method := step.method
		if method == "" {
			method = "GET"
		}
		resp, err := http.ReadResponse(br, &http.Request{Method: method})
		if err != nil {
			t.Fatalf("%s: read answer: %v", name, err)
		}
		body, err := io.ReadAll(resp.Body)
		if resp.StatusCode != step.wantStatus {
			t.Errorf("%s: status %d, want %d", name, resp.StatusCode, step.wantStatus)
		}
		if step.wantStatus == 200 && string(body) != step.wantBody {
			t.Errorf("%s: body %q, want %q", name, body, step.wantBody)
		}
		if cut := errors.Is(err, io.ErrUnexpectedEOF); cut != step.cut || (err != nil && !cut) {
			t.Errorf("%s: reading the body: %v", name, err)
		}
		if resp.Close != (step.wantClose && !step.cut) {
			t.Errorf("%s: Connection: close is %v, want %v", name, resp.Close, step.wantClose)
		}
		if step.wantClose {
			// The server closes its end: nothing more arrives.
			if n, err := br.Read(make([]byte, 1)); n != 0 || !errors.Is(err, io.EOF) {
				t.Errorf("%s: after the answer read %d bytes, %v; want EOF", name, n, err)
			}
			conn.Close()
			conn = nil
		}
	}
}
