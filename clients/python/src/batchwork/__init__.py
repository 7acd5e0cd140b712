"""A client for Batchwork's HTTP API.

    import batchwork
    bw = batchwork.Client.from_env()          # the local runner, or a deployed stack
    job = bw.submit(open("wordcount.yaml").read())
    status = bw.wait(job.job_id)
    print(bw.result(job.job_id).decode())

Client has one method per operation (submit, status, wait, watch,
list_jobs, tasks, history, cancel, outputs, result, logs, redrive, rerun,
delete_job, delete_data, the schedules' and whoami); errors are
BatchworkError subclasses; answers are the dataclasses of batchwork.models.
"""

from .auth import Auth, LocalAuth, SigV4, local_token
from .client import DEFAULT_ENDPOINT, Client, Pager, __version__
from .errors import (AuthError, BadRequest, BatchworkError, Conflict, Forbidden, Gone, InvalidSpec, NetworkError,
                     NotFound, QuotaExceeded, ServerError, Throttled, TooLarge, Unauthorized, Unsupported,
                     WaitTimeout)
from .models import *  # noqa: F401,F403
from .models import __all__ as _models

__all__ = [
    "Client", "Pager", "DEFAULT_ENDPOINT", "__version__",
    "Auth", "LocalAuth", "SigV4", "local_token",
    "BatchworkError", "BadRequest", "InvalidSpec", "Unauthorized", "Forbidden", "NotFound", "Conflict", "Gone",
    "TooLarge", "Throttled", "QuotaExceeded", "ServerError", "Unsupported", "NetworkError", "AuthError",
    "WaitTimeout",
] + [n for n in _models if n[0].isupper()]
