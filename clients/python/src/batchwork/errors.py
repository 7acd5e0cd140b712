"""The client's exceptions: one hierarchy under BatchworkError.

An error answer of the API becomes the subclass of its HTTP status (and,
for a 400 about a spec, its code), so callers catch what they can act on:
NotFound, Conflict, InvalidSpec, Throttled and so on. The API's own code
(``not_found``, ``job_ended``, ``quota``...) stays on ``code``.
"""

from __future__ import annotations

import json
from typing import Any, Dict, List, Optional, Type

from .models import FieldError, decode

__all__ = [
    "BatchworkError",
    "BadRequest",
    "InvalidSpec",
    "Unauthorized",
    "Forbidden",
    "NotFound",
    "Conflict",
    "Gone",
    "TooLarge",
    "Throttled",
    "QuotaExceeded",
    "ServerError",
    "Unsupported",
    "NetworkError",
    "AuthError",
    "WaitTimeout",
    "error_from_answer",
]


class BatchworkError(Exception):
    """Any error of the client. ``status`` is the HTTP status (0 when the
    API never answered), ``code`` the API's error code, ``field`` the body
    field, header or parameter at fault ("" when none is)."""

    def __init__(self, message: str, *, status: int = 0, code: str = "", field: str = "",
                 body: Optional[Dict[str, Any]] = None) -> None:
        super().__init__(message)
        self.message = message
        self.status = status
        self.code = code
        self.field = field
        self.body: Dict[str, Any] = body or {}

    def __str__(self) -> str:
        # A bad parameter's message reads after its name ("limit: must be
        # positive"), as the Go client words it.
        if self.code == "invalid_request" and self.field and not self.message.startswith(self.field):
            return f"{self.field}: {self.message}"
        return self.message


class BadRequest(BatchworkError):
    """400: a parameter, header or body field is invalid (``field``)."""


class InvalidSpec(BadRequest):
    """400 ``invalid_spec``: the job spec does not validate; ``errors``
    lists every problem, each with its field path and YAML line."""

    def __init__(self, message: str, *, errors: List[FieldError], **kw: Any) -> None:
        super().__init__(message, **kw)
        self.errors = errors


class Unauthorized(BatchworkError):
    """401: no caller identity (on the local runner: no or a wrong token)."""


class Forbidden(BatchworkError):
    """403: the caller's credentials may not call the API."""


class NotFound(BatchworkError):
    """404: no such job or schedule, or not one of the caller's."""


class Conflict(BatchworkError):
    """409: the request conflicts with the job's state or an earlier
    request (``job_ended``, ``job_running``, ``idempotency_conflict``...)."""


class Gone(BatchworkError):
    """410 ``data_deleted``: the job's data was deleted by its owner."""


class TooLarge(BatchworkError):
    """413: the body is larger than the API takes."""


class Throttled(BatchworkError):
    """429: too many requests; the client retried and gave up."""


class QuotaExceeded(Throttled):
    """429 ``quota``: the caller is at one of its quotas (running jobs,
    declared tasks, schedules); nothing was written. Not retried: waiting
    a moment does not free a quota."""


class ServerError(BatchworkError):
    """5xx: the API or its gateway failed; the client retried and gave up."""


class Unsupported(ServerError):
    """501: this installation cannot do it (``presign_unavailable``,
    ``logs_unavailable``)."""


class NetworkError(BatchworkError):
    """The API never answered (connection refused, reset, timed out)."""


class AuthError(BatchworkError):
    """The request could not be authenticated before it was sent: no AWS
    credentials, no region, or a local token file that is unusable."""


class WaitTimeout(BatchworkError):
    """wait() gave up before the job ended; ``job`` is its last status."""

    def __init__(self, message: str, job: Any) -> None:
        super().__init__(message)
        self.job = job


_BY_STATUS: Dict[int, Type[BatchworkError]] = {
    400: BadRequest,
    401: Unauthorized,
    403: Forbidden,
    404: NotFound,
    409: Conflict,
    410: Gone,
    413: TooLarge,
    429: Throttled,
    501: Unsupported,
}


def error_from_answer(status: int, raw: bytes) -> BatchworkError:
    """The exception for an error answer of the API (or of a gateway or
    proxy in front of it, whose body is not the API's)."""
    body: Dict[str, Any] = {}
    try:
        parsed = json.loads(raw.decode("utf-8"))
        if isinstance(parsed, dict):
            body = parsed
    except (ValueError, UnicodeDecodeError):
        pass
    message = body.get("message") if isinstance(body.get("message"), str) else ""
    code = body.get("code") if isinstance(body.get("code"), str) else ""
    field = body.get("field") if isinstance(body.get("field"), str) else ""
    if not message:
        text = raw.decode("utf-8", "replace").strip()
        if len(text) > 200:
            text = text[:200] + "…"
        message = f"HTTP {status}: {text}"
    if not code:
        code = f"http_{status}"
    kw: Dict[str, Any] = {"status": status, "code": code, "field": field, "body": body}
    if code == "invalid_spec":
        errors = [decode(FieldError, e) for e in body.get("errors") or [] if isinstance(e, dict)]
        return InvalidSpec(message, errors=errors, **kw)
    if code == "quota":
        return QuotaExceeded(message, **kw)
    cls = _BY_STATUS.get(status)
    if cls is None:
        cls = ServerError if status >= 500 else BatchworkError
    return cls(message, **kw)
