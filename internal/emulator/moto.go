package emulator

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"
)

const venvHint = "run `make venv` (python3 -m venv .venv && .venv/bin/pip install -r internal/emulator/requirements.txt) in the repository root"

// motoLauncher starts moto_server with workarounds, each for a moto
// defect that AWS does not have; none changes what any request does.
//
// Atomic DynamoDB requests: moto's server handles requests on threads,
// and its DynamoDB backend takes no lock, so two concurrent UpdateItems on
// one item can both read the old value and one update is lost (measured:
// 599 of 600 concurrent ADDs kept), and a cancelled TransactWriteItems
// restores a whole-table snapshot over other requests' writes. DynamoDB
// applies each request atomically; Batchwork's counters and conditional
// writes depend on that, and without the lock a stage under load could
// miss its last decrement and never complete. So DynamoDB requests take
// one lock (moto runs Python under one interpreter lock anyway, so this
// costs little). SQS and S3 are untouched: a 20-second SQS long poll must
// not hold up other requests.
//
// Transaction rollback by item: to be able to roll back, moto's
// TransactWriteItems deep-copies every table a transaction touches, once
// per item, before it starts, so a transaction's time grows with the
// table (measured: 3 ms on an empty table, 300 ms at 2,600 items) and a
// thousand schedules firing at once queue for minutes behind copies of
// tables they never read. DynamoDB's transaction cost does not depend on
// the table. Since the lock above lets no other DynamoDB request run
// during a transaction, saving just the items the transaction names
// (their keys are in the request) and putting them back on failure
// restores exactly what the whole-table copy restored. The launcher does
// that and hands moto's rollback the live table instead of a copy (a
// no-op restore). Everything else about the transaction (validation,
// conditions, the cancellation reasons) is moto's own code.
// TestTransactionsRollBack covers put, update, delete and condition check
// rollbacks through it.
//
// Transactions applied once per ClientRequestToken: moto ignores the
// token, so a TransactWriteItems retried after a lost answer is applied
// a second time, where DynamoDB answers a repeat of an applied
// transaction (same token, same parameters, within 10 minutes) with
// success and no change, and a repeat with other parameters with
// IdempotentParameterMismatchException. The SDK retries on any transport
// error with the token unchanged, and it does lose answers from a server
// on the same machine: smithy-go closes the request body as soon as the
// answer's headers arrive, its closed body's WriteTo returns io.EOF, and
// net/http, still checking the body for bytes past its Content-Length,
// takes that for a failed write and closes the connection under the
// answer being read (measured on a loaded machine: 14 answers lost in
// 17,000 requests over kept connections, 1 with a connection per
// request; 5 of 30 runs of TestConcurrentCountdownIsExact with
// keep-alive found the counter at -1). The launcher keeps each applied
// transaction's token, the digest of its other parameters and its answer
// for 10 minutes and answers a repeat as DynamoDB does. A cancelled
// transaction changes nothing and its token is not kept.
// TestTransactionTokenAppliesOnce covers it.
//
// Receives that do not count the queue per message: for every message
// moto's ReceiveMessage hands out, it checks the message's retention by
// computing all of the queue's attributes, which counts the queue's
// messages three times. A receive of 10 from a queue holding 1,000 took
// 0.6 s (measured: 8 receivers drained 1,000 messages in 57 s), so a
// burst of timer messages arrived up to a minute late. The launcher reads
// the retention period directly, which gives the same answer. Every
// SendMessage, too, computes all of the queue's attributes (to read one
// that only FIFO queues have), and every count reads the clock twice per
// message through a datetime round trip; the launcher gives moto's SQS
// module a clock read from time.time(), the same instant, about twenty
// times cheaper. With both, 1,000 messages go out and come back in
// seconds instead of a minute.
//
// SQS costs that do not grow with the queue: moto keeps a queue's messages
// in one list, and a send computes all of the queue's attributes (three
// counts of every message, for one attribute only FIFO queues use), a
// receive first lists every visible message to hand out ten, and a delete
// or a visibility change searches every message for the receipt handle
// and a delete then copies the list. Each of these is linear in the
// queue, so a job that queues 100,000 tasks ahead of its executors pays a
// quadratic cost: 3.9 ms a send and 2.4 ms a receive, heartbeat and
// delete at 10,000 queued (measured on moto's backend with the fixes
// above), about ten times that at 100,000, hours for the bench's load
// job. The launcher keeps the same list and the same answers, but the
// counts are skipped inside a send (whose only reader there is that FIFO
// attribute), a receive walks the list lazily and stops at its tenth
// visible message, and a receipt handle is looked up in a map (handle to
// message, message to the queue that holds it) instead of by search: 0.08
// ms each at 100,000 queued. TestSQSKeepsItsAnswers covers what SQS
// promises about them (counts, visibility, invalid handles, the dead-
// letter move, purge) through it.
//
// Queues created at once: moto's SQS walks all its queues to find a new
// queue's dead-letter queue while other requests' threads add queues to
// the same dict, and the walk fails ("dictionary changed size during
// iteration"): a 500 to CreateQueue, and a CloudFormation stack whose
// queue it was stays CREATE_IN_PROGRESS for good (the integration tests
// create stacks at once). The launcher runs every SQS call that changes
// or walks the queues one at a time: create, delete, set attributes (a
// RedrivePolicy walks them too) and the two listings
// (TestConcurrentQueueCreation).
//
// Connections kept alive: werkzeug's request handler sends "Connection:
// close" with every answer, because Python's http.server cannot drain an
// unread request body before the next request line; so every SQS and S3
// request dials a new TCP connection and moto accepts it and starts a
// thread for it (measured: about 7% of the bench process's CPU), where AWS
// keeps connections alive. For an HTTP/1.1 request with a Content-Length
// (or with neither Content-Length nor Transfer-Encoding, which has no
// body), the launcher reads the whole body first and hands the app a
// BytesIO as wsgi.input, so the socket always stands at the next request
// line, and drops werkzeug's "Connection: close" (http.server's
// send_header closes the connection on it). werkzeug's drain after the
// answer then reads only that BytesIO. Chunked bodies (Transfer-Encoding),
// "Expect: 100-continue", HTTP/1.0, a client's own "Connection: close" and
// a body shorter than its length keep "Connection: close"; so does an
// exception that reaches werkzeug from the app (moto's Flask answers most
// errors itself with a whole 500): its answer says close, or, when its
// headers went out already, the connection closes after the cut-short
// body, whose reader sees an unexpected EOF either way. Every answer's
// status, headers (but that one) and body are moto's own; a HEAD answer
// sends no body (werkzeug's Response sends none already; the launcher
// makes sure, since on a kept connection a body would be read as the next
// answer), and S3's aws-chunked uploads carry a Content-Length and are
// read whole. Each connection sets TCP_NODELAY: http.server sends an
// answer's headers and body in separate writes, and on a kept connection
// Nagle's algorithm holds the body until the client's delayed ACK
// (measured: TestConcurrentCountdownIsExact took 22 s instead of 3 s);
// closing the connection used to push it out. TestKeepAliveClosesWhenItMust and
// TestMotoKeepsConnectionsAlive cover these. A connection waits 120 s for its next
// request (longer than the 90 s idle timeout of Go's and the AWS SDK's
// transports, so a client, not the server, closes an idle one) and is then
// closed, so a dead client holds its thread no longer; the same timeout
// bounds any stalled read or write. Long polls are unaffected (a thread
// per connection). BATCHWORK_MOTO_KEEPALIVE=0 turns this off.
//
// Untracked tables (only with Options.UntrackTables): see there.
const motoLauncher = `import copy, sys, threading
from moto.dynamodb.responses import DynamoHandler
_lock = threading.Lock()
_call = DynamoHandler.call_action
def call_action(self):
    with _lock:
        return _call(self)
DynamoHandler.call_action = call_action

import moto.dynamodb.models as _models
from moto.dynamodb.models import DynamoDBBackend
from moto.dynamodb.models.dynamo_type import DynamoType
from moto.dynamodb.models.table import Table
class _NoTableCopy:
    def __getattr__(self, name):
        return getattr(copy, name)
    @staticmethod
    def deepcopy(x, memo=None):
        return x if isinstance(x, Table) else copy.deepcopy(x, memo)
_models.copy = _NoTableCopy()
_transact = DynamoDBBackend.transact_write_items
def transact_write_items(self, transact_items):
    saved = []
    for entry in transact_items:
        try:
            _, op = next(iter(entry.items()))
            table = self.tables[op["TableName"]]
            attrs = op["Key"] if "Key" in op else op["Item"]
            h = DynamoType(attrs[table.hash_key_attr])
            r = DynamoType(attrs[table.range_key_attr]) if table.range_key_attr else None
            saved.append((table, h, r, copy.deepcopy(table.get_item(h, r))))
        except Exception:
            pass  # moto rejects this entry and the transaction with it
    try:
        return _transact(self, transact_items)
    except BaseException:
        for table, h, r, item in reversed(saved):
            if r is None and item is None:
                table.items.pop(h, None)
            elif r is None:
                table.items[h] = item
            elif item is None:
                table.items[h].pop(r, None)
            else:
                table.items[h][r] = item
        raise
DynamoDBBackend.transact_write_items = transact_write_items
import hashlib, json, time
from moto.dynamodb.exceptions import DynamodbException
class _IdempotentParameterMismatch(DynamodbException):
    def __init__(self):
        super().__init__("com.amazonaws.dynamodb.v20120810#IdempotentParameterMismatchException",
                         "Request parameters do not match the previous request with the same client token")
_applied = {}
_transact_once = DynamoHandler.transact_write_items
def transact_write_items_once(self):
    token = self.body.get("ClientRequestToken")
    if not token:
        return _transact_once(self)
    now = time.monotonic()
    while _applied:
        oldest = next(iter(_applied))
        if _applied[oldest][0] > now:
            break
        del _applied[oldest]
    params = {k: v for k, v in self.body.items() if k != "ClientRequestToken"}
    digest = hashlib.sha256(json.dumps(params, sort_keys=True, default=str).encode()).digest()
    seen = _applied.get(token)
    if seen is not None:
        if seen[1] != digest:
            raise _IdempotentParameterMismatch()
        return seen[2]
    result = _transact_once(self)
    _applied[token] = (now + 600, digest, result)
    return result
DynamoHandler.transact_write_items = transact_write_items_once

import time
import moto.sqs.models as _sqs
_unix_time = _sqs.unix_time
def unix_time(dt=None):
    return time.time() if dt is None else _unix_time(dt)
def unix_time_millis(dt=None):
    return unix_time(dt) * 1000.0
_sqs.unix_time, _sqs.unix_time_millis = unix_time, unix_time_millis
def is_message_valid_based_on_retention_period(self, queue_name, message):
    retention = int(self.get_queue(queue_name).message_retention_period)
    return retention + message.sent_timestamp / 1000 > unix_time()
_sqs.SQSBackend.is_message_valid_based_on_retention_period = is_message_valid_based_on_retention_period
_sending = threading.local()
def _uncounted_in_sends(name):
    count = getattr(_sqs.Queue, name).fget
    setattr(_sqs.Queue, name, property(lambda self: 0 if getattr(_sending, "on", False) else count(self)))
for _name in ("approximate_number_of_messages", "approximate_number_of_messages_delayed",
              "approximate_number_of_messages_not_visible"):
    _uncounted_in_sends(_name)
def _sends(send):
    def call(*args, **kwargs):
        outer = getattr(_sending, "on", False)
        _sending.on = True
        try:
            return send(*args, **kwargs)
        finally:
            _sending.on = outer
    return call
_sqs.SQSBackend.send_message = _sends(_sqs.SQSBackend.send_message)
_sqs.SQSBackend.send_message_batch = _sends(_sqs.SQSBackend.send_message_batch)
class _Visible:
    __slots__ = ("_queue",)
    def __init__(self, queue):
        self._queue = queue
    def __iter__(self):
        return (m for m in self._queue._messages if m.visible and not m.delayed)
    def __bool__(self):
        return next(iter(self), None) is not None
    def __len__(self):
        return sum(1 for _ in self)
_sqs.Queue.messages = property(_Visible)
_handles = {}
_received = _sqs.Message.mark_received
def mark_received(self, visibility_timeout=None):
    _received(self, visibility_timeout)
    _handles[self.receipt_handle] = self
_sqs.Message.mark_received = mark_received
_queue_of = {}
_add = _sqs.Queue.add_message
def add_message(self, message):
    _queue_of[message] = self
    _add(self, message)
_sqs.Queue.add_message = add_message
def _holding(queue, receipt_handle):
    message = _handles.get(receipt_handle)
    if message is None or _queue_of.get(message) is not queue:
        raise _sqs.ReceiptHandleIsInvalid()
    return message
def delete_message(self, receipt_handle):
    if receipt_handle in self.deleted_messages:
        return
    message = _holding(self, receipt_handle)
    with self._messages_lock:
        try:
            self._messages.remove(message)
        except ValueError:  # purged or moved to its dead-letter queue meanwhile
            raise _sqs.ReceiptHandleIsInvalid()
    _queue_of.pop(message, None)
    self.pending_messages.discard(message)
    self.deleted_messages.update(message.all_receipt_handles)
    for handle in message.all_receipt_handles:
        _handles.pop(handle, None)
_sqs.Queue.delete_message = delete_message
def change_message_visibility(self, queue_name, receipt_handle, visibility_timeout):
    queue = self.get_queue(queue_name)
    message = _holding(queue, receipt_handle)
    given = unix_time_millis() + int(visibility_timeout) * 1000
    if given - message.sent_timestamp > 43200 * 1000:
        raise _sqs.InvalidParameterValue(
            f"Value {visibility_timeout} for parameter VisibilityTimeout is invalid. Reason: Total "
            "VisibilityTimeout for the message is beyond the limit [43200 seconds]")
    message.change_visibility(visibility_timeout)
    if message.visible and message in queue.pending_messages:
        queue.pending_messages.remove(message)
_sqs.SQSBackend.change_message_visibility = change_message_visibility
_purge = _sqs.SQSBackend.purge_queue
def purge_queue(self, queue_name):
    queue = self.get_queue(queue_name)
    with queue._messages_lock:
        for message in queue._messages:
            _queue_of.pop(message, None)
        return _purge(self, queue_name)
_sqs.SQSBackend.purge_queue = purge_queue
_queues_lock = threading.RLock()
def _queues_locked(f):
    def call(*args, **kwargs):
        with _queues_lock:
            return f(*args, **kwargs)
    return call
for _name in ("create_queue", "delete_queue", "set_queue_attributes", "list_queues",
              "list_dead_letter_source_queues"):
    setattr(_sqs.SQSBackend, _name, _queues_locked(getattr(_sqs.SQSBackend, _name)))

` + motoKeepAlive + `if sys.argv[1] == "--untrack-tables":
    del sys.argv[1]
    from moto.dynamodb.models.dynamo_type import Item
    from moto.dynamodb.models.table import SecondaryIndex, Table
    class Untracked(list):
        def append(self, _):
            pass
    def untrack(cls):
        cls.instances_tracked = Untracked()
        for sub in cls.__subclasses__():
            untrack(sub)
    for cls in (Item, SecondaryIndex, Table):
        untrack(cls)
from moto.server import main
sys.exit(main())
`

// motoKeepAlive is the launcher's keep-alive workaround (see motoLauncher),
// a part of its own so that a test can run it around a werkzeug server with
// an app that fails.
const motoKeepAlive = `import io, os, socket, threading
from werkzeug import serving as _serving
if os.environ.get("BATCHWORK_MOTO_KEEPALIVE") != "0":
    _Handler = _serving.WSGIRequestHandler
    _Handler.timeout = 120
    _setup = _Handler.setup
    def setup(self):
        _setup(self)
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    _Handler.setup = setup
    _conn = threading.local()
    class _Body:
        __slots__ = ("_body", "_head")
        def __init__(self, body, head):
            self._body, self._head = body, head
        def __iter__(self):
            if self._head:
                return
            try:
                yield from self._body
            except Exception:
                _conn.failed = True
                raise
        def close(self):
            close = getattr(self._body, "close", None)
            if close is not None:
                close()
    _server_init = _serving.BaseWSGIServer.__init__
    def _server_init_marking_failures(self, host, port, app, *args, **kwargs):
        def marking_failures(environ, start_response):
            try:
                return _Body(app(environ, start_response), environ["REQUEST_METHOD"] == "HEAD")
            except Exception:
                _conn.failed = True
                raise
        _server_init(self, host, port, marking_failures, *args, **kwargs)
    _serving.BaseWSGIServer.__init__ = _server_init_marking_failures
    _run_wsgi = _Handler.run_wsgi
    def run_wsgi(self):
        headers = self.headers
        length = headers.get("Content-Length", "0")
        if (self.close_connection or self.request_version != "HTTP/1.1" or not length.isdigit()
                or "Transfer-Encoding" in headers or "Expect" in headers):
            return _run_wsgi(self)
        n = int(length)
        body = self.rfile.read(n) if n else b""
        if len(body) != n:
            self.close_connection = True
            return
        socket_rfile, self.rfile = self.rfile, io.BytesIO(body)
        _conn.keep, _conn.failed = True, False
        try:
            _run_wsgi(self)
        finally:
            self.rfile = socket_rfile
            _conn.keep = False
        if _conn.failed:
            self.close_connection = True
    _Handler.run_wsgi = run_wsgi
    _send_header = _Handler.send_header
    def send_header(self, keyword, value):
        if keyword == "Connection" and value == "close" and getattr(_conn, "keep", False) and not _conn.failed:
            return
        _send_header(self, keyword, value)
    _Handler.send_header = send_header

`

// startMoto starts moto_server and waits until it is healthy.
//
// The listening socket is created here (127.0.0.1:0, or the pinned port) and
// handed to the server as fd 3 through werkzeug's own socket hand-over
// protocol (WERKZEUG_RUN_MAIN=true, WERKZEUG_SERVER_FD=3; the one its
// reloader uses). So there is no window between picking a port and the server
// binding it in which another process could take the port, and a health check
// can never be answered by some other server on a reused port.
func startMoto(ctx context.Context, region string, opts Options) (*Emulator, error) {
	bin, err := findMotoServer()
	if err != nil {
		return nil, err
	}
	logDir, err := logDirOf(opts)
	if err != nil {
		return nil, err
	}
	l, err := listen(opts.Port)
	if err != nil {
		return nil, err
	}
	defer l.Close() // the child has its own copy once started
	port := l.Addr().(*net.TCPAddr).Port
	lf, err := l.File()
	if err != nil {
		return nil, fmt.Errorf("emulator: listener fd: %w", err)
	}
	defer lf.Close()

	logFile, err := os.CreateTemp(logDir, fmt.Sprintf("moto-%d-*.log", port))
	if err != nil {
		return nil, fmt.Errorf("emulator: create log file: %w", err)
	}
	logPath := logFile.Name()
	fmt.Fprintf(logFile, "# %s -H 127.0.0.1 -p %d (socket passed as fd 3; started %s by pid %d)\n",
		bin, port, time.Now().Format(time.RFC3339), os.Getpid())

	// moto_server's own interpreter (the venv's python sits beside it) runs
	// the launcher, which then calls moto_server's main with these flags.
	// A moto_server without that python (BATCHWORK_MOTO_SERVER naming some
	// other install) runs as it is, and the log says so.
	cmd := exec.Command(bin, "-H", "127.0.0.1", "-p", strconv.Itoa(port))
	if py := filepath.Join(filepath.Dir(bin), "python"); fileExists(py) {
		args := []string{"-c", motoLauncher}
		if opts.UntrackTables {
			args = append(args, "--untrack-tables")
		}
		cmd = exec.Command(py, append(args, "-H", "127.0.0.1", "-p", strconv.Itoa(port))...)
	} else {
		fmt.Fprintf(logFile, "# no python beside %s: running it without the launcher's workarounds\n", bin)
	}
	cmd.Stdout = logFile
	cmd.Stderr = logFile
	cmd.ExtraFiles = []*os.File{lf} // fd 3
	cmd.Env = append(os.Environ(), "PYTHONUNBUFFERED=1", "WERKZEUG_RUN_MAIN=true", "WERKZEUG_SERVER_FD=3")
	cmd.SysProcAttr = sysProcAttr()

	p := &process{name: "moto server", cmd: cmd, logPath: logPath, done: make(chan struct{})}
	err = p.start()
	logFile.Close() // the child holds its own copy
	if err != nil {
		return nil, fmt.Errorf("emulator: start %s: %w (log: %s); %s", bin, err, logPath, venvHint)
	}
	lf.Close()
	l.Close()

	url := "http://127.0.0.1:" + strconv.Itoa(port)
	e := newEmulator(url, region, KindMoto)
	e.LogPath = logPath
	e.motoAPI = true
	e.proc = p

	if err := p.waitHealthy(ctx, httpOK(e.endpoint("/moto-api/")), motoStartTimeout); err != nil {
		_ = p.stop(stopGracePeriod)
		return nil, fmt.Errorf("emulator: moto server %s on port %d did not become healthy: %w; if the virtualenv is missing or broken, %s; log: %s%s",
			bin, port, err, venvHint, logPath, logTail(logPath))
	}
	return e, nil
}

// logDirOf returns the directory for log files, creating it.
func logDirOf(opts Options) (string, error) {
	dir := opts.LogDir
	if dir == "" {
		dir = os.Getenv(EnvLogDir)
	}
	if dir == "" {
		dir = os.TempDir()
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("emulator: log dir: %w", err)
	}
	return dir, nil
}

// listen opens the server socket on 127.0.0.1: on a kernel-chosen free port
// when port is 0, retrying a few times on a bind failure.
func listen(port int) (*net.TCPListener, error) {
	const attempts = 5
	var err error
	for i := 0; i < attempts; i++ {
		var l net.Listener
		l, err = net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
		if err == nil {
			return l.(*net.TCPListener), nil
		}
		if port != 0 {
			return nil, fmt.Errorf("emulator: port %d: %w", port, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	return nil, fmt.Errorf("emulator: pick a free port: %w", err)
}

// findMotoServer returns BATCHWORK_MOTO_SERVER, or .venv/bin/moto_server next
// to the nearest go.mod walking up from the working directory.
func findMotoServer() (string, error) {
	if p := os.Getenv(EnvMotoServer); p != "" {
		if err := checkExecutable(p); err != nil {
			return "", fmt.Errorf("emulator: %s=%s: %w; %s", EnvMotoServer, p, err, venvHint)
		}
		return p, nil
	}
	wd, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("emulator: %w", err)
	}
	var tried []string
	for dir := wd; ; {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			cand := filepath.Join(dir, ".venv", "bin", "moto_server")
			if checkExecutable(cand) == nil {
				return cand, nil
			}
			tried = append(tried, cand)
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			break
		}
		dir = parent
	}
	if len(tried) == 0 {
		return "", fmt.Errorf("emulator: moto_server not found: no go.mod above %s and %s is not set; %s", wd, EnvMotoServer, venvHint)
	}
	return "", fmt.Errorf("emulator: moto_server not found (tried %s); %s, or set %s",
		strings.Join(tried, ", "), venvHint, EnvMotoServer)
}

func checkExecutable(path string) error {
	fi, err := os.Stat(path)
	if err != nil {
		return err
	}
	if fi.IsDir() {
		return fmt.Errorf("%s is a directory", path)
	}
	if runtime.GOOS != "windows" && fi.Mode().Perm()&0o111 == 0 {
		return fmt.Errorf("%s is not executable", path)
	}
	return nil
}

// logTail returns the last lines of the log, formatted for an error message.
func logTail(path string) string {
	b, err := os.ReadFile(path)
	if err != nil || len(b) == 0 {
		return ""
	}
	const max = 1500
	if len(b) > max {
		b = b[len(b)-max:]
	}
	return "\n--- log tail ---\n" + strings.TrimRight(string(b), "\n")
}

func fileExists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}
