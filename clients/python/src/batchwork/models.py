"""The API's answers as dataclasses, one per schema of shared/api/openapi.yaml.

Each field carries its JSON name in its metadata ("json"); a field the
schema requires has no default, an optional one defaults to None. A Go test
(integration/pyclient_models_test.go) holds every model to its schema, so
the two cannot drift. Times are timezone-aware datetimes; answers' fields
this version does not know are ignored, so a newer server still decodes.
"""

from __future__ import annotations

import dataclasses
import re
import sys
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from typing import Any, Dict, List, Mapping, Optional, Tuple, Type, TypeVar, Union, get_type_hints

__all__ = [
    "FieldError", "Identity", "SubmitResult", "JobStatus", "Progress", "StageStatus", "StageCopies",
    "LimitUse", "JobList", "JobSummary", "TaskList", "Task", "TaskCheckpoint", "TaskCopy", "Attempt",
    "LogPage", "LogLine", "History", "Event", "BadRecordPage", "BadRecord", "OutputList", "Output",
    "Schedule", "ScheduleList", "RunList", "ScheduleRun", "DataDeletion", "JobDeletion",
    "TaskCancellation", "SCHEMAS", "decode", "parse_time", "ENDED_STATES",
]

#: The job states a job never leaves.
ENDED_STATES = frozenset({"SUCCEEDED", "FAILED", "CANCELLED"})


def _j(name: str, *, required: bool = False) -> Any:
    """A field named ``name`` in JSON: required (no default) or None by default."""
    if required:
        return field(metadata={"json": name})
    return field(default=None, metadata={"json": name})


def _list(name: str) -> Any:
    """A required array field."""
    return field(metadata={"json": name})


@dataclass(frozen=True)
class FieldError:
    """One problem of an invalid spec: its JSON path and its YAML line."""
    message: str = _j("message", required=True)
    field: Optional[str] = _j("field")
    line: Optional[int] = _j("line")


@dataclass(frozen=True)
class Identity:
    """Who the caller is to Batchwork and where its inputs go."""
    owner: str = _j("owner", required=True)
    owner_key: str = _j("ownerKey", required=True)
    inputs: str = _j("inputs", required=True)
    input_buckets: List[str] = _list("inputBuckets")
    endpoint: Optional[str] = _j("endpoint")


@dataclass(frozen=True)
class SubmitResult:
    """A submission's job; ``created`` is False when the Idempotency-Key
    was used before with the same spec."""
    job_id: str = _j("jobId", required=True)
    created: bool = _j("created", required=True)
    start_at: Optional[datetime] = _j("startAt")


@dataclass(frozen=True)
class Progress:
    tasks_done: int = _j("tasksDone", required=True)
    tasks_total: int = _j("tasksTotal", required=True)
    records_in: int = _j("recordsIn", required=True)
    records_out: int = _j("recordsOut", required=True)
    tasks_per_sec: Optional[float] = _j("tasksPerSec")
    records_per_sec: Optional[float] = _j("recordsPerSec")


@dataclass(frozen=True)
class StageCopies:
    """A stage's speculative copies."""
    launched: int = _j("launched", required=True)
    won: int = _j("won", required=True)
    running: int = _j("running", required=True)


@dataclass(frozen=True)
class StageStatus:
    name: str = _j("name", required=True)
    state: str = _j("state", required=True)
    total: int = _j("total", required=True)
    committed: int = _j("committed", required=True)
    attempts: int = _j("attempts", required=True)
    failures: int = _j("failures", required=True)
    records_in: int = _j("recordsIn", required=True)
    records_out: int = _j("recordsOut", required=True)
    tasks_per_sec: Optional[float] = _j("tasksPerSec")
    records_per_sec: Optional[float] = _j("recordsPerSec")
    eta: Optional[datetime] = _j("eta")
    started: Optional[datetime] = _j("started")
    ended: Optional[datetime] = _j("ended")
    error: Optional[str] = _j("error")
    after: Optional[List[str]] = _j("after")
    shuffle: Optional[int] = _j("shuffle")
    bad_records: Optional[int] = _j("badRecords")
    failed_tasks: Optional[int] = _j("failedTasks")
    copies: Optional[StageCopies] = _j("copies")
    input: Optional[str] = _j("input")


@dataclass(frozen=True)
class LimitUse:
    kind: str = _j("kind", required=True)
    max: int = _j("max", required=True)
    running: int = _j("running", required=True)


@dataclass(frozen=True)
class JobStatus:
    """A job's state, progress and ETA."""
    id: str = _j("id", required=True)
    name: str = _j("name", required=True)
    state: str = _j("state", required=True)
    created: datetime = _j("created", required=True)
    progress: Progress = _j("progress", required=True)
    stages: List[StageStatus] = _list("stages")
    error: Optional[str] = _j("error")
    manifest: Optional[str] = _j("manifest")
    output: Optional[str] = _j("output")
    start_at: Optional[datetime] = _j("startAt")
    started: Optional[datetime] = _j("started")
    ended: Optional[datetime] = _j("ended")
    eta: Optional[datetime] = _j("eta")
    limits: Optional[List[LimitUse]] = _j("limits")
    data_deleted: Optional[datetime] = _j("dataDeleted")
    failed_partitions: Optional[int] = _j("failedPartitions")
    redrives: Optional[int] = _j("redrives")
    rerun_of: Optional[str] = _j("rerunOf")
    params: Optional[Dict[str, str]] = _j("params")
    # What the job's AWS requests cost so far ({"requests", "dollars",
    # "pricesDate"}; docs/operations.md, "What a job cost").
    cost: Optional[Dict[str, Any]] = _j("cost")

    @property
    def done(self) -> bool:
        """The job ended: SUCCEEDED, FAILED or CANCELLED."""
        return self.state in ENDED_STATES


@dataclass(frozen=True)
class JobSummary:
    id: str = _j("id", required=True)
    name: str = _j("name", required=True)
    state: str = _j("state", required=True)
    created: datetime = _j("created", required=True)
    ended: Optional[datetime] = _j("ended")


@dataclass(frozen=True)
class JobList:
    jobs: List[JobSummary] = _list("jobs")
    next_cursor: Optional[str] = _j("nextCursor")


@dataclass(frozen=True)
class TaskCheckpoint:
    """A task's last checkpoint, which a retry or continuation resumes from."""
    attempt: int = _j("attempt", required=True)
    offset: int = _j("offset", required=True)
    continuations: Optional[int] = _j("continuations")


@dataclass(frozen=True)
class TaskCopy:
    """A task's speculative copy."""
    requested: datetime = _j("requested", required=True)
    live: bool = _j("live", required=True)
    attempt: Optional[int] = _j("attempt")
    holder_attempt: Optional[int] = _j("holderAttempt")
    started: Optional[datetime] = _j("started")


@dataclass(frozen=True)
class Attempt:
    attempt: int = _j("attempt", required=True)
    outcome: str = _j("outcome", required=True)
    at: Optional[datetime] = _j("at")
    error: Optional[str] = _j("error")
    executor: Optional[str] = _j("executor")
    started: Optional[datetime] = _j("started")


@dataclass(frozen=True)
class Task:
    id: str = _j("id", required=True)
    stage: str = _j("stage", required=True)
    partition: int = _j("partition", required=True)
    state: str = _j("state", required=True)
    attempt: int = _j("attempt", required=True)
    max_attempts: int = _j("maxAttempts", required=True)
    updated: datetime = _j("updated", required=True)
    attempts: List[Attempt] = _list("attempts")
    lease_until: Optional[datetime] = _j("leaseUntil")
    not_before: Optional[datetime] = _j("notBefore")
    committed_attempt: Optional[int] = _j("committedAttempt")
    outputs: Optional[int] = _j("outputs")
    records_in: Optional[int] = _j("recordsIn")
    records_out: Optional[int] = _j("recordsOut")
    last_error: Optional[str] = _j("lastError")
    error_class: Optional[str] = _j("errorClass")
    tolerated: Optional[bool] = _j("tolerated")
    memory: Optional[str] = _j("memory")
    checkpoint: Optional[TaskCheckpoint] = _j("checkpoint")
    copy: Optional[TaskCopy] = _j("copy")
    trace_id: Optional[str] = _j("traceId")


@dataclass(frozen=True)
class TaskList:
    tasks: List[Task] = _list("tasks")
    next_cursor: Optional[str] = _j("nextCursor")


@dataclass(frozen=True)
class LogLine:
    """One log line: its time and its fields as logged (``msg``, ``level``...)."""
    time: datetime = _j("time", required=True)
    fields: Dict[str, Any] = _list("fields")


@dataclass(frozen=True)
class LogPage:
    lines: List[LogLine] = _list("lines")
    next: str = _j("next", required=True)


@dataclass(frozen=True)
class Event:
    at: datetime = _j("at", required=True)
    type: str = _j("type", required=True)
    stage: Optional[str] = _j("stage")
    task: Optional[str] = _j("task")
    partition: Optional[int] = _j("partition")
    attempt: Optional[int] = _j("attempt")
    message: Optional[str] = _j("message")


@dataclass(frozen=True)
class History:
    events: List[Event] = _list("events")
    next_cursor: Optional[str] = _j("nextCursor")


@dataclass(frozen=True)
class BadRecord:
    stage: str = _j("stage", required=True)
    partition: int = _j("partition", required=True)
    attempt: int = _j("attempt", required=True)
    offset: int = _j("offset", required=True)
    record: str = _j("record", required=True)
    reason: str = _j("reason", required=True)
    omitted: Optional[int] = _j("omitted")


@dataclass(frozen=True)
class BadRecordPage:
    job: str = _j("job", required=True)
    records: List[BadRecord] = _list("records")
    counts: Dict[str, int] = _list("counts")
    next_cursor: Optional[str] = _j("nextCursor")


@dataclass(frozen=True)
class Output:
    """One committed output object; ``url`` is a presigned GET URL when asked for."""
    stage: str = _j("stage", required=True)
    partition: int = _j("partition", required=True)
    attempt: int = _j("attempt", required=True)
    part: int = _j("part", required=True)
    key: str = _j("key", required=True)
    url: Optional[str] = _j("url")
    #: ``"parquet"`` for an output of a stage that writes Parquet files; None for lines.
    format: Optional[str] = _j("format")


@dataclass(frozen=True)
class OutputList:
    job: str = _j("job", required=True)
    state: str = _j("state", required=True)
    complete: bool = _j("complete", required=True)
    bucket: str = _j("bucket", required=True)
    outputs: List[Output] = _list("outputs")
    manifest: Optional[str] = _j("manifest")
    url_expires: Optional[datetime] = _j("urlExpires")
    next_cursor: Optional[str] = _j("nextCursor")


@dataclass(frozen=True)
class Schedule:
    """A recurring job; ``spec`` is its job spec as a JSON object."""
    id: str = _j("id", required=True)
    owner: str = _j("owner", required=True)
    name: str = _j("name", required=True)
    spec: Dict[str, Any] = _list("spec")
    expression: str = _j("expression", required=True)
    overlap: str = _j("overlap", required=True)
    catch_up: str = _j("catchUp", required=True)
    created_at: datetime = _j("createdAt", required=True)
    time_zone: Optional[str] = _j("timeZone")
    start: Optional[datetime] = _j("start")
    end: Optional[datetime] = _j("end")
    paused: Optional[bool] = _j("paused")
    last_fired: Optional[datetime] = _j("lastFired")
    next: Optional[datetime] = _j("next")
    last_job_id: Optional[str] = _j("lastJobId")
    params: Optional[Dict[str, str]] = _j("params")


@dataclass(frozen=True)
class ScheduleList:
    schedules: List[Schedule] = _list("schedules")
    next_cursor: Optional[str] = _j("nextCursor")


@dataclass(frozen=True)
class ScheduleRun:
    scheduled: datetime = _j("scheduled", required=True)
    action: str = _j("action", required=True)
    started_at: Optional[datetime] = _j("startedAt")
    job_id: Optional[str] = _j("jobId")
    status: Optional[str] = _j("status")
    catch_up: Optional[bool] = _j("catchUp")
    through: Optional[datetime] = _j("through")
    missed_count: Optional[int] = _j("missedCount")
    note: Optional[str] = _j("note")


@dataclass(frozen=True)
class RunList:
    runs: List[ScheduleRun] = _list("runs")
    next_cursor: Optional[str] = _j("nextCursor")


@dataclass(frozen=True)
class DataDeletion:
    job: str = _j("job", required=True)
    state: str = _j("state", required=True)
    data_deleted: datetime = _j("dataDeleted", required=True)
    deleted: int = _j("deleted", required=True)
    complete: bool = _j("complete", required=True)


@dataclass(frozen=True)
class JobDeletion:
    job: str = _j("job", required=True)
    state: str = _j("state", required=True)
    objects: int = _j("objects", required=True)
    records: int = _j("records", required=True)
    complete: bool = _j("complete", required=True)


@dataclass(frozen=True)
class TaskCancellation:
    """One task's cancel: the task FAILED as cancelled, whether its stage
    tolerated the failure, its error, and its job's state as the cancel
    left it (FAILED when the task's failure failed it)."""
    job_id: str = _j("jobId", required=True)
    task: str = _j("task", required=True)
    stage: str = _j("stage", required=True)
    partition: int = _j("partition", required=True)
    state: str = _j("state", required=True)
    tolerated: bool = _j("tolerated", required=True)
    error: str = _j("error", required=True)
    cancelled: datetime = _j("cancelled", required=True)
    job_state: str = _j("jobState", required=True)


#: Each model and the schema it follows in openapi.yaml: a schema's name
#: under components/schemas, or for an object declared inline, that name
#: and the path of properties down to it.
SCHEMAS: Dict[type, str] = {
    FieldError: "FieldError",
    Identity: "Identity",
    SubmitResult: "SubmitResult",
    JobStatus: "JobStatus",
    Progress: "Progress",
    StageStatus: "StageStatus",
    StageCopies: "StageStatus.copies",
    LimitUse: "LimitUse",
    JobList: "JobList",
    JobSummary: "JobSummary",
    TaskList: "TaskList",
    Task: "Task",
    TaskCheckpoint: "Task.checkpoint",
    TaskCopy: "Task.copy",
    Attempt: "Attempt",
    LogPage: "LogPage",
    LogLine: "LogLine",
    History: "History",
    Event: "Event",
    BadRecordPage: "BadRecordPage",
    BadRecord: "BadRecord",
    OutputList: "OutputList",
    Output: "Output",
    Schedule: "Schedule",
    ScheduleList: "ScheduleList",
    RunList: "RunList",
    ScheduleRun: "ScheduleRun",
    DataDeletion: "DataDeletion",
    JobDeletion: "JobDeletion",
    TaskCancellation: "TaskCancellation",
}

_TIME = re.compile(r"^(\d{4}-\d{2}-\d{2})[Tt ](\d{2}:\d{2}:\d{2})(?:\.(\d+))?([Zz]|[+-]\d{2}:\d{2})$")


def parse_time(text: str) -> datetime:
    """An RFC 3339 time, as the API writes them (Go's, with up to nine
    fraction digits, which datetime cannot hold: cut to microseconds)."""
    m = _TIME.match(text)
    if m is None:
        raise ValueError(f"not an RFC 3339 time: {text!r}")
    day, clock, frac, zone = m.groups()
    micro = int((frac or "0")[:6].ljust(6, "0"))
    if zone in ("Z", "z"):
        tz = timezone.utc
    else:
        sign = 1 if zone[0] == "+" else -1
        tz = timezone(sign * timedelta(hours=int(zone[1:3]), minutes=int(zone[4:6])))
    return datetime.strptime(f"{day}T{clock}", "%Y-%m-%dT%H:%M:%S").replace(microsecond=micro, tzinfo=tz)


M = TypeVar("M")
_hints: Dict[type, Dict[str, Any]] = {}


def decode(cls: Type[M], data: Mapping[str, Any]) -> M:
    """The model cls from an answer's JSON object."""
    hints = _hints.get(cls)
    if hints is None:
        hints = get_type_hints(cls, vars(sys.modules[cls.__module__]))
        _hints[cls] = hints
    kw: Dict[str, Any] = {}
    for f in dataclasses.fields(cls):  # type: ignore[arg-type]
        name = f.metadata["json"]
        if name in data and data[name] is not None:
            kw[f.name] = _value(hints[f.name], data[name])
        elif f.default is dataclasses.MISSING:
            raise ValueError(f"{cls.__name__}: the answer has no {name!r}")
    return cls(**kw)


def _value(hint: Any, v: Any) -> Any:
    origin = getattr(hint, "__origin__", None)
    args: Tuple[Any, ...] = getattr(hint, "__args__", ())
    if origin is Union:  # Optional[X]
        inner = [a for a in args if a is not type(None)]
        return _value(inner[0], v)
    if origin in (list, List):
        return [_value(args[0], x) for x in v]
    if origin in (dict, Dict):
        return {k: _value(args[1], x) for k, x in v.items()}
    if hint is datetime:
        return parse_time(v)
    if hint is float:
        return float(v)
    if isinstance(hint, type) and dataclasses.is_dataclass(hint):
        return decode(hint, v)
    return v
