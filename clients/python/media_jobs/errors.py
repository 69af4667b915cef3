"""The errors the client raises: one class per HTTP status worth catching, all MediaJobsError."""
from __future__ import annotations

from typing import Any, Dict, Optional, Type

from .types import Job


class MediaJobsError(Exception):
    """An error answered by the API (HTTP status >= 400, message from the envelope) or no answer.

    ``status`` is the HTTP status (0 when no response came: a network error, a timeout),
    ``message`` the envelope's reason, ``request_id`` the response's X-Request-Id (quote it when
    reporting a problem), ``body`` the parsed body when there was one, ``retry_after`` seconds
    from Retry-After when the service sent one.
    """

    def __init__(
        self,
        message: str,
        status: int = 0,
        request_id: Optional[str] = None,
        body: Any = None,
        retry_after: Optional[float] = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.status = status
        self.request_id = request_id
        self.body = body
        self.retry_after = retry_after

    def __str__(self) -> str:
        where = " (HTTP %d" % self.status if self.status else " (no response"
        rid = ", request %s" % self.request_id if self.request_id else ""
        return "%s%s%s)" % (self.message, where, rid)


class BadRequestError(MediaJobsError):
    """400: the request is invalid; ``message`` names the field."""


class AuthenticationError(MediaJobsError):
    """401: a missing, unknown or revoked API key."""


class PermissionDeniedError(MediaJobsError):
    """403."""


class NotFoundError(MediaJobsError):
    """404: no such job (another owner's job answers the same)."""


class ConflictError(MediaJobsError):
    """409: the job is not in a state for this (a terminal job cancelled, a result not ready yet,
    an Idempotency-Key reused with a different body)."""


class GoneError(MediaJobsError):
    """410: the result (or the job's data) has been removed."""


class RateLimitError(MediaJobsError):
    """429: too many requests; ``retry_after`` says when to try again (seconds)."""


class ServiceUnavailableError(MediaJobsError):
    """503: the service (or its database) is temporarily unavailable."""


class APIConnectionError(MediaJobsError):
    """No response: the connection failed, was cut, or timed out (``status`` 0)."""


class WaitTimeoutError(MediaJobsError):
    """``Client.wait`` ran out of time; ``job`` is the last state seen (or None)."""

    def __init__(self, message: str, job: Optional[Job]) -> None:
        super().__init__(message, 0)
        self.job = job


_BY_STATUS: Dict[int, Type[MediaJobsError]] = {
    400: BadRequestError,
    401: AuthenticationError,
    403: PermissionDeniedError,
    404: NotFoundError,
    409: ConflictError,
    410: GoneError,
    429: RateLimitError,
    503: ServiceUnavailableError,
}


def error_for(
    status: int,
    message: str,
    request_id: Optional[str] = None,
    body: Any = None,
    retry_after: Optional[float] = None,
) -> MediaJobsError:
    """The MediaJobsError subclass for an HTTP status."""
    cls = _BY_STATUS.get(status, MediaJobsError)
    return cls(message, status, request_id, body, retry_after)
