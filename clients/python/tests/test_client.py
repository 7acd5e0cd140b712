"""The client against a stub server in a thread: the requests it builds,
how it pages, retries and maps error answers, and how it finds the local
runner's token. No Batchwork server is needed."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
import json
import os
import tempfile
import threading
import unittest
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Dict, List, Optional, Tuple
from urllib.parse import parse_qsl, urlsplit

import batchwork
from batchwork import models as m
from batchwork.auth import region_of_host

JOB = "j0123456789abcdef01234"
STATUS = {"id": JOB, "name": "wc", "state": "RUNNING", "created": "2026-01-02T15:04:05.123456789Z",
          "progress": {"tasksDone": 0, "tasksTotal": 2, "recordsIn": 0, "recordsOut": 0}, "stages": []}


class Stub:
    """A server that answers each route with the answers queued for it, in
    order (the last one again once the others are used), and records every
    request."""

    def __init__(self) -> None:
        self.answers: Dict[Tuple[str, str], List[Tuple[int, Any]]] = {}
        self.requests: List[Dict[str, Any]] = []
        stub = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def _serve(self) -> None:
                u = urlsplit(self.path)
                n = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(n) if n else b""
                stub.requests.append({"method": self.command, "path": u.path, "query": dict(parse_qsl(u.query)),
                                      "pairs": parse_qsl(u.query),
                                      "headers": {k.lower(): v for k, v in self.headers.items()}, "body": body})
                queue = stub.answers.get((self.command, u.path))
                if not queue:
                    status, answer = 404, {"code": "not_found", "message": "no such route", "field": ""}
                else:
                    status, answer = queue.pop(0) if len(queue) > 1 else queue[0]
                raw = answer if isinstance(answer, bytes) else json.dumps(answer).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(raw)))
                self.end_headers()
                self.wfile.write(raw)

            do_GET = do_POST = do_DELETE = _serve

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, args=(0.05,), daemon=True)
        self.thread.start()

    def on(self, method: str, path: str, *answers: Tuple[int, Any]) -> None:
        self.answers[(method, path)] = list(answers)

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


class ClientTest(unittest.TestCase):
    def setUp(self) -> None:
        self.stub = Stub()
        self.addCleanup(self.stub.close)
        self.slept: List[float] = []
        self.bw = batchwork.Client(self.stub.url, batchwork.LocalAuth("alice", "tok"), sleep=self.slept.append)

    def test_submit_sends_the_spec_with_a_key_and_the_local_identity(self) -> None:
        self.stub.on("POST", "/jobs", (201, {"jobId": JOB, "created": True}))
        res = self.bw.submit({"name": "wc", "stages": []}, idempotency_key="k1")
        self.assertEqual(res, m.SubmitResult(job_id=JOB, created=True))
        req = self.stub.requests[-1]
        self.assertEqual(req["headers"]["idempotency-key"], "k1")
        self.assertEqual(req["headers"]["content-type"], "application/json")
        self.assertEqual(req["headers"]["x-batchwork-owner"], "alice")
        self.assertEqual(req["headers"]["authorization"], "Bearer tok")
        self.assertEqual(json.loads(req["body"]), {"name": "wc", "stages": []})

        self.bw.submit("name: wc\nstages: []\n")
        req = self.stub.requests[-1]
        self.assertEqual(req["headers"]["content-type"], "application/yaml")
        self.assertTrue(req["headers"]["idempotency-key"].startswith("py-"))
        self.assertEqual(req["body"], b"name: wc\nstages: []\n")

    def test_submit_sends_run_params_one_pair_each(self) -> None:
        self.stub.on("POST", "/jobs", (201, {"jobId": JOB, "created": True}))
        self.bw.submit("name: wc\n", params={"region": "eu", "date": "2026-03-01", "f": "a=b"})
        self.assertEqual(self.stub.requests[-1]["pairs"],
                         [("param", "date=2026-03-01"), ("param", "f=a=b"), ("param", "region=eu")])
        self.bw.submit("name: wc\n")
        self.assertEqual(self.stub.requests[-1]["pairs"], [])
    def test_submit_at_sends_the_start_time(self) -> None:
        self.stub.on("POST", "/jobs", (201, {"jobId": JOB, "created": True, "startAt": "2026-12-01T06:00:00Z"}))
        at = datetime(2026, 12, 1, 7, 0, tzinfo=timezone(timedelta(hours=1)))
        res = self.bw.submit({"name": "wc", "stages": []}, at=at)
        self.assertEqual(self.stub.requests[-1]["query"], {"at": "2026-12-01T06:00:00Z"})
        self.assertEqual(res.start_at, datetime(2026, 12, 1, 6, 0, tzinfo=timezone.utc))
        with self.assertRaises(ValueError):
            self.bw.submit({"name": "wc", "stages": []}, at=datetime(2026, 12, 1, 6, 0))

    def test_a_retried_submission_keeps_its_key(self) -> None:
        self.stub.on("POST", "/jobs", (503, {"code": "internal", "message": "busy", "field": ""}),
                     (200, {"jobId": JOB, "created": False}))
        self.bw.submit('{"name": "wc"}')
        keys = {r["headers"]["idempotency-key"] for r in self.stub.requests}
        self.assertEqual(len(self.stub.requests), 2)
        self.assertEqual(len(keys), 1)
        self.assertEqual(self.slept, [0.2])

    def test_ids_are_escaped_in_paths_and_filters_go_in_the_query(self) -> None:
        with self.assertRaises(batchwork.NotFound):
            self.bw.status("a/b?c")
        self.assertEqual(self.stub.requests[-1]["path"], "/jobs/a%2Fb%3Fc")
        # Escaped once: a '%' or a space in an id is not escaped again.
        with self.assertRaises(batchwork.NotFound):
            self.bw.get_schedule("s%2F1 x")
        self.assertEqual(self.stub.requests[-1]["path"], "/schedules/s%252F1%20x")
        self.stub.on("GET", f"/jobs/{JOB}/tasks", (200, {"tasks": []}))
        list(self.bw.tasks(JOB, stage="map", state="FAILED", limit=5))
        self.assertEqual(self.stub.requests[-1]["query"], {"stage": "map", "state": "FAILED", "limit": "5"})
        self.stub.on("GET", f"/jobs/{JOB}/manifest", (200, {"job": JOB, "state": "SUCCEEDED", "complete": True,
                                                            "bucket": "b", "outputs": []}))
        list(self.bw.outputs(JOB, presign=True))
        self.assertEqual(self.stub.requests[-1]["query"], {"presign": "true"})

    def test_a_pager_follows_the_cursors(self) -> None:
        def summary(i: int) -> Dict[str, Any]:
            return {"id": f"j{i:021x}", "name": "n", "state": "SUCCEEDED", "created": "2026-01-02T15:04:05Z"}
        self.stub.on("GET", "/jobs", (200, {"jobs": [summary(1), summary(2)], "nextCursor": "c1"}),
                     (200, {"jobs": [], "nextCursor": "c2"}),
                     (200, {"jobs": [summary(3)]}))
        jobs = list(self.bw.list_jobs(status="SUCCEEDED"))
        self.assertEqual([j.id for j in jobs], [f"j{i:021x}" for i in (1, 2, 3)])
        self.assertEqual([r["query"].get("cursor") for r in self.stub.requests], [None, "c1", "c2"])
        self.assertTrue(all(r["query"]["status"] == "SUCCEEDED" for r in self.stub.requests))

        self.stub.on("GET", "/jobs", (200, {"jobs": [summary(4)], "nextCursor": "c9"}))
        page = self.bw.list_jobs(cursor="c8").page()
        self.assertEqual(page.next_cursor, "c9")
        self.assertEqual(self.stub.requests[-1]["query"], {"cursor": "c8"})

    def test_wait_polls_until_the_job_ends(self) -> None:
        ended = dict(STATUS, state="SUCCEEDED", ended="2026-01-02T15:05:00+02:00")
        self.stub.on("GET", f"/jobs/{JOB}", (200, STATUS), (200, STATUS), (200, ended))
        st = self.bw.wait(JOB, interval=0.5)
        self.assertEqual(st.state, "SUCCEEDED")
        self.assertEqual(st.ended.utcoffset().total_seconds(), 7200)
        self.assertEqual(self.slept, [0.5, 0.5])

        self.stub.on("GET", f"/jobs/{JOB}", (200, STATUS))
        with self.assertRaises(batchwork.WaitTimeout) as cm:
            self.bw.wait(JOB, timeout=0, interval=0.5)
        self.assertEqual(cm.exception.job.state, "RUNNING")

    def test_error_answers_map_to_exceptions(self) -> None:
        cases = [
            (404, {"code": "not_found", "message": "no such job", "field": "id"}, batchwork.NotFound),
            (409, {"code": "job_ended", "message": "job already FAILED", "field": "id"}, batchwork.Conflict),
            (410, {"code": "data_deleted", "message": "gone", "field": "id"}, batchwork.Gone),
            (400, {"code": "invalid_request", "message": "must be positive", "field": "limit"}, batchwork.BadRequest),
            (403, {"message": "User is not authorized"}, batchwork.Forbidden),
            (501, {"code": "presign_unavailable", "message": "no", "field": "presign"}, batchwork.Unsupported),
        ]
        for status, body, cls in cases:
            with self.subTest(status=status):
                self.stub.on("GET", f"/jobs/{JOB}", (status, body))
                with self.assertRaises(cls) as cm:
                    self.bw.status(JOB)
                self.assertEqual(cm.exception.status, status)
                self.assertEqual(cm.exception.code, body.get("code", f"http_{status}"))
                self.assertIsInstance(cm.exception, batchwork.BatchworkError)
        self.assertEqual(str(batchwork.errors.error_from_answer(400, json.dumps(cases[3][1]).encode())),
                         "limit: must be positive")

    def test_an_invalid_spec_lists_every_problem(self) -> None:
        self.stub.on("POST", "/jobs", (400, {"code": "invalid_spec", "message": "2 problems", "field": "name",
                                             "errors": [{"field": "name", "message": "is required", "line": 1},
                                                        {"field": "stages", "message": "is empty"}]}))
        with self.assertRaises(batchwork.InvalidSpec) as cm:
            self.bw.submit("stages: []\n")
        self.assertEqual(cm.exception.errors, [m.FieldError(message="is required", field="name", line=1),
                                               m.FieldError(message="is empty", field="stages")])
        self.assertEqual(len(self.stub.requests), 1)

    def test_throttling_and_gateway_errors_are_retried_then_raised(self) -> None:
        self.stub.on("GET", "/whoami", (429, {"message": "Too Many Requests"}))
        with self.assertRaises(batchwork.Throttled) as cm:
            self.bw.whoami()
        self.assertEqual(cm.exception.code, "http_429")
        self.assertEqual(len(self.stub.requests), 4)
        self.assertEqual(self.slept, [0.2, 0.4, 0.8])

        self.stub.requests.clear()
        self.stub.on("GET", "/whoami", (502, b"<html>Bad Gateway</html>"))
        with self.assertRaises(batchwork.ServerError) as cm2:
            self.bw.whoami()
        self.assertIn("Bad Gateway", str(cm2.exception))
        self.assertEqual(len(self.stub.requests), 4)

    def test_a_quota_is_not_retried(self) -> None:
        self.stub.on("POST", "/jobs", (429, {"code": "quota", "message": "at the running-jobs quota", "field": ""}))
        with self.assertRaises(batchwork.QuotaExceeded):
            self.bw.submit({"name": "x"})
        self.assertEqual(len(self.stub.requests), 1)

    def test_a_schedule_is_not_created_twice_after_a_server_error(self) -> None:
        self.stub.on("POST", "/schedules", (500, {"code": "internal", "message": "internal error", "field": ""}))
        with self.assertRaises(batchwork.ServerError):
            self.bw.create_schedule({"name": "n", "spec": {}, "expression": "@daily"})
        self.assertEqual(len(self.stub.requests), 1)

    def test_no_answer_is_a_network_error(self) -> None:
        self.stub.close()
        with self.assertRaises(batchwork.NetworkError):
            self.bw.whoami()
        self.assertEqual(len(self.slept), 3)

    def test_a_401_says_where_the_token_would_be(self) -> None:
        bw = batchwork.Client(self.stub.url, batchwork.LocalAuth("alice", "", "set BATCHWORK_LOCAL_TOKEN"))
        self.stub.on("GET", "/whoami", (401, {"code": "unauthenticated", "message": "missing the token",
                                              "field": "Authorization"}))
        with self.assertRaises(batchwork.Unauthorized) as cm:
            bw.whoami()
        self.assertEqual(str(cm.exception), "missing the token (set BATCHWORK_LOCAL_TOKEN)")
        self.assertNotIn("authorization", self.stub.requests[-1]["headers"])

    def test_delete_job_calls_until_nothing_is_left(self) -> None:
        self.stub.on("DELETE", f"/jobs/{JOB}",
                     (202, {"job": JOB, "state": "FAILED", "objects": 10, "records": 5, "complete": False}),
                     (200, {"job": JOB, "state": "FAILED", "objects": 1, "records": 2, "complete": True}))
        d = self.bw.delete_job(JOB)
        self.assertEqual((d.objects, d.records, d.complete), (11, 7, True))

    def test_delete_job_after_a_lost_answer_is_done(self) -> None:
        self.stub.on("DELETE", f"/jobs/{JOB}", (504, {"message": "Endpoint request timed out"}),
                     (404, {"code": "not_found", "message": "no such job", "field": "id"}))
        d = self.bw.delete_job(JOB)
        self.assertTrue(d.complete)
        self.stub.on("DELETE", f"/jobs/{JOB}", (404, {"code": "not_found", "message": "no such job", "field": "id"}))
        with self.assertRaises(batchwork.NotFound):
            self.bw.delete_job(JOB)

    def test_redrive_names_the_count_it_saw(self) -> None:
        self.stub.on("GET", f"/jobs/{JOB}", (200, dict(STATUS, state="FAILED", redrives=2)))
        self.stub.on("POST", f"/jobs/{JOB}/redrive", (200, dict(STATUS, redrives=3)))
        st = self.bw.redrive(JOB)
        self.assertEqual(st.redrives, 3)
        self.assertEqual(json.loads(self.stub.requests[-1]["body"]), {"redrives": 2})

    def test_cancel_task_names_the_task_in_the_query(self) -> None:
        answer = {"jobId": JOB, "task": "map/3", "stage": "map", "partition": 3, "state": "FAILED", "tolerated": True,
                  "error": "task map/3 cancelled by alice", "cancelled": "2026-01-02T15:04:05Z", "jobState": "RUNNING"}
        self.stub.on("POST", f"/jobs/{JOB}/cancel", (200, answer),
                     (409, {"code": "task_ended", "message": "task map/3 already finished", "field": "task"}))
        tc = self.bw.cancel_task(JOB, "map/3")
        self.assertEqual((tc.task, tc.partition, tc.tolerated, tc.job_state), ("map/3", 3, True, "RUNNING"))
        self.assertEqual(self.stub.requests[-1]["query"], {"task": "map/3"})
        with self.assertRaises(batchwork.Conflict) as cm:
            self.bw.cancel_task(JOB, "map/3")
        self.assertEqual(cm.exception.code, "task_ended")

    def test_logs_read_until_a_page_is_empty(self) -> None:
        line = {"time": "2026-01-02T15:04:05Z", "fields": {"msg": "hello", "level": "INFO"}}
        self.stub.on("GET", f"/jobs/{JOB}/logs", (200, {"lines": [line, line], "next": "n1"}),
                     (200, {"lines": [], "next": "n2"}))
        lines = list(self.bw.logs(JOB, task="count/3"))
        self.assertEqual([ln.fields["msg"] for ln in lines], ["hello", "hello"])
        self.assertEqual(self.stub.requests[-1]["query"], {"task": "count/3", "cursor": "n1"})

    def test_result_reads_each_output_through_its_url_without_credentials(self) -> None:
        base = self.stub.url
        self.stub.on("GET", f"/jobs/{JOB}/manifest", (200, {
            "job": JOB, "state": "SUCCEEDED", "complete": True, "bucket": "b",
            "outputs": [{"stage": "s", "partition": i, "attempt": 1, "part": 0, "key": f"k{i}",
                         "url": f"{base}/bucket/k{i}?X-Amz-Signature=x"} for i in range(2)]}))
        self.stub.on("GET", "/bucket/k0", (200, b"zero\n"))
        self.stub.on("GET", "/bucket/k1", (200, b"one\n"))
        self.assertEqual(self.bw.result(JOB), b"zero\none\n")
        for r in self.stub.requests[1:]:
            self.assertNotIn("authorization", r["headers"])
            self.assertNotIn("x-batchwork-owner", r["headers"])


class LocalTokenTest(unittest.TestCase):
    def test_the_token_comes_from_the_env_a_named_file_or_the_ports_file(self) -> None:
        with tempfile.TemporaryDirectory() as d:
            self.assertEqual(batchwork.local_token("http://127.0.0.1:8080", {"BATCHWORK_LOCAL_TOKEN": "t0"}), ("t0", ""))
            named = os.path.join(d, "tok")
            with open(named, "w") as f:
                f.write("t1\n")
            self.assertEqual(batchwork.local_token("http://127.0.0.1:8080", {"BATCHWORK_LOCAL_TOKEN_FILE": named}),
                             ("t1", ""))
            os.makedirs(os.path.join(d, "batchwork"))
            with open(os.path.join(d, "batchwork", "local-9090.token"), "w") as f:
                f.write("t2")
            self.assertEqual(batchwork.local_token("http://127.0.0.1:9090", {"XDG_CONFIG_HOME": d}), ("t2", ""))
            tok, hint = batchwork.local_token("http://127.0.0.1:9191", {"XDG_CONFIG_HOME": d})
            self.assertEqual(tok, "")
            self.assertIn("local-9191.token", hint)
            # Only a loopback address reads the default file: a name could
            # resolve elsewhere and collect the token.
            tok, hint = batchwork.local_token("http://localhost:9090", {"XDG_CONFIG_HOME": d})
            self.assertEqual(tok, "")
            self.assertIn("127.0.0.1", hint)
            with self.assertRaises(batchwork.AuthError):
                batchwork.local_token("http://127.0.0.1:8080", {"BATCHWORK_LOCAL_TOKEN_FILE": os.path.join(d, "none")})

    def test_from_env_picks_the_local_runner_on_loopback(self) -> None:
        bw = batchwork.Client.from_env({"BATCHWORK_ENDPOINT": "http://127.0.0.1:8123", "BATCHWORK_OWNER": "bob",
                                        "BATCHWORK_LOCAL_TOKEN": "t"})
        self.assertIsInstance(bw.auth, batchwork.LocalAuth)
        self.assertEqual((bw.auth.owner, bw.auth.token), ("bob", "t"))
        self.assertNotIn("'t'", repr(bw))
        with self.assertRaises(ValueError):
            batchwork.Client.aws("http://api.example.com", region="eu-west-1")


class SigV4Test(unittest.TestCase):
    def test_region_of_host(self) -> None:
        self.assertEqual(region_of_host("abc123.execute-api.eu-west-1.amazonaws.com"), "eu-west-1")
        self.assertEqual(region_of_host("api.example.com"), "")

    def test_requests_are_signed_for_execute_api(self) -> None:
        try:
            import botocore.session
        except ImportError:
            self.skipTest("botocore is not installed (the [aws] extra)")
        session = botocore.session.Session()
        session.set_credentials("AKIDEXAMPLE", "secret", "session-token")
        endpoint = "https://abc123.execute-api.eu-west-1.amazonaws.com/prod"
        auth = batchwork.SigV4(endpoint, session=session)
        headers = {"Content-Type": "application/json"}
        auth.sign("POST", endpoint + "/jobs", headers, b"{}")
        self.assertTrue(headers["Authorization"].startswith(
            "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/"), headers["Authorization"])
        self.assertIn("/eu-west-1/execute-api/aws4_request", headers["Authorization"])
        self.assertEqual(headers["X-Amz-Security-Token"], "session-token")
        self.assertIn("X-Amz-Date", headers)


if __name__ == "__main__":
    unittest.main()
