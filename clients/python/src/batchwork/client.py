"""The client: one method per operation of Batchwork's API.

A Client sends a request, retries what can be retried (throttling,
server and gateway errors, connection errors) with backoff, and decodes
the answer into the models of batchwork.models; an error answer raises the
BatchworkError subclass of its status and code. List operations return a
Pager, which iterates the items of every page, fetching each page when it
is reached.
"""

from __future__ import annotations

import json
import os
import secrets
import socket
import time
import urllib.error
import urllib.request
from datetime import datetime, timezone
from typing import (Any, Callable, Dict, Generic, Iterator, List, Mapping, Optional, Tuple, Type, TypeVar,
                    Union)
from urllib.parse import quote, urlencode, urlsplit

from . import models as m
from .auth import Auth, LocalAuth, SigV4, is_loopback, local_token
from .errors import (BatchworkError, NetworkError, NotFound, QuotaExceeded, ServerError, Throttled, Unauthorized,
                     WaitTimeout, error_from_answer)

__all__ = ["Client", "Pager", "DEFAULT_ENDPOINT", "__version__"]

__version__ = "0.1.0"

#: The local runner's address when BATCHWORK_ENDPOINT names none, as for the batchwork command.
DEFAULT_ENDPOINT = "http://127.0.0.1:8080"

T = TypeVar("T")
P = TypeVar("P")
Spec = Union[Mapping[str, Any], str, bytes]
#: A query: a dict, or pairs for a name given more than once (param=).
Query = Union[Dict[str, str], List[Tuple[str, str]]]

# Statuses that say the request was not acted on, or may be sent again:
# throttling and the gateway's or server's transient failures.
_RETRIED = frozenset({429, 500, 502, 503, 504})
# Answers read at most this much: a page of the API is far smaller.
_MAX_ANSWER = 64 << 20


class Pager(Generic[T, P]):
    """The pages of a list operation, fetched as they are reached.

    Iterating a Pager yields the items of every page; ``pages()`` yields the
    pages themselves (with their ``next_cursor``), and ``page()`` fetches
    only the first one."""

    def __init__(self, fetch: Callable[[Optional[str]], P], items: Callable[[P], List[T]],
                 cursor: Optional[str] = None) -> None:
        self._fetch = fetch
        self._items = items
        self._cursor = cursor

    def page(self) -> P:
        """The first page (from the cursor the Pager was made with)."""
        return self._fetch(self._cursor)

    def pages(self) -> Iterator[P]:
        cursor = self._cursor
        while True:
            page = self._fetch(cursor)
            yield page
            cursor = getattr(page, "next_cursor", None)
            if not cursor:
                return

    def __iter__(self) -> Iterator[T]:
        for page in self.pages():
            yield from self._items(page)


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    # A redirect would carry the owner header, the token or a signature and
    # the body wherever the server names, https or not. The API never
    # redirects, so a 3xx is an error answer.
    def redirect_request(self, req: Any, fp: Any, code: int, msg: str, headers: Any, newurl: str) -> None:
        return None


def _path(*parts: str) -> str:
    return "/" + "/".join(quote(p, safe="") if i % 2 else p for i, p in enumerate(parts))


def _query(**kv: Any) -> Dict[str, str]:
    q: Dict[str, str] = {}
    for k, v in kv.items():
        if v is None or v == "":
            continue
        if isinstance(v, bool):
            q[k] = "true" if v else "false"
        elif isinstance(v, datetime):
            if v.tzinfo is None:
                raise ValueError(f"{k}: a datetime without a time zone is ambiguous")
            q[k] = v.astimezone(timezone.utc).isoformat().replace("+00:00", "Z")
        else:
            q[k] = str(v)
    return q


def _backoff(attempt: int) -> float:
    """The wait in seconds before the given try (1 for the first retry)."""
    return 0.2 * float(1 << (attempt - 1))


def _key(prefix: str) -> str:
    return prefix + secrets.token_hex(12)


class Client:
    """Calls Batchwork's API at ``endpoint`` (its base URL: an API Gateway
    stage, or the local runner), authenticating each request with ``auth``.

    ``retries`` is how often a request is sent again after throttling, a
    server or gateway error or a connection error (0 sends it once); the
    waits between tries are 0.2 s, doubling. ``timeout`` bounds each try in
    seconds. Use Client.local, Client.aws or Client.from_env to build one
    with the right authentication."""

    def __init__(self, endpoint: str, auth: Optional[Auth] = None, *, retries: int = 3, timeout: float = 30.0,
                 user_agent: str = "", sleep: Callable[[float], None] = time.sleep) -> None:
        parts = urlsplit(endpoint)
        if parts.scheme not in ("http", "https") or not parts.netloc:
            raise ValueError(f"endpoint {endpoint!r} is not an http(s) URL")
        self.endpoint = endpoint.rstrip("/")
        self.auth = auth
        self.retries = retries
        self.timeout = timeout
        self.user_agent = user_agent or f"batchwork-python/{__version__}"
        self._sleep = sleep
        self._opener = urllib.request.build_opener(_NoRedirect)

    def __repr__(self) -> str:
        return f"Client({self.endpoint!r}, auth={self.auth!r})"

    # Construction.

    @classmethod
    def local(cls, endpoint: str = DEFAULT_ENDPOINT, owner: str = "", token: str = "",
              environ: Optional[Mapping[str, str]] = None, **kw: Any) -> "Client":
        """A client of the local runner: ``owner`` is the caller's identity
        there (default: BATCHWORK_OWNER, else USER, else "local"); the token
        is ``token``, else the one local_token finds."""
        env = os.environ if environ is None else environ
        owner = owner or env.get("BATCHWORK_OWNER") or env.get("USER") or "local"
        hint = ""
        if not token:
            token, hint = local_token(endpoint, env)
        return cls(endpoint, LocalAuth(owner, token, hint), **kw)

    @classmethod
    def aws(cls, endpoint: str, region: str = "", profile: str = "", **kw: Any) -> "Client":
        """A client of a deployed stack, signing with SigV4 (needs botocore)."""
        if urlsplit(endpoint).scheme != "https" and not is_loopback(endpoint):
            # A signed request in clear text shows its headers, body and
            # signature to anyone on the path, and invites a replay.
            raise ValueError(f"endpoint {endpoint!r}: signed requests go to https:// endpoints only")
        return cls(endpoint, SigV4(endpoint, region=region, profile=profile), **kw)

    @classmethod
    def from_env(cls, environ: Optional[Mapping[str, str]] = None, **kw: Any) -> "Client":
        """A client set up as the batchwork command sets itself up:
        BATCHWORK_ENDPOINT (default the local runner on 127.0.0.1:8080),
        and BATCHWORK_AUTH (auto, local or sigv4; auto signs unless the
        endpoint is on this machine)."""
        env = os.environ if environ is None else environ
        endpoint = env.get("BATCHWORK_ENDPOINT") or DEFAULT_ENDPOINT
        mode = env.get("BATCHWORK_AUTH") or "auto"
        if mode == "auto":
            mode = "local" if is_loopback(endpoint) else "sigv4"
        if mode == "local":
            return cls.local(endpoint, environ=env, **kw)
        if mode == "sigv4":
            return cls.aws(endpoint, region=env.get("AWS_REGION", ""), profile=env.get("AWS_PROFILE", ""), **kw)
        raise ValueError(f"BATCHWORK_AUTH must be auto, local or sigv4, not {mode!r}")

    # Jobs.

    def submit(self, spec: Spec, *, idempotency_key: str = "",
               params: Optional[Mapping[str, str]] = None,
               at: Optional[datetime] = None) -> m.SubmitResult:
        """Submits a job. ``spec`` is a dict, or JSON or YAML text. The same
        ``idempotency_key`` returns the same job and never makes a second
        one; without one a fresh key is made, which retries reuse.
        ``params`` are values for the spec's run parameters
        (``${params.NAME}``); the same key with other values is a
        Conflict. ``at`` (a datetime with a time zone) starts the job then:
        until then it is WAITING, listed and cancellable."""
        if isinstance(spec, Mapping):
            body = json.dumps(spec).encode()
        elif isinstance(spec, str):
            body = spec.encode()
        else:
            body = bytes(spec)
        ctype = "application/json" if body.lstrip().startswith(b"{") else "application/yaml"
        headers = {"Idempotency-Key": idempotency_key or _key("py-"), "Content-Type": ctype}
        # One param=NAME=VALUE each, in name order, so retries send the same.
        query = list(_query(at=at).items())
        query += [("param", f"{k}={v}") for k, v in sorted((params or {}).items())]
        return self._call(m.SubmitResult, "POST", "/jobs", query=query or None, body=body, headers=headers)

    def status(self, job_id: str) -> m.JobStatus:
        """A job's state, progress and ETA."""
        return self._call(m.JobStatus, "GET", _path("jobs", job_id))

    def watch(self, job_id: str, *, interval: float = 1.0) -> Iterator[m.JobStatus]:
        """Yields the job's status every ``interval`` seconds while it
        changes, the last one when the job has ended."""
        last: Optional[m.JobStatus] = None
        while True:
            st = self.status(job_id)
            if st != last:
                yield st
            last = st
            if st.done:
                return
            self._sleep(interval)

    def wait(self, job_id: str, *, timeout: Optional[float] = None, interval: float = 1.0) -> m.JobStatus:
        """Polls the job until it ends and returns its last status (whatever
        the end: check ``state``). Raises WaitTimeout after ``timeout``
        seconds."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            st = self.status(job_id)
            if st.done:
                return st
            if deadline is not None and time.monotonic() + interval > deadline:
                raise WaitTimeout(f"job {job_id} is still {st.state} after {timeout} s", st)
            self._sleep(interval)

    def list_jobs(self, *, status: str = "", name: str = "", limit: Optional[int] = None,
                  cursor: Optional[str] = None) -> Pager[m.JobSummary, m.JobList]:
        """The caller's jobs, newest first; ``status`` and ``name`` filter."""
        return Pager(lambda c: self._call(m.JobList, "GET", "/jobs",
                                          query=_query(status=status, name=name, limit=limit, cursor=c)),
                     lambda p: p.jobs, cursor)

    def tasks(self, job_id: str, *, stage: str = "", state: str = "", limit: Optional[int] = None,
              cursor: Optional[str] = None) -> Pager[m.Task, m.TaskList]:
        """A job's tasks with their attempts, by stage then partition."""
        return Pager(lambda c: self._call(m.TaskList, "GET", _path("jobs", job_id, "tasks"),
                                          query=_query(stage=stage, state=state, limit=limit, cursor=c)),
                     lambda p: p.tasks, cursor)

    def history(self, job_id: str, *, limit: Optional[int] = None,
                cursor: Optional[str] = None) -> Pager[m.Event, m.History]:
        """A job's lifecycle events, oldest first."""
        return Pager(lambda c: self._call(m.History, "GET", _path("jobs", job_id, "history"),
                                          query=_query(limit=limit, cursor=c)),
                     lambda p: p.events, cursor)

    def cancel(self, job_id: str) -> m.JobStatus:
        """Cancels a running job; it ends CANCELLED. A job that succeeded or
        failed raises Conflict (``job_ended``)."""
        return self._call(m.JobStatus, "POST", _path("jobs", job_id, "cancel"))

    def cancel_task(self, job_id: str, task: str) -> m.TaskCancellation:
        """Cancels one task of a running job, named ``STAGE/PARTITION``
        (``map/3``): its running attempt stops and cannot commit, or,
        waiting, it never starts. It fails without retry; the job goes on
        as the stage's ``toleratedFailures`` allow, or fails naming it.
        Cancelling it again answers the same. A task that committed first
        raises Conflict (``task_ended``); an unknown one NotFound."""
        return self._call(m.TaskCancellation, "POST", _path("jobs", job_id, "cancel"), query=_query(task=task))

    def outputs(self, job_id: str, *, stage: str = "", presign: bool = False, limit: Optional[int] = None,
                cursor: Optional[str] = None) -> Pager[m.Output, m.OutputList]:
        """A job's committed outputs: the manifest of a job that succeeded,
        else (or with ``stage``) those committed so far. With ``presign``
        every output carries a GET URL valid for 15 minutes."""
        return Pager(lambda c: self._call(m.OutputList, "GET", _path("jobs", job_id, "manifest"),
                                          query=_query(stage=stage, presign=presign or None, limit=limit, cursor=c)),
                     lambda p: p.outputs, cursor)

    def result(self, job_id: str, *, stage: str = "") -> bytes:
        """The contents of a job's outputs, in manifest order, as the
        batchwork command's ``result`` prints them."""
        return b"".join(self.read_output(o) for o in self.outputs(job_id, stage=stage, presign=True))

    def read_output(self, output: m.Output) -> bytes:
        """One output's contents, through its presigned URL (which carries
        its own authorization: no header of this client goes with it)."""
        if not output.url:
            raise ValueError("the output has no URL: list the outputs with presign=True")
        if urlsplit(output.url).scheme not in ("http", "https"):
            raise BatchworkError(f"the server gave an output URL that is not http(s): {output.url!r}")
        req = urllib.request.Request(output.url, method="GET")
        try:
            with self._opener.open(req, timeout=self.timeout) as resp:
                data: bytes = resp.read()
                return data
        except urllib.error.HTTPError as e:
            raise BatchworkError(f"download {output.key}: HTTP {e.code}", status=e.code) from None
        except (urllib.error.URLError, OSError) as e:
            raise NetworkError(f"download {output.key}: {e}") from None

    def bad_records(self, job_id: str, *, stage: str = "", limit: Optional[int] = None,
                    cursor: Optional[str] = None) -> Pager[m.BadRecord, m.BadRecordPage]:
        """The input records the job's tasks rejected in committed attempts."""
        return Pager(lambda c: self._call(m.BadRecordPage, "GET", _path("jobs", job_id, "bad-records"),
                                          query=_query(stage=stage, limit=limit, cursor=c)),
                     lambda p: p.records, cursor)

    def log_page(self, job_id: str, *, task: str = "", since: Optional[datetime] = None,
                 limit: Optional[int] = None, cursor: Optional[str] = None) -> m.LogPage:
        """One page of a job's log lines; its ``next`` continues after them."""
        return self._call(m.LogPage, "GET", _path("jobs", job_id, "logs"),
                          query=_query(task=task, since=None if cursor else since, limit=limit, cursor=cursor))

    def logs(self, job_id: str, *, task: str = "", since: Optional[datetime] = None, follow: bool = False,
             interval: float = 2.0) -> Iterator[m.LogLine]:
        """A job's log lines, oldest first (``task`` is STAGE/PARTITION).
        With ``follow`` it waits for new lines until the job has ended and
        its last lines are read."""
        cursor: Optional[str] = None
        ended = False
        while True:
            page = self.log_page(job_id, task=task, since=since, cursor=cursor)
            yield from page.lines
            cursor = page.next
            if page.lines:
                continue
            if not follow or ended:
                return
            # One more page after the job is seen ended: its last lines.
            ended = self.status(job_id).done
            if not ended:
                self._sleep(interval)

    def redrive(self, job_id: str, *, redrives: Optional[int] = None) -> m.JobStatus:
        """Retries a FAILED job's unfinished tasks in place. ``redrives`` is
        the redrive count the caller saw (the status's); without it the
        current status is read, so a retried request never redrives twice."""
        if redrives is None:
            redrives = self.status(job_id).redrives or 0
        body = json.dumps({"redrives": redrives}).encode()
        return self._call(m.JobStatus, "POST", _path("jobs", job_id, "redrive"), body=body,
                          headers={"Content-Type": "application/json"})

    def rerun(self, job_id: str, *, from_stage: str = "", idempotency_key: str = "") -> m.SubmitResult:
        """Runs an ended job again as a new job, reusing its committed
        outputs: every stage but ``from_stage`` and those after it (without
        one, the stages that completed)."""
        body = json.dumps({"from": from_stage} if from_stage else {}).encode()
        headers = {"Idempotency-Key": idempotency_key or _key("py-rerun-"), "Content-Type": "application/json"}
        return self._call(m.SubmitResult, "POST", _path("jobs", job_id, "rerun"), body=body, headers=headers)

    def delete_job(self, job_id: str) -> m.JobDeletion:
        """Deletes an ended job, its records and its data, calling again
        until nothing is left. Returns the totals of every call."""
        objects = records = 0
        state = ""
        lost = False
        while True:
            d: Optional[m.JobDeletion] = None
            for attempt in range(self.retries + 1):
                if attempt:
                    self._sleep(_backoff(attempt))
                try:
                    d = self._call(m.JobDeletion, "DELETE", _path("jobs", job_id), retries=0)
                    break
                except NotFound:
                    # A try whose answer was lost may have finished the
                    # deletion: then the job is gone, not unknown.
                    if lost:
                        return m.JobDeletion(job=job_id, state=state, objects=objects, records=records, complete=True)
                    raise
                except (NetworkError, ServerError, Throttled) as e:
                    if isinstance(e, QuotaExceeded) or e.status in (500, 501) or attempt == self.retries:
                        raise
                    lost = lost or isinstance(e, NetworkError) or e.status in (502, 504)
            assert d is not None
            objects, records, state = objects + d.objects, records + d.records, state or d.state
            if d.complete:
                return m.JobDeletion(job=d.job, state=state, objects=objects, records=records, complete=True)

    def delete_data(self, job_id: str) -> m.DataDeletion:
        """Deletes an ended job's data (never its inputs or its published
        folder), calling again until nothing is left. Returns the last
        answer, with ``deleted`` the total of every call."""
        total = 0
        while True:
            d = self._call(m.DataDeletion, "DELETE", _path("jobs", job_id, "data"))
            total += d.deleted
            if d.complete:
                return m.DataDeletion(job=d.job, state=d.state, data_deleted=d.data_deleted, deleted=total,
                                      complete=True)

    # Schedules.

    def create_schedule(self, schedule: Union[Mapping[str, Any], str, bytes]) -> m.Schedule:
        """Creates a schedule from a dict or JSON text: ``name``, ``spec``
        (a job spec object), ``expression`` (cron, a descriptor such as
        "@daily", or "rate(5 minutes)") and optional ``params`` (run
        parameters every firing sets, beside its ``scheduledTime`` and
        ``scheduledDate``), ``timeZone``, ``start``, ``end``, ``overlap``,
        ``catchUp`` and ``paused``."""
        if isinstance(schedule, Mapping):
            body = json.dumps(schedule).encode()
        elif isinstance(schedule, str):
            body = schedule.encode()
        else:
            body = bytes(schedule)
        # Not idempotent: a try whose answer was lost may have created it.
        return self._call(m.Schedule, "POST", "/schedules", body=body,
                          headers={"Content-Type": "application/json"}, idempotent=False)

    def get_schedule(self, schedule_id: str) -> m.Schedule:
        return self._call(m.Schedule, "GET", _path("schedules", schedule_id))

    def list_schedules(self, *, limit: Optional[int] = None,
                       cursor: Optional[str] = None) -> Pager[m.Schedule, m.ScheduleList]:
        """The caller's schedules, oldest first."""
        return Pager(lambda c: self._call(m.ScheduleList, "GET", "/schedules", query=_query(limit=limit, cursor=c)),
                     lambda p: p.schedules, cursor)

    def pause_schedule(self, schedule_id: str) -> m.Schedule:
        return self._call(m.Schedule, "POST", _path("schedules", schedule_id, "pause"))

    def resume_schedule(self, schedule_id: str) -> m.Schedule:
        return self._call(m.Schedule, "POST", _path("schedules", schedule_id, "resume"))

    def delete_schedule(self, schedule_id: str) -> None:
        """Deletes a schedule: it fires no more; its jobs and runs are kept."""
        self._send("DELETE", _path("schedules", schedule_id))

    def schedule_runs(self, schedule_id: str, *, limit: Optional[int] = None,
                      cursor: Optional[str] = None) -> Pager[m.ScheduleRun, m.RunList]:
        """A schedule's runs, newest first."""
        return Pager(lambda c: self._call(m.RunList, "GET", _path("schedules", schedule_id, "runs"),
                                          query=_query(limit=limit, cursor=c)),
                     lambda p: p.runs, cursor)

    def whoami(self) -> m.Identity:
        """The caller's owner and inputs area."""
        return self._call(m.Identity, "GET", "/whoami")

    # Transport.

    def _call(self, model: Type[T], method: str, path: str, *, query: Optional[Query] = None,
              body: Optional[bytes] = None, headers: Optional[Dict[str, str]] = None, idempotent: bool = True,
              retries: Optional[int] = None) -> T:
        """Sends a request (as _send) and decodes its answer into model."""
        raw = self._send(method, path, query=query, body=body, headers=headers, idempotent=idempotent, retries=retries)
        try:
            data = json.loads(raw.decode("utf-8"))
            if not isinstance(data, dict):
                raise ValueError("not a JSON object")
            return m.decode(model, data)
        except (ValueError, TypeError, KeyError, AttributeError) as e:
            raise BatchworkError(f"decode the answer of {method} {path}: {e}") from None

    def _send(self, method: str, path: str, *, query: Optional[Query] = None, body: Optional[bytes] = None,
              headers: Optional[Dict[str, str]] = None, idempotent: bool = True,
              retries: Optional[int] = None) -> bytes:
        """Sends a request, retrying it (``retries`` times, default the
        client's) after throttling, a server or gateway error or a
        connection error; returns the body of its 2xx answer."""
        url = self.endpoint + path
        if query:
            url += "?" + urlencode(query)
        payload = body if body is not None else b""
        last: Optional[BatchworkError] = None
        for attempt in range((self.retries if retries is None else retries) + 1):
            if attempt:
                self._sleep(_backoff(attempt))
            h = {"Accept": "application/json", "User-Agent": self.user_agent}
            h.update(headers or {})
            if self.auth is not None:
                self.auth.sign(method, url, h, payload)
            req = urllib.request.Request(url, data=body, headers=h, method=method)
            try:
                with self._opener.open(req, timeout=self.timeout) as resp:
                    answer: bytes = resp.read(_MAX_ANSWER)
                    return answer
            except urllib.error.HTTPError as e:
                err = error_from_answer(e.code, e.read(_MAX_ANSWER))
                e.close()
                if isinstance(err, Unauthorized) and isinstance(self.auth, LocalAuth) and self.auth.hint:
                    err.message += f" ({self.auth.hint})"
                    err.args = (err.message,)
                if e.code not in _RETRIED or isinstance(err, QuotaExceeded):
                    raise err from None
                # Throttling was not acted on; a server or gateway error
                # may have been, which only an idempotent request repeats.
                if e.code != 429 and not idempotent:
                    raise err from None
                last = err
            except (urllib.error.URLError, ConnectionError, socket.timeout, OSError) as e:
                reason = getattr(e, "reason", e)
                last = NetworkError(f"cannot reach the API at {self.endpoint}: {reason}")
                refused = isinstance(reason, ConnectionRefusedError)
                if not idempotent and not refused:
                    raise last from None
        assert last is not None
        raise last
