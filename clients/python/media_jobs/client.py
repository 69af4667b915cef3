"""The media-jobs API V1 client: standard library only (urllib), Python 3.9+.

    from media_jobs import Client

    client = Client()  # MEDIA_JOBS_URL and MEDIA_JOBS_API_KEY
    job = client.submit("image-transform", model="lanczos3", input={"source": url, "width": 512})
    done = client.wait(job["uuid"])
    if done["status"] == "completed":
        client.download(done["uuid"], "out.jpg")

Transient failures (connection errors, timeouts, 429 and 5xx) are retried with backoff, honouring
Retry-After; a 4xx is never retried. A submit (and a batch) is retried with the same
Idempotency-Key, so a retry never makes a second job.
"""
from __future__ import annotations

import datetime
import email.utils
import http.client
import json
import os
import random
import time
import urllib.error
import urllib.parse
import urllib.request
import uuid as uuidlib
from dataclasses import dataclass
from typing import Any, Callable, Dict, Generator, Iterable, Iterator, List, Mapping, Optional, Sequence, Tuple, Union, cast

from ._version import __version__
from .errors import APIConnectionError, ConflictError, MediaJobsError, WaitTimeoutError, error_for
from .types import (
    TERMINAL_STATUSES,
    BatchItemResult,
    DownloadedResult,
    Duration,
    Job,
    JobTypeInfo,
    ResultLink,
    WebhookSettings,
)

DEFAULT_URL = "http://localhost:8080"
#: The service holds a status long poll at most this long.
MAX_LONG_POLL = 60
#: An open event stream gets a keep-alive comment every 15 s; reading waits at least this long.
STREAM_READ_TIMEOUT = 45.0

DurationArg = Union[Duration, datetime.timedelta]


@dataclass(frozen=True)
class JobEvent:
    """One message of ``Client.events``: ``type`` is ``"status"`` (the first state and every status
    change) or ``"progress"`` (a change within a status: status_detail or progress); ``job`` the
    job as the stream sent it."""

    type: str
    job: Job


def _duration(value: Optional[DurationArg]) -> Optional[Duration]:
    if isinstance(value, datetime.timedelta):
        seconds = value.total_seconds()
        return int(seconds) if seconds == int(seconds) else seconds
    return value


def _retry_after(value: Optional[str]) -> Optional[float]:
    if not value:
        return None
    value = value.strip()
    if value.isdigit():
        return float(value)
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())


def _is_terminal(job: Mapping[str, Any]) -> bool:
    return job.get("status") in TERMINAL_STATUSES


class Client:
    """A client of one media-jobs service.

    ``base_url`` is the service's root (``…/api/v1`` is accepted too), default ``MEDIA_JOBS_URL``
    or http://localhost:8080; ``api_key`` defaults to ``MEDIA_JOBS_API_KEY``; ``timeout`` is the
    per-request time limit in seconds (a long poll adds its wait). ``retries`` (default 3) is how
    often a transient failure is retried, ``retry_delay`` the first backoff (doubling, with
    jitter), ``max_retry_delay`` the longest single wait (a longer Retry-After is raised instead).
    """

    def __init__(
        self,
        base_url: Optional[str] = None,
        api_key: Optional[str] = None,
        timeout: float = 30,
        *,
        retries: int = 3,
        retry_delay: float = 0.25,
        max_retry_delay: float = 30.0,
        user_agent: Optional[str] = None,
    ) -> None:
        url = base_url or os.environ.get("MEDIA_JOBS_URL") or DEFAULT_URL
        parts = urllib.parse.urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.netloc:
            raise ValueError("base_url must be the service's http(s) URL, e.g. http://localhost:8080 (got %r)" % url)
        path = parts.path.rstrip("/")
        if path.endswith("/api/v1"):
            path = path[: -len("/api/v1")]
        self.base_url = "%s://%s%s" % (parts.scheme, parts.netloc, path)
        key = api_key or os.environ.get("MEDIA_JOBS_API_KEY")
        if not key:
            raise ValueError("api_key is required (or set MEDIA_JOBS_API_KEY): `media-jobs keys create --owner NAME`")
        self._api_key = key
        self.timeout = float(timeout)
        self.retries = max(0, int(retries))
        self.retry_delay = float(retry_delay)
        self.max_retry_delay = float(max_retry_delay)
        self.user_agent = user_agent or "media-jobs-python/%s" % __version__
        self._opener = urllib.request.build_opener()
        self._long_poll = True  # False once the service is seen to answer `?wait=` at once

    def __repr__(self) -> str:
        return "Client(base_url=%r)" % self.base_url

    # -- jobs -------------------------------------------------------------------------------------

    def submit(
        self,
        job_type: str,
        *,
        model: str,
        input: Mapping[str, Any],
        webhook: Optional[WebhookSettings] = None,
        idempotency_key: Optional[str] = None,
        cancel_after: Optional[DurationArg] = None,
        priority: Optional[int] = None,
        retention: Optional[DurationArg] = None,
    ) -> Job:
        """Submits a job and returns it (``queued``). ``input`` holds the media slots (a URL or a
        list of URLs) and the options; ``webhook`` is ``{"url", "secret"?, "events"?}``.
        ``cancel_after`` and ``retention`` are durations ("90s", "5m", seconds, a timedelta);
        ``priority`` is -600..600 (seconds of head start among your own jobs). An Idempotency-Key
        (``idempotency_key``, or a random one) is sent and reused by this call's own retries."""
        body: Dict[str, Any] = {"job_type": job_type, "model": model, "input": dict(input)}
        if webhook is not None:
            body["webhook"] = dict(webhook)
        if cancel_after is not None:
            body["cancel_after"] = _duration(cancel_after)
        if priority is not None:
            body["priority"] = priority
        if retention is not None:
            body["retention"] = _duration(retention)
        key = idempotency_key or str(uuidlib.uuid4())
        data, _ = self._call(
            "POST", "/jobs/submit/%s" % _seg(job_type), body=body, headers={"Idempotency-Key": key}
        )
        return cast(Job, data)

    def submit_batch(
        self, items: Iterable[Mapping[str, Any]], *, idempotency_key: Optional[str] = None
    ) -> List[BatchItemResult]:
        """Submits many jobs in one request (``POST /jobs/batch``). Each item is a submit body with
        its ``job_type`` (and optionally ``idempotency_key``, ``cancel_after``, ``priority``,
        ``retention``). Items are independent: the answer has one entry per item, in order, with
        the HTTP ``status`` that item alone would have got and its job in ``data`` (or ``{}``).
        An item without its own key gets ``KEY:INDEX`` of the batch's Idempotency-Key (a random
        one unless given), so a retried batch makes no second job."""
        jobs = []
        for item in items:
            body = dict(item)
            for field in ("cancel_after", "retention"):
                if field in body:
                    body[field] = _duration(body[field])
            jobs.append(body)
        key = idempotency_key or str(uuidlib.uuid4())
        data, _ = self._call("POST", "/jobs/batch", body={"jobs": jobs}, headers={"Idempotency-Key": key})
        return cast(List[BatchItemResult], data["items"])

    def status(self, uuid: str, wait: Optional[float] = None) -> Job:
        """The job's current state. With ``wait`` (seconds, up to 60) a long poll: the service
        answers as soon as the job is terminal, or after ``wait`` seconds."""
        seconds = 0 if wait is None else max(0, min(MAX_LONG_POLL, int(wait)))
        data, _ = self._call(
            "GET",
            "/jobs/%s/status" % _seg(uuid),
            query={"wait": seconds} if seconds else None,
            extra_timeout=seconds,
        )
        return cast(Job, data)

    def wait(
        self,
        uuid: str,
        timeout: Optional[float] = 600,
        *,
        on_update: Optional[Callable[[Job], None]] = None,
        poll_interval: float = 0.5,
    ) -> Job:
        """Waits until the job is terminal and returns it, whatever its state (a failed job is
        returned, not raised: check ``status``). Long-polls the status (it learns of the end at
        once); ``on_update`` is called with the first state seen and every change. Raises
        WaitTimeoutError (with the last ``job`` seen) after ``timeout`` seconds (None: no limit)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        longest = 2 if on_update else 30
        delay = poll_interval
        last: Optional[Job] = None
        last_seen = ""
        early = 0
        while True:
            remaining = None if deadline is None else deadline - time.monotonic()
            if remaining is not None and remaining <= 0:
                seen = " (last seen %s: %s)" % (last["status"], last["status_detail"]) if last else ""
                raise WaitTimeoutError("timed out after %gs waiting for job %s%s" % (timeout or 0, uuid, seen), last)
            first = last is None
            wait_s = 0
            if self._long_poll and not first:
                wait_s = int(min(longest, remaining if remaining is not None else longest))
            started = time.monotonic()
            job = self.status(uuid, wait=wait_s or None)
            seen_now = json.dumps(job, sort_keys=True)
            changed = seen_now != last_seen
            if changed:
                last, last_seen = job, seen_now
                if on_update:
                    on_update(job)
            if _is_terminal(job):
                return job
            if wait_s > 0:
                if changed or time.monotonic() - started >= wait_s / 2:
                    continue
                early += 1  # nothing changed, yet it answered well before the wait was up
                if early >= 2:
                    self._long_poll = False
            elif first and self._long_poll:
                continue
            if changed:
                delay = poll_interval
            pause = delay if deadline is None else max(0.0, min(delay, deadline - time.monotonic()))
            time.sleep(pause)
            delay = min(delay * 1.5, 5.0)

    def cancel(self, uuid: str) -> Job:
        """Cancels a queued or processing job; a terminal one raises ConflictError (409)."""
        attempts = [0]

        def count() -> None:
            attempts[0] += 1

        try:
            data, _ = self._call("POST", "/jobs/%s/cancel" % _seg(uuid), on_attempt=count)
            return cast(Job, data)
        except ConflictError:
            # A retry after a lost response finds the job already cancelled: that is our own cancel.
            if attempts[0] > 1:
                job = self.status(uuid)
                if job.get("status") == "cancelled":
                    return job
            raise

    def result(self, uuid: str) -> ResultLink:
        """The signed result link ``{uuid, url, expires_at, content_type, size_bytes}``; 409
        (ConflictError) while not ready, 410 (GoneError) once removed."""
        data, _ = self._call("GET", "/jobs/%s/result" % _seg(uuid))
        return cast(ResultLink, data)

    def download(self, uuid: str, path: Union[str, "os.PathLike[str]"]) -> DownloadedResult:
        """Downloads a completed job's result to ``path``: written to a temporary file beside it and
        renamed once complete and of the announced size. The signed URL gets no API key (it may
        point at S3); an expired link (403) is renewed on the next attempt."""
        target = os.fspath(path)
        last_error: Optional[MediaJobsError] = None
        for attempt in range(self.retries + 1):
            if attempt:
                time.sleep(self._backoff(attempt - 1))
            link = self.result(uuid)
            tmp = "%s.%s.part" % (target, uuidlib.uuid4().hex[:8])
            req = urllib.request.Request(link["url"], headers={"User-Agent": self.user_agent})
            try:
                size = 0
                with self._opener.open(req, timeout=self.timeout) as res, open(tmp, "wb") as out:
                    while True:
                        chunk = res.read(1 << 16)
                        if not chunk:
                            break
                        out.write(chunk)
                        size += len(chunk)
                if size != link["size_bytes"]:
                    raise APIConnectionError(
                        "download of %s is truncated: %d of %d bytes" % (uuid, size, link["size_bytes"])
                    )
                os.replace(tmp, target)
                done = dict(link)
                done["path"] = target
                return cast(DownloadedResult, done)
            except urllib.error.HTTPError as e:
                err = self._error(e.code, e.headers, _read_quietly(e), "download of %s failed" % uuid)
                if not (e.code >= 500 or e.code in (403, 429)):
                    raise err from None
                last_error = err
            except MediaJobsError as e:
                last_error = e
            except (OSError, http.client.HTTPException) as e:
                last_error = APIConnectionError("download of %s failed: %s" % (uuid, _describe(e)))
            finally:
                if os.path.exists(tmp):
                    os.unlink(tmp)
        assert last_error is not None
        raise last_error

    def delete(self, uuid: str) -> Job:
        """Deletes a terminal job's data (``DELETE /jobs/{uuid}``): its result, input and webhook
        are removed and the job stays as a tombstone (``data_removed: true``). A job still queued
        or processing raises ConflictError (cancel it first). Repeating it answers the same."""
        data, _ = self._call("DELETE", "/jobs/%s" % _seg(uuid))
        return cast(Job, data)

    def jobs(self, status: Optional[str] = None, job_type: Optional[str] = None, *, limit: int = 100) -> Iterator[Job]:
        """Every job of the caller matching the filters, newest first, page after page
        (``limit`` per request)."""
        cursor: Optional[str] = None
        while True:
            query = {"status": status, "job_type": job_type, "limit": limit, "cursor": cursor}
            data, _ = self._call("GET", "/jobs", query=query)
            for job in data["jobs"]:
                yield cast(Job, job)
            cursor = data.get("next_cursor")
            if not cursor:
                return

    def job_types(self) -> List[JobTypeInfo]:
        """The job types the service runs: slots, models, options and the submit body's schema."""
        data, _ = self._call("GET", "/job-types")
        return cast(List[JobTypeInfo], data["job_types"])

    def webhook_deliveries(self, uuid: str) -> List[Dict[str, Any]]:
        """A job's webhook events and their delivery attempts."""
        data, _ = self._call("GET", "/jobs/%s/webhook-deliveries" % _seg(uuid))
        return cast(List[Dict[str, Any]], data["deliveries"])

    def redeliver_webhook(self, uuid: str, event_id: str) -> Dict[str, Any]:
        """Sends a webhook event again now (same event id and body)."""
        data, _ = self._call("POST", "/jobs/%s/webhook-deliveries/%s/redeliver" % (_seg(uuid), _seg(event_id)))
        return data

    def create_webhook_endpoint(
        self, url: str, events: Optional[Sequence[str]] = None, description: Optional[str] = None
    ) -> Dict[str, Any]:
        """Registers an endpoint that receives every subscribed event of all your jobs; its
        ``secret`` (``whsec_…``) signs them."""
        body: Dict[str, Any] = {"url": url}
        if events is not None:
            body["events"] = list(events)
        if description is not None:
            body["description"] = description
        data, _ = self._call("POST", "/webhook-endpoints", body=body)
        return data

    def webhook_endpoints(self) -> List[Dict[str, Any]]:
        """Your endpoints, newest first."""
        data, _ = self._call("GET", "/webhook-endpoints")
        return cast(List[Dict[str, Any]], data["endpoints"])

    def webhook_endpoint(self, endpoint_id: str) -> Dict[str, Any]:
        data, _ = self._call("GET", "/webhook-endpoints/%s" % _seg(endpoint_id))
        return data

    def update_webhook_endpoint(self, endpoint_id: str, **changes: Any) -> Dict[str, Any]:
        """Changes ``url``, ``events`` or ``description``."""
        data, _ = self._call("PATCH", "/webhook-endpoints/%s" % _seg(endpoint_id), body=changes)
        return data

    def delete_webhook_endpoint(self, endpoint_id: str) -> None:
        self._call("DELETE", "/webhook-endpoints/%s" % _seg(endpoint_id))

    def rotate_webhook_endpoint_secret(self, endpoint_id: str) -> str:
        """A new secret; deliveries are signed with the old one too for WEBHOOK_SECRET_OVERLAP."""
        data, _ = self._call("POST", "/webhook-endpoints/%s/rotate-secret" % _seg(endpoint_id))
        return cast(str, data["secret"])

    def enable_webhook_endpoint(self, endpoint_id: str) -> Dict[str, Any]:
        """Turns a disabled endpoint back on (what was skipped stays skipped: see recover)."""
        data, _ = self._call("POST", "/webhook-endpoints/%s/enable" % _seg(endpoint_id))
        return data

    def recover_webhook_endpoint(self, endpoint_id: str, since: Union[str, "datetime.datetime"]) -> int:
        """Queues again every failed or skipped delivery of events since ``since``; returns how many."""
        when = since if isinstance(since, str) else since.isoformat()
        data, _ = self._call("POST", "/webhook-endpoints/%s/recover" % _seg(endpoint_id), body={"since": when})
        return cast(int, data["count"])

    def webhook_endpoint_deliveries(
        self, endpoint_id: str, limit: Optional[int] = None, cursor: Optional[str] = None
    ) -> Dict[str, Any]:
        """One page of an endpoint's deliveries, newest first: ``{"deliveries", "next_cursor"}``."""
        data, _ = self._call(
            "GET", "/webhook-endpoints/%s/deliveries" % _seg(endpoint_id), query={"limit": limit, "cursor": cursor}
        )
        return data

    def events(self, uuid: str) -> Generator[JobEvent, None, None]:
        """Follows a job through its Server-Sent Events stream (``GET /jobs/{uuid}/events``):
        yields a ``status`` event for the current state and each status change, a ``progress``
        event when only the detail or progress changes, and ends after the terminal state. A
        dropped stream is reopened (with the usual retries and backoff); a state already yielded
        is not yielded again.

            for event in client.events(uuid):
                print(event.type, event.job["status"], event.job["status_detail"])
        """
        url = self._url("/jobs/%s/events" % _seg(uuid))
        headers = {"Accept": "text/event-stream", "Authorization": "Bearer " + self._api_key, "User-Agent": self.user_agent}
        last: Optional[Job] = None
        last_key: Optional[Tuple[Any, ...]] = None
        failures = 0
        while True:
            try:
                res = self._opener.open(urllib.request.Request(url, headers=headers), timeout=max(self.timeout, STREAM_READ_TIMEOUT))
            except urllib.error.HTTPError as e:
                err = self._error(e.code, e.headers, _read_quietly(e), "GET %s failed" % urllib.parse.urlsplit(url).path)
                if (e.code >= 500 or e.code == 429) and failures < self.retries:
                    delay = err.retry_after if err.retry_after is not None else self._backoff(failures)
                    failures += 1
                    time.sleep(min(delay, self.max_retry_delay))
                    continue
                raise err from None
            except (OSError, http.client.HTTPException) as e:
                if failures >= self.retries:
                    raise APIConnectionError("GET %s failed: %s" % (urllib.parse.urlsplit(url).path, _describe(e))) from e
                time.sleep(self._backoff(failures))
                failures += 1
                continue
            try:
                for name, data in _sse_messages(res):
                    failures = 0
                    if name == "error":
                        break  # the service could not read the job: reconnect
                    if name not in ("status", "progress"):
                        continue
                    job = cast(Job, json.loads(data))
                    key = (job.get("status"), job.get("status_detail"), json.dumps(job.get("progress"), sort_keys=True))
                    if key == last_key:
                        continue
                    kind = "status" if last is None or last.get("status") != job.get("status") else "progress"
                    last, last_key = job, key
                    yield JobEvent(kind, job)
                    if _is_terminal(job):
                        return
            except (OSError, http.client.HTTPException, ValueError) as e:
                if failures >= self.retries:
                    raise APIConnectionError("the event stream of %s broke: %s" % (uuid, _describe(e))) from e
            finally:
                res.close()
            # The stream ended early (a proxy, a restart): reconnect after a backoff.
            time.sleep(self._backoff(failures))
            failures += 1

    # -- the transport ----------------------------------------------------------------------------

    def _url(self, path: str, query: Optional[Mapping[str, Any]] = None) -> str:
        url = "%s/api/v1%s" % (self.base_url, path)
        if query:
            pairs = [(k, str(v)) for k, v in query.items() if v is not None and v != ""]
            if pairs:
                url += "?" + urllib.parse.urlencode(pairs)
        return url

    def _backoff(self, retry: int) -> float:
        base = min(self.retry_delay * (2**retry), 8.0)
        return float(base / 2 + random.random() * base / 2)

    def _error(self, status: int, headers: Any, raw: bytes, fallback: str) -> MediaJobsError:
        text = raw.decode("utf-8", "replace")
        body: Any = text
        try:
            body = json.loads(text)
        except ValueError:
            pass  # not JSON: a proxy's error page, say
        message = body.get("message") if isinstance(body, dict) else None
        if not isinstance(message, str) or not message:
            message = "%s: HTTP %d" % (fallback, status)
        get = getattr(headers, "get", None)
        request_id = get("x-request-id") if get else None
        retry_after = _retry_after(get("retry-after")) if get else None
        return error_for(status, message, request_id, body, retry_after)

    def _call(
        self,
        method: str,
        path: str,
        *,
        query: Optional[Mapping[str, Any]] = None,
        body: Any = None,
        headers: Optional[Mapping[str, str]] = None,
        extra_timeout: float = 0,
        on_attempt: Optional[Callable[[], None]] = None,
    ) -> Tuple[Dict[str, Any], Any]:
        """One API call with retries; returns the envelope's ``data`` and the response headers."""
        url = self._url(path, query)
        all_headers = {
            "Accept": "application/json",
            "Authorization": "Bearer " + self._api_key,
            "User-Agent": self.user_agent,
        }
        all_headers.update(headers or {})
        data = None
        if body is not None:
            data = json.dumps(body).encode("utf-8")
            all_headers["Content-Type"] = "application/json"
        where = "%s %s" % (method, urllib.parse.urlsplit(url).path)
        attempt = 0
        while True:
            if on_attempt:
                on_attempt()
            can_retry = attempt < self.retries
            req = urllib.request.Request(url, data=data, method=method, headers=all_headers)
            try:
                try:
                    with self._opener.open(req, timeout=self.timeout + extra_timeout) as res:
                        status, res_headers, raw = res.status, res.headers, res.read()
                except urllib.error.HTTPError as e:
                    status, res_headers, raw = e.code, e.headers, e.read()
            except (OSError, http.client.HTTPException) as e:
                lost = APIConnectionError("%s failed: %s" % (where, _describe(e)))
                if not can_retry:
                    raise lost from e
                time.sleep(self._backoff(attempt))
                attempt += 1
                continue
            env: Any = None
            try:
                env = json.loads(raw.decode("utf-8"))
            except ValueError:
                pass
            if 200 <= status < 300 and isinstance(env, dict) and env.get("code") == 0 and isinstance(env.get("data"), dict):
                return env["data"], res_headers
            err = self._error(status, res_headers, raw, "%s %s" % (where, "failed" if status >= 300 else "answered without the API's envelope"))
            if can_retry and (status >= 500 or status == 429):
                delay = err.retry_after if err.retry_after is not None else self._backoff(attempt)
                if delay <= self.max_retry_delay:
                    time.sleep(delay)
                    attempt += 1
                    continue
            raise err


def _seg(value: str) -> str:
    return urllib.parse.quote(str(value), safe="")


def _describe(err: BaseException) -> str:
    reason = getattr(err, "reason", None)
    if isinstance(err, urllib.error.URLError) and reason is not None:
        return str(reason)
    return str(err) or type(err).__name__


def _read_quietly(res: Any) -> bytes:
    try:
        return cast(bytes, res.read())
    except (OSError, http.client.HTTPException):
        return b""


def _sse_messages(res: Any) -> Iterator[Tuple[str, str]]:
    """(event, data) of each Server-Sent Events message (the WHATWG parsing rules, minus retry)."""
    name = ""
    data: List[str] = []
    while True:
        raw = res.readline()
        if not raw:
            return
        line = raw.decode("utf-8").rstrip("\r\n")
        if not line:
            if data:
                yield name or "message", "\n".join(data)
            name, data = "", []
            continue
        if line.startswith(":"):
            continue  # a comment: the keep-alive
        field, _, value = line.partition(":")
        if value.startswith(" "):
            value = value[1:]
        if field == "event":
            name = value
        elif field == "data":
            data.append(value)
