"""The API's shapes as TypedDicts: what the client returns is plain dicts with these keys.

More fields may be added by the service; code should ignore keys it does not know.
"""
from __future__ import annotations

from typing import Any, Dict, List, Literal, Optional, TypedDict, Union

JobStatus = Literal["queued", "processing", "completed", "failed", "cancelled"]
TERMINAL_STATUSES = ("completed", "failed", "cancelled")
ACTIVE_STATUSES = ("queued", "processing")
SLOT_NAMES = ("source", "target", "reference", "audio")
EVENT_TYPES = ("job.completed", "job.failed", "job.cancelled")
ERROR_TYPES = ("media_fetch_failed", "invalid_media", "processing_error", "timeout", "internal_error")
# These lists mirror the service's contract (src/contract/); test/unit/python-contract.test.ts checks them.

#: A duration as the API takes it: "90s", "5m", "1h30m", or a number of seconds.
Duration = Union[str, int, float]


class Progress(TypedDict, total=False):
    """A job's progress: ``stage`` and ``percent`` (0-100 or None)."""

    stage: str
    percent: Optional[float]
    current: int
    total: int


class Job(TypedDict, total=False):
    """A job, as submit, status, cancel, delete and the job list return it."""

    uuid: str
    job_type: str
    model: str
    status: JobStatus
    status_detail: str
    error_type: Optional[str]
    error_message: Optional[str]
    result_ready: bool
    created_at: str
    started_at: Optional[str]
    finished_at: Optional[str]
    # Newer services also send these.
    deadline: Optional[str]
    priority: int
    progress: Optional[Progress]
    data_removed: bool


class ResultLink(TypedDict):
    """``result()``: a signed link that needs no API key."""

    uuid: str
    url: str
    expires_at: str
    content_type: str
    size_bytes: int


class DownloadedResult(ResultLink):
    """``download()``: the link, and where the file was written."""

    path: str


class SlotSpec(TypedDict):
    required: bool
    min: int
    max: int
    accepts: str
    description: str


class ModelInfo(TypedDict):
    name: str
    description: str


class JobTypeInfo(TypedDict):
    """One entry of ``job_types()``."""

    name: str
    description: str
    submit_path: str
    slots: Dict[str, SlotSpec]
    models: List[ModelInfo]
    options: Dict[str, Any]
    body_schema: Dict[str, Any]


class WebhookSettings(TypedDict, total=False):
    """The ``webhook`` of a submit: ``url`` (required), ``secret`` (signs deliveries), ``events``."""

    url: str
    secret: str
    events: List[str]


class BatchItemResult(TypedDict):
    """One entry of ``submit_batch()``: what that item alone would have got."""

    code: int
    message: str
    status: int
    data: Dict[str, Any]


class WebhookJob(TypedDict):
    uuid: str
    status: str
    status_detail: str
    error_message: Optional[str]
    error_type: Optional[str]
    result_ready: bool


class WebhookEvent(TypedDict):
    """A verified webhook delivery's body."""

    event_id: str
    event_type: str
    occurred_at: str
    job: WebhookJob


__all__ = [
    "ACTIVE_STATUSES",
    "BatchItemResult",
    "DownloadedResult",
    "Duration",
    "ERROR_TYPES",
    "EVENT_TYPES",
    "Job",
    "JobStatus",
    "JobTypeInfo",
    "ModelInfo",
    "Progress",
    "ResultLink",
    "SLOT_NAMES",
    "SlotSpec",
    "TERMINAL_STATUSES",
    "WebhookEvent",
    "WebhookJob",
    "WebhookSettings",
]
