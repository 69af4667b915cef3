"""media-jobs: the Python client of the media-jobs service, its webhook verifier and a remote worker.

    from media_jobs import Client, MediaJobsError, verify_webhook

Standard library only, Python 3.9+. ``media_jobs.worker`` is the remote worker (``python3 -m
media_jobs.worker --job-type T -- COMMAND …`` or ``run_worker(handle, …)``).
"""
from ._version import __version__
from .client import Client, JobEvent
from .errors import (
    APIConnectionError,
    AuthenticationError,
    BadRequestError,
    ConflictError,
    GoneError,
    MediaJobsError,
    NotFoundError,
    PermissionDeniedError,
    RateLimitError,
    ServiceUnavailableError,
    WaitTimeoutError,
)
from .types import (
    TERMINAL_STATUSES,
    BatchItemResult,
    DownloadedResult,
    Job,
    JobTypeInfo,
    Progress,
    ResultLink,
    WebhookEvent,
    WebhookSettings,
)
from .webhooks import WebhookVerificationError, compute_signature, compute_standard_signature, verify_webhook

__all__ = [
    "APIConnectionError",
    "AuthenticationError",
    "BadRequestError",
    "BatchItemResult",
    "Client",
    "ConflictError",
    "DownloadedResult",
    "GoneError",
    "Job",
    "JobEvent",
    "JobTypeInfo",
    "MediaJobsError",
    "NotFoundError",
    "PermissionDeniedError",
    "Progress",
    "RateLimitError",
    "ResultLink",
    "ServiceUnavailableError",
    "TERMINAL_STATUSES",
    "WaitTimeoutError",
    "WebhookEvent",
    "WebhookSettings",
    "WebhookVerificationError",
    "__version__",
    "compute_signature",
    "compute_standard_signature",
    "verify_webhook",
]
