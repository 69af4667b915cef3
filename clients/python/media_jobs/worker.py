"""A media-jobs remote worker: standard library only, Python 3.9+.

Two ways to use it (docs/workers.md):

1. Wrap any command, run once per job, as ``media-jobs worker`` does::

       python3 -m media_jobs.worker --url https://jobs.example.com --token mjw_... --job-type upscale -- \\
           python3 upscale.py {source} {output}.png

   Inputs are downloaded to files; in ARGs {source} {target} {reference} {audio} (first file of the
   slot), {output}, {input_json}, {dir}, {model} and {uuid} are replaced, and the command gets MJ_*
   environment variables. A line "progress: [0.42] text" on its stdout or stderr shows in the job's
   status. Exit 0 with an output file completes the job, exit 75 fails it retryably, any other exit
   fails it. A cancel (seen on the next heartbeat) kills the command's process group. SIGTERM or
   SIGINT stops claiming, lets running jobs finish for --grace, then hands them back; a second
   signal hands them back at once.

2. From Python, keeping a model loaded between jobs::

       from media_jobs.worker import Output, WorkerJobError, run_worker

       def handle(job, ctx):
           image = ctx.download(job.media["source"][0])
           ctx.progress(10, "upscaling")
           return Output(upscale(image, job.input.get("scale", 4)), "image/png")

       run_worker(handle, job_types=["upscale"])  # MEDIA_JOBS_URL, MEDIA_JOBS_WORKER_TOKEN
"""
from __future__ import annotations

import argparse
import datetime
import email.utils
import http.client
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple, Union

from ._version import __version__
from .errors import MediaJobsError, error_for
from .types import ERROR_TYPES, SLOT_NAMES

SLOTS = SLOT_NAMES
EXT = {"image/jpeg": "jpg", "image/png": "png", "image/webp": "webp", "image/gif": "gif", "image/avif": "avif",
       "image/bmp": "bmp", "image/tiff": "tiff", "video/mp4": "mp4", "video/webm": "webm", "video/quicktime": "mov",
       "video/x-matroska": "mkv", "audio/mpeg": "mp3", "audio/wav": "wav", "audio/x-wav": "wav", "audio/ogg": "ogg",
       "audio/flac": "flac", "audio/mp4": "m4a", "application/json": "json", "text/plain": "txt"}
PLACEHOLDER = re.compile(r"\{(source|target|reference|audio|output|input_json|dir|model|uuid)\}")
PROGRESS = re.compile(r"^progress:\s*(.*)$", re.I)
LEADING_NUMBER = re.compile(r"^(\d*\.?\d+)(?:\s+(.*))?$")
CLAIM_WAIT = 30          # seconds a claim long-polls (the protocol's maximum); stop() cuts it short
KILL_GRACE = 5.0         # seconds between SIGTERM and SIGKILL of a command's process group
EX_TEMPFAIL = 75         # sysexits.h "try again later": the job is failed retryably
PROGRESS_GAP = 0.25      # progress goes out at once, but not more often than this
RELEASE_WITHIN = 10.0    # a stopping worker tries this long to hand a job back
IDLE_PAUSE = 1.0         # with wait_seconds=0 an empty claim is no long poll: pause before the next
DOWNLOAD_TRIES = 4
BACKOFF_MIN, BACKOFF_MAX = 0.1, 5.0

Log = Callable[..., None]


def log_json(msg: str, **fields: Any) -> None:
    """The default log: one JSON line per event on stderr."""
    fields.update(time=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), msg=msg)
    sys.stderr.write(json.dumps(fields) + "\n")
    sys.stderr.flush()


# -- what a handler sees and returns --------------------------------------------------------------


class WorkerJobError(Exception):
    """Raise it from a handler to fail the job with this ``error_type`` (one of ERROR_TYPES);
    ``retryable=True`` puts it back in the queue while attempts are left."""

    def __init__(self, error_type: str, message: str, retryable: bool = False) -> None:
        if error_type not in ERROR_TYPES:
            raise ValueError("WorkerJobError: error_type must be one of %s (got %r)" % (", ".join(ERROR_TYPES), error_type))
        super().__init__(message)
        self.error_type = error_type
        self.message = message
        self.retryable = retryable


class StagedInputError(WorkerJobError):
    """The job could not be run here (its staged input, the command): another attempt may do better."""

    def __init__(self, message: str) -> None:
        super().__init__("internal_error", message, retryable=True)


@dataclass(frozen=True)
class WorkerJob:
    """A claimed job: the client's ``input`` (media slots as lists of signed URLs to the service's
    staged copies) and ``media``, the slots alone."""

    uuid: str
    job_type: str
    model: str
    attempt: int
    input: Dict[str, Any]
    media: Dict[str, List[str]]
    lease_expires_at: str
    timeout_at: Optional[str] = None
    raw: Dict[str, Any] = field(default_factory=dict, repr=False)


@dataclass
class Output:
    """A handler's result: ``data`` (bytes) or ``path`` (a file, streamed), and its content type.
    The service sniffs media types from the bytes; JSON and text it takes as declared here."""

    data: Optional[bytes] = None
    content_type: str = "application/octet-stream"
    path: Optional[str] = None


Handler = Callable[[WorkerJob, "JobContext"], Union[Output, bytes, Tuple[bytes, str], None]]


class JobContext:
    """The running job's handle: progress, downloads, and the abort that ends it.

    ``aborted`` is set when the client cancels, the job times out, the lease is lost, or the worker
    stops and the grace is over (``abort_reason`` says which: ``cancelled``, ``lost``, ``stop``).
    Honour it: the job is no longer this worker's, and what the handler returns is dropped."""

    def __init__(self, attempt: "_Attempt") -> None:
        self._attempt = attempt
        self.aborted = threading.Event()
        self.abort_reason: Optional[str] = None
        self._on_abort: List[Callable[[str], None]] = []
        self._lock = threading.Lock()
        self._dir: Optional[str] = None

    def progress(self, percent: Optional[float] = None, stage: Optional[str] = None) -> None:
        """Shows progress in the job's status: ``percent`` 0-100 (or None) and a ``stage`` text.
        Sent at once (at most every 250 ms) and with every heartbeat."""
        if percent is not None:
            percent = max(0.0, min(100.0, float(percent)))
        self._attempt.report(stage or "processing", percent)

    def on_abort(self, callback: Callable[[str], None]) -> None:
        """Calls ``callback(reason)`` when the job is aborted (at once if it already was)."""
        with self._lock:
            if self.abort_reason is None:
                self._on_abort.append(callback)
                return
            reason = self.abort_reason
        callback(reason)

    def check(self) -> None:
        """Raises JobAborted if the job was aborted: a handler's cheap way out of a loop."""
        if self.aborted.is_set():
            raise JobAborted(self.abort_reason or "stop")

    @property
    def workdir(self) -> str:
        """A temporary directory for this job, removed once its outcome is recorded."""
        with self._lock:
            if self._dir is None:
                self._dir = tempfile.mkdtemp(prefix="media-jobs-worker-")
            return self._dir

    def download(self, url: str, path: Optional[str] = None) -> Union[bytes, str]:
        """Fetches a staged input (a signed URL: no credentials needed), retrying network errors
        and 5xx a few times. Returns the bytes, or with ``path`` writes ``path.<ext>`` (the
        extension from the content type) and returns that file's name. A failure raises
        StagedInputError (the job fails retryably: another attempt stages it afresh)."""
        backoff = 0.0
        for attempt in range(DOWNLOAD_TRIES):
            try:
                with urllib.request.urlopen(url, timeout=300) as res:
                    ctype = res.headers.get("content-type", "")
                    if path is None:
                        return bytes(res.read())
                    with open(path + ".part", "wb") as f:
                        shutil.copyfileobj(res, f)
                ext = EXT.get(ctype.split(";")[0].strip().lower(), "bin")
                os.replace(path + ".part", "%s.%s" % (path, ext))
                return "%s.%s" % (path, ext)
            except Exception as e:
                if self.aborted.is_set():
                    raise StagedInputError("stopped")
                if attempt == DOWNLOAD_TRIES - 1 or not transient(e) or (
                    isinstance(e, urllib.error.HTTPError) and e.code < 500
                ):
                    raise StagedInputError("could not download the staged input: %s" % e)
                backoff = backoff_after(backoff)
                self.aborted.wait(backoff)
        raise StagedInputError("could not download the staged input")  # not reached

    def _abort(self, reason: str) -> None:
        with self._lock:
            if self.abort_reason is not None:
                return
            self.abort_reason = reason
            callbacks, self._on_abort = self._on_abort, []
        self.aborted.set()
        for cb in callbacks:
            try:
                cb(reason)
            except Exception:
                pass

    def _cleanup(self) -> None:
        if self._dir is not None:
            shutil.rmtree(self._dir, ignore_errors=True)


class JobAborted(Exception):
    """Raised by ``JobContext.check()`` once the job was aborted."""


# -- the protocol ---------------------------------------------------------------------------------


def transient(err: BaseException) -> bool:
    """Worth retrying: the network, timeouts, 429 and 5xx."""
    if isinstance(err, MediaJobsError) and err.status:
        return err.status == 429 or err.status >= 500
    return isinstance(err, (urllib.error.URLError, OSError, http.client.HTTPException, TimeoutError, MediaJobsError))


def backoff_after(previous: float) -> float:
    return min(BACKOFF_MAX, max(BACKOFF_MIN, previous * 2))


class _Polls:
    """The sockets of claims in flight, so stop() can cut their long polls short.

    urllib cannot cancel a request; shutting its socket down from another thread can. The service
    sees the hang-up and keeps the job queued (a job it had already answered with is released).
    """

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.conns: Dict[int, Any] = {}
        self.aborted = False

    def connection_class(self, base: Any) -> Any:
        polls = self

        class Tracked(base):  # type: ignore[misc]
            def connect(self) -> None:
                super().connect()
                with polls.lock:
                    polls.conns[threading.get_ident()] = self
                    if polls.aborted:
                        polls.cut(self)

        return Tracked

    @staticmethod
    def cut(conn: Any) -> None:
        try:
            # The raw socket (beneath TLS, if any): the blocked read in the claim's thread ends.
            socket.socket.shutdown(conn.sock, socket.SHUT_RDWR)
        except (OSError, TypeError, AttributeError):
            pass

    def done(self) -> None:
        with self.lock:
            self.conns.pop(threading.get_ident(), None)

    def abort(self) -> None:
        with self.lock:
            self.aborted = True
            for conn in self.conns.values():
                if conn.sock is not None:
                    self.cut(conn)


class WorkerClient:
    """The protocol's calls (docs/workers.md section 3); answers are the API's envelope."""

    def __init__(self, url: str, token: str, log: Log = log_json) -> None:
        self.base = url.rstrip("/") + "/api/v1/worker"
        self.token = token
        self.log = log
        self.polls = _Polls()
        # Progress as {"stage","percent"} until a service refuses it; then the
        # earlier form, a 0-1 fraction beside status_detail.
        self.progress_objects = True
        polls = self.polls

        class PollHTTP(urllib.request.HTTPHandler):
            def http_open(self, req: Any) -> Any:
                return self.do_open(polls.connection_class(http.client.HTTPConnection), req)

        class PollHTTPS(urllib.request.HTTPSHandler):
            def https_open(self, req: Any) -> Any:
                return self.do_open(polls.connection_class(http.client.HTTPSConnection), req, context=self._context)  # type: ignore[attr-defined]

        self.poll_opener = urllib.request.build_opener(PollHTTP(), PollHTTPS())
        self.opener = urllib.request.build_opener()
        self.user_agent = "media-jobs-python-worker/%s" % __version__

    def call(
        self,
        method: str,
        path: str,
        body: Any = None,
        raw: Any = None,
        content_type: str = "application/json",
        timeout: float = 60,
        opener: Any = None,
        length: Optional[int] = None,
    ) -> Tuple[Dict[str, Any], Optional[str]]:
        data = raw if raw is not None else (json.dumps(body).encode() if body is not None else None)
        headers = {"authorization": "Bearer " + self.token, "content-type": content_type, "user-agent": self.user_agent}
        if length is not None:
            headers["content-length"] = str(length)
        req = urllib.request.Request(self.base + path, data=data, method=method, headers=headers)
        where = "%s %s" % (method, path.split("?")[0])  # the lease token rides in a query: not in logs
        try:
            with (opener or self.opener).open(req, timeout=timeout) as res:
                env = json.loads(res.read() or b"{}")
                date = res.headers.get("date")
        except urllib.error.HTTPError as e:
            text = e.read().decode("utf-8", "replace")
            try:
                text = json.loads(text).get("message", text)
            except (ValueError, AttributeError):
                text = text[:200]
            raise error_for(e.code, "%s: HTTP %d: %s" % (where, e.code, text), e.headers.get("x-request-id")) from None
        except ValueError:
            raise error_for(502, "%s: HTTP 200 without the API's envelope (a proxy in the way?)" % where) from None
        if not isinstance(env, dict) or not isinstance(env.get("data"), dict):
            raise error_for(502, "%s: HTTP 200 without the API's envelope (a proxy in the way?)" % where)
        return env["data"], date

    def claim(self, job_types: Sequence[str], wait: int) -> Optional[Tuple[Dict[str, Any], float]]:
        """A job and the seconds its lease lasts, or None after the long poll."""
        try:
            data, date = self.call("POST", "/claim", {"job_types": list(job_types), "wait": wait},
                                   timeout=wait + 30, opener=self.poll_opener)
        finally:
            self.polls.done()
        job = data.get("job")
        return (job, lease_left(job["lease_expires_at"], date)) if job else None

    def heartbeat(self, uuid: str, lease: str, stage: Optional[str] = None, percent: Optional[float] = None) -> Dict[str, Any]:
        body: Dict[str, Any] = {"lease_token": lease}
        objects = self.progress_objects
        if stage is not None:
            body["status_detail"] = stage[:200]
            if objects:
                body["progress"] = {"stage": stage[:200], "percent": percent}
            elif percent is not None:
                body["progress"] = percent / 100
        try:
            return self.call("POST", "/jobs/%s/heartbeat" % uuid, body)[0]
        except MediaJobsError as e:
            if e.status == 400 and objects and isinstance(body.get("progress"), dict):
                # A service from before progress objects: the fraction it takes instead.
                self.progress_objects = False
                self.log("the service takes progress as a fraction; sending that", job_uuid=uuid)
                return self.heartbeat(uuid, lease, stage, percent)
            raise

    def output(self, uuid: str, lease: str, out: Output) -> Dict[str, Any]:
        q = urllib.parse.urlencode({"lease_token": lease})
        path = "/jobs/%s/output?%s" % (uuid, q)
        if out.path is not None:
            with open(out.path, "rb") as f:
                return self.call("PUT", path, raw=f, content_type=out.content_type, timeout=600,
                                 length=os.fstat(f.fileno()).st_size)[0]
        return self.call("PUT", path, raw=out.data or b"", content_type=out.content_type, timeout=600)[0]

    def complete(self, uuid: str, lease: str) -> Dict[str, Any]:
        return self.call("POST", "/jobs/%s/complete" % uuid, {"lease_token": lease})[0]

    def fail(self, uuid: str, lease: str, error_type: str, message: str, retryable: bool = False) -> Dict[str, Any]:
        body = {"lease_token": lease, "error_type": error_type, "error_message": (message or "failed")[:1000],
                "retryable": retryable}
        return self.call("POST", "/jobs/%s/fail" % uuid, body)[0]

    def release(self, uuid: str, lease: str) -> Dict[str, Any]:
        return self.call("POST", "/jobs/%s/release" % uuid, {"lease_token": lease})[0]


def parse_iso(value: str) -> float:
    return datetime.datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()


def lease_left(expires_at: str, date_header: Optional[str]) -> float:
    """Seconds of lease left, free of clock skew: lease_expires_at is the service's clock.

    When ours agrees with its Date header (1 s resolution) ours is the finer measure; when not, the
    header is the honest one (taken 1 s short, since it truncates)."""
    expires, now = parse_iso(expires_at), time.time()
    try:
        server_now = email.utils.parsedate_to_datetime(date_header).timestamp() if date_header else None
    except (TypeError, ValueError):
        server_now = None
    left = expires - now if server_now is None or abs(now - server_now) <= 2 else expires - server_now - 1
    return max(1.0, left)


# -- one claimed job ------------------------------------------------------------------------------


class _Attempt:
    """One claimed job: the handler in this thread, heartbeats in another, then the outcome."""

    def __init__(self, worker: "Worker", job: Dict[str, Any], lease_s: float) -> None:
        self.w, self.raw, self.lease_s = worker, job, lease_s
        self.uuid, self.lease = job["uuid"], job["lease_token"]
        self.ctx = JobContext(self)
        self.detail: Optional[Tuple[str, Optional[float]]] = None
        self.lock = threading.Lock()
        self.done = threading.Event()      # set once the outcome is recorded: heartbeats end
        self.wake = threading.Event()      # a progress report wants out
        self.lost = threading.Event()      # cancelled or lost: retries of the outcome end

    def abort(self, why: str) -> None:
        if why != "stop":
            self.lost.set()
        self.ctx._abort(why)

    def heartbeats(self) -> None:
        every = max(0.1, min(self.lease_s / 3, self.w.heartbeat_interval or self.lease_s))
        last = time.time()
        while not self.done.is_set():
            due = last + every - time.time()
            if self.wake.wait(max(0.0, due)):
                # Progress: at once, but at most every PROGRESS_GAP.
                if self.done.wait(max(0.0, last + PROGRESS_GAP - time.time())):
                    return
                self.wake.clear()
            if self.done.is_set():
                return
            last = time.time()
            self.beat()

    def beat(self) -> None:
        with self.lock:
            detail, self.detail = self.detail, None
        try:
            r = self.w.client.heartbeat(self.uuid, self.lease, *(detail or (None, None)))
            if r.get("cancel_requested"):
                self.abort("cancelled")
        except MediaJobsError as e:
            if e.status in (401, 403, 409):  # someone else holds the job now, or we may not
                self.abort("lost")
            else:
                self.keep(detail)
        except Exception:  # transient: the next beat tries again while the lease lasts
            self.keep(detail)

    def keep(self, detail: Optional[Tuple[str, Optional[float]]]) -> None:
        with self.lock:
            if self.detail is None:
                self.detail = detail

    def report(self, stage: str, percent: Optional[float]) -> None:
        with self.lock:
            self.detail = (stage, percent)
        self.wake.set()

    def persist(self, what: str, call: Callable[[], Dict[str, Any]]) -> Dict[str, Any]:
        """Retries transient failures until done, the lease is lost, or a stop's grace is over."""
        backoff = 0.0
        while True:
            try:
                return call()
            except Exception as e:
                if not transient(e) or self.lost.is_set() or self.w.grace_over.is_set():
                    raise
                backoff = backoff_after(backoff)
                self.w.log("%s failed; retrying" % what, job_uuid=self.uuid, error=str(e), retry_in_s=backoff)
                self.lost.wait(backoff)

    def run(self) -> None:
        threading.Thread(target=self.heartbeats, daemon=True).start()
        media = {s: list(v) for s, v in self.raw["input"].items() if s in SLOTS and isinstance(v, list)}
        job = WorkerJob(uuid=self.uuid, job_type=self.raw["job_type"], model=self.raw["model"],
                        attempt=self.raw["attempt"], input=self.raw["input"], media=media,
                        lease_expires_at=self.raw["lease_expires_at"], timeout_at=self.raw.get("timeout_at"),
                        raw=self.raw)
        try:
            failure: Optional[WorkerJobError] = None
            out: Any = None
            try:
                out = self.w.handle(job, self.ctx)
            except WorkerJobError as e:
                failure = e
            except JobAborted:
                pass
            except Exception as e:
                failure = WorkerJobError("processing_error", str(e) or repr(e))
            reason = self.ctx.abort_reason
            if reason in ("cancelled", "lost"):
                self.done.set()
                self.w.log("job dropped", job_uuid=self.uuid, why=reason)
            elif reason == "stop":
                self.done.set()
                self.w.release(self.raw)
            elif failure is not None:
                self.fail(failure.error_type, failure.message, failure.retryable)
            else:
                self.deliver(out)
        except MediaJobsError as e:
            if e.status == 409:
                self.w.log("job dropped", job_uuid=self.uuid, why="lost", error=str(e))
            else:
                self.w.log("could not record the job outcome; its lease will expire and another attempt will run it",
                           job_uuid=self.uuid, error=str(e))
        except Exception as e:
            self.w.log("could not record the job outcome; its lease will expire and another attempt will run it",
                       job_uuid=self.uuid, error=repr(e))
        finally:
            self.done.set()
            self.wake.set()
            self.ctx._cleanup()

    def fail(self, error_type: str, message: str, retryable: bool = False) -> None:
        r = self.persist("fail", lambda: self.w.client.fail(self.uuid, self.lease, error_type, message, retryable))
        self.w.log("job failed", job_uuid=self.uuid, error_type=error_type, error=message[:200], now=r["status"])

    def deliver(self, out: Any) -> None:
        if isinstance(out, tuple):
            out = Output(out[0], out[1])
        elif isinstance(out, (bytes, bytearray)):
            out = Output(bytes(out))
        if not isinstance(out, Output) or (out.path is None and not out.data) or (
            out.path is not None and (not os.path.isfile(out.path) or os.path.getsize(out.path) == 0)
        ):
            return self.fail("processing_error", "the worker produced no output")
        try:
            self.persist("output upload", lambda: self.w.client.output(self.uuid, self.lease, out))
        except MediaJobsError as e:
            if e.status in (400, 413, 415):  # bytes the service will never take: the job fails with why
                return self.fail("processing_error", "the service refused the output: %s" % e.message.split(": ", 2)[-1])
            raise
        self.persist("complete", lambda: self.w.client.complete(self.uuid, self.lease))
        size = len(out.data) if out.path is None and out.data is not None else os.path.getsize(out.path or "")
        self.w.log("job completed", job_uuid=self.uuid, bytes=size)


# -- the worker -----------------------------------------------------------------------------------


class Worker:
    """Claims jobs of ``job_types`` and runs ``handle(job, ctx)`` for each, ``concurrency`` at a
    time, until stopped. ``start()`` returns at once; ``stop(grace)`` stops claiming, lets running
    jobs finish for ``grace`` seconds, then aborts them and hands them back (a second stop skips
    the grace); ``join()`` waits for the end. ``refused`` is the error when the service refused the
    worker (a bad token, a job type it may not claim)."""

    def __init__(
        self,
        handle: Handler,
        *,
        job_types: Sequence[str],
        url: Optional[str] = None,
        token: Optional[str] = None,
        concurrency: int = 1,
        wait_seconds: int = CLAIM_WAIT,
        heartbeat_interval: Optional[float] = None,
        log: Log = log_json,
    ) -> None:
        url = url or os.environ.get("MEDIA_JOBS_URL")
        token = token or os.environ.get("MEDIA_JOBS_WORKER_TOKEN")
        if not url or not re.match(r"^https?://[^/]", url):
            raise ValueError("url (or MEDIA_JOBS_URL) must be the service's http(s) URL")
        if not token:
            raise ValueError("token (or MEDIA_JOBS_WORKER_TOKEN) is required: a worker token from media-jobs workers create-token")
        if not job_types:
            raise ValueError("job_types: name at least one declared job type")
        if not 1 <= concurrency <= 64:
            raise ValueError("concurrency must be a whole number from 1 to 64")
        self.handle = handle
        self.log = log
        self.client = WorkerClient(url, token, log)
        self.job_types = list(job_types)
        self.concurrency = concurrency
        self.wait_seconds = max(0, min(CLAIM_WAIT, int(wait_seconds)))
        self.heartbeat_interval = heartbeat_interval
        self.stopping = threading.Event()
        self.grace_over = threading.Event()
        self.refused: Optional[BaseException] = None
        self.running: Dict[str, _Attempt] = {}
        self.lock = threading.Lock()
        self.stops = 0
        self.threads: List[threading.Thread] = []

    @property
    def active(self) -> int:
        """The number of jobs running."""
        with self.lock:
            return len(self.running)

    def start(self) -> "Worker":
        self.threads = [threading.Thread(target=self.loop, daemon=True) for _ in range(self.concurrency)]
        for t in self.threads:
            t.start()
        return self

    def join(self, timeout: Optional[float] = None) -> bool:
        """Waits for every claim loop to end (a stop, or a refusal); True once they have."""
        deadline = None if timeout is None else time.monotonic() + timeout
        for t in self.threads:
            while t.is_alive():
                if deadline is not None and time.monotonic() >= deadline:
                    return False
                t.join(0.2)  # short joins: the main thread still takes signals
        return True

    def loop(self) -> None:
        backoff = 0.0
        while not self.stopping.is_set():
            try:
                claimed = self.client.claim(self.job_types, self.wait_seconds)
                backoff = 0.0
            except Exception as e:
                if self.stopping.is_set():
                    return
                if not transient(e):
                    self.refused = e
                    self.log("worker stopping: the service refused it", error=str(e))
                    self.stopping.set()
                    self.client.polls.abort()
                    return
                backoff = backoff_after(backoff)
                self.log("claim failed; retrying", error=str(e), retry_in_s=backoff)
                self.stopping.wait(backoff)
                continue
            if not claimed:
                if self.wait_seconds == 0:
                    self.stopping.wait(IDLE_PAUSE)
                continue
            job, lease_s = claimed
            if self.stopping.is_set():  # the answer raced the stop: hand the job straight back
                self.release(job)
                return
            a = _Attempt(self, job, lease_s)
            with self.lock:
                self.running[a.uuid] = a
            self.log("job started", job_uuid=a.uuid, job_type=job["job_type"], attempt=job["attempt"])
            try:
                a.run()
            finally:
                with self.lock:
                    self.running.pop(a.uuid, None)

    def release(self, job: Dict[str, Any]) -> None:
        deadline, backoff = time.time() + RELEASE_WITHIN, 0.0
        while True:
            try:
                self.client.release(job["uuid"], job["lease_token"])
                self.log("job released", job_uuid=job["uuid"])
                return
            except Exception as e:
                if not transient(e) or time.time() >= deadline:
                    self.log("could not hand the job back; its lease will expire", job_uuid=job["uuid"], error=str(e))
                    return
                backoff = backoff_after(backoff)
                time.sleep(backoff)

    def stop(self, grace: float = 30.0) -> None:
        """Stops claiming (an in-flight long poll is cut at once); running jobs get ``grace``
        seconds, then are aborted and handed back. Returns at once; ``join()`` waits."""
        self.stops += 1
        now = self.stops > 1 or grace <= 0
        if now:
            self.log("stopping now: running jobs are handed back")
        else:
            self.log("stopping: no new jobs; running ones get the grace period, then are handed back", grace_s=grace)
        self.stopping.set()
        self.client.polls.abort()

        def later() -> None:
            deadline = time.time() + (0 if now else grace)
            while time.time() < deadline and self.running and not self.grace_over.is_set():
                time.sleep(0.05)
            self.grace_over.set()
            with self.lock:
                attempts = list(self.running.values())
            for a in attempts:
                a.abort("stop")

        threading.Thread(target=later, daemon=True).start()


def run_worker(
    handle: Handler,
    *,
    job_types: Sequence[str],
    url: Optional[str] = None,
    token: Optional[str] = None,
    concurrency: int = 1,
    grace: float = 30.0,
    wait_seconds: int = CLAIM_WAIT,
    heartbeat_interval: Optional[float] = None,
    handle_signals: bool = True,
    log: Log = log_json,
) -> None:
    """Runs a worker until SIGTERM or SIGINT (with ``handle_signals``, in the main thread) or a
    refusal: ``handle(job, ctx)`` per job, returning ``Output(data, content_type)`` (or
    ``(bytes, content_type)``) to complete it, raising WorkerJobError to fail it with a type (any
    other exception fails it with ``processing_error`` and its message). ``url`` and ``token``
    default to MEDIA_JOBS_URL and MEDIA_JOBS_WORKER_TOKEN. Returns after a stop; raises the
    service's MediaJobsError if it refused the worker."""
    w = Worker(handle, job_types=job_types, url=url, token=token, concurrency=concurrency,
               wait_seconds=wait_seconds, heartbeat_interval=heartbeat_interval, log=log)
    previous: Dict[int, Any] = {}
    if handle_signals and threading.current_thread() is threading.main_thread():
        for sig in (signal.SIGTERM, signal.SIGINT):
            previous[sig] = signal.signal(sig, lambda _s, _f: w.stop(grace))
    try:
        w.start()
        w.join()
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
    if w.refused is not None:
        raise w.refused


# -- the command mode -----------------------------------------------------------------------------


def parse_progress(line: str) -> Optional[Tuple[str, Optional[float]]]:
    """("denoising", 42.0) for "progress: 0.42 denoising"; a number outside 0-1 is text."""
    m = PROGRESS.match(line.strip())
    if not m:
        return None
    rest = m.group(1).strip()
    n = LEADING_NUMBER.match(rest)
    if n and 0 <= float(n.group(1)) <= 1:
        return (n.group(2) or "").strip() or "processing", float(n.group(1)) * 100
    return rest or "processing", None


def kill_group(proc: "subprocess.Popen[bytes]", sig: int) -> None:
    try:
        os.killpg(proc.pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def guess_type(data: bytes, name: str) -> str:
    """The service sniffs media itself; JSON and text it takes only as declared, so say which."""
    if name.endswith(".json"):
        return "application/json"
    if name.endswith(".txt"):
        return "text/plain"
    if data[:1] in (b"{", b"["):
        try:
            json.loads(data.decode("utf-8"))
            return "application/json"
        except ValueError:
            pass
    return "application/octet-stream"


class CommandHandler:
    """A handler that runs ``command`` once per job in its own directory (the command mode)."""

    def __init__(self, command: Sequence[str]) -> None:
        self.command = list(command)

    def __call__(self, job: WorkerJob, ctx: JobContext) -> Optional[Output]:
        d = ctx.workdir
        local, first = dict(job.input), {}
        for slot in SLOTS:
            urls = job.media.get(slot)
            if not urls:
                continue
            ctx.progress(None, "downloading media")
            files = [str(ctx.download(url, os.path.join(d, "%s%s" % (slot, "-%d" % i if len(urls) > 1 else ""))))
                     for i, url in enumerate(urls)]
            local[slot], first[slot] = files, files[0]
        input_json = os.path.join(d, "input.json")
        with open(input_json, "w") as f:
            json.dump(local, f)
        output = os.path.join(d, "output")
        values = dict(output=output, input_json=input_json, dir=d, model=job.model, uuid=job.uuid,
                      **{s: first.get(s, "") for s in SLOTS})
        args = [PLACEHOLDER.sub(lambda m: values[m.group(1)], a) for a in self.command]
        env = {k: v for k, v in os.environ.items() if k != "MEDIA_JOBS_WORKER_TOKEN"}  # never the credential
        env.update(MJ_JOB_UUID=job.uuid, MJ_JOB_TYPE=job.job_type, MJ_MODEL=job.model,
                   MJ_ATTEMPT=str(job.attempt), MJ_OUTPUT=output, MJ_INPUT_JSON=input_json, MJ_DIR=d,
                   MJ_OPTIONS=json.dumps({k: v for k, v in job.input.items() if k not in SLOTS}),
                   **{"MJ_" + s.upper(): p for s, p in first.items()})
        ctx.progress(None, "running")
        ctx.check()
        try:
            proc = subprocess.Popen(args, cwd=d, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                    stderr=subprocess.PIPE, start_new_session=True)
        except OSError as e:
            raise StagedInputError("could not start %s: %s" % (args[0], e))

        def on_abort(_reason: str) -> None:
            if proc.poll() is None:
                kill_group(proc, signal.SIGTERM)
                t = threading.Timer(KILL_GRACE, kill_group, (proc, signal.SIGKILL))
                t.daemon = True
                t.start()

        ctx.on_abort(on_abort)
        tail: List[str] = []

        def watch(stream: Any, is_err: bool) -> None:
            for raw in iter(stream.readline, b""):
                line = raw.decode("utf-8", "replace").rstrip("\r\n")
                sys.stderr.write("[%s] %s\n" % (os.path.basename(args[0]), line))
                p = parse_progress(line)
                if p:
                    ctx.progress(p[1], p[0])
                elif is_err:
                    tail.append(line[:1000])
                    del tail[:-8]

        readers = [threading.Thread(target=watch, args=(proc.stdout, False), daemon=True),
                   threading.Thread(target=watch, args=(proc.stderr, True), daemon=True)]
        for t in readers:
            t.start()
        code = proc.wait()
        # Whatever it left behind in its group goes too (and with it, anything holding its pipes).
        kill_group(proc, signal.SIGKILL)
        for t in readers:
            t.join(5)
        if ctx.aborted.is_set():
            return None
        if code != 0:
            what = ("the command was killed by signal %d" % -code if code < 0
                    else "the command exited with code %d" % code)
            raise WorkerJobError("processing_error", what + (": " + "\n".join(tail)[-900:] if tail else ""),
                                 retryable=(code == EX_TEMPFAIL))
        out = sorted(f for f in os.listdir(d) if f == "output" or f.startswith("output."))
        path = os.path.join(d, out[0]) if out else None
        if not path or not os.path.isfile(path) or os.path.getsize(path) == 0:
            raise WorkerJobError("processing_error",
                                 "the command exited 0 but wrote no output (write the result to {output} or $MJ_OUTPUT)")
        with open(path, "rb") as fh:
            head = fh.read(1 << 20)  # a larger JSON output is declared by its name, output.json
        return Output(path=path, content_type=guess_type(head, out[0]))


class _OneLineParser(argparse.ArgumentParser):
    def error(self, message: str) -> Any:
        self.exit(2, "%s: %s (see --help)\n" % (self.prog, message))


def duration(text: str) -> float:
    """30, 30s, 500ms, 2m: seconds (a bare number is seconds)."""
    m = re.match(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h)?\s*$", text)
    if not m:
        raise argparse.ArgumentTypeError("%r is not a duration (e.g. 30s, 500ms, 2m)" % text)
    return float(m.group(1)) * {"ms": 0.001, "s": 1, "m": 60, "h": 3600}[m.group(2) or "s"]


def main(argv: Optional[Sequence[str]] = None, prog: Optional[str] = None) -> int:
    """The command mode's command line; returns the exit status (0 after a stop, 1 when the
    service refused the worker, 2 on bad usage)."""
    if prog is None:
        name = os.path.basename(sys.argv[0])
        prog = name if name and name not in ("worker.py", "__main__.py", "-c") else "python3 -m media_jobs.worker"
    args_in = list(sys.argv[1:] if argv is None else argv)
    p = _OneLineParser(prog=prog, description=(__doc__ or "").strip().split("\n")[0],
                       usage="%s [--url URL] [--token TOKEN] --job-type NAME [--job-type NAME...] "
                             "[--concurrency N] [--grace 30s] -- COMMAND [ARG...]" % prog)
    p.add_argument("--url", default=os.environ.get("MEDIA_JOBS_URL"), help="the service (or MEDIA_JOBS_URL)")
    p.add_argument("--token", default=os.environ.get("MEDIA_JOBS_WORKER_TOKEN"), help="a worker token (or MEDIA_JOBS_WORKER_TOKEN)")
    p.add_argument("--job-type", action="append", required=True, help="a declared job type to serve (repeatable)")
    p.add_argument("--concurrency", type=int, default=1, help="jobs at once (default 1)")
    p.add_argument("--grace", type=duration, default=30.0, help="on SIGTERM, how long running jobs may finish (default 30s)")
    if "--" not in args_in:
        p.parse_args(args_in)  # --help, or the missing options, first
        p.error('give the command to run after "--"')
    sep = args_in.index("--")
    args = p.parse_args(args_in[:sep])
    command = args_in[sep + 1:]
    job_types = [t.strip() for v in args.job_type for t in v.split(",") if t.strip()]
    if not command:
        p.error('give the command to run after "--"')
    if not args.url or not re.match(r"^https?://[^/]", args.url):
        p.error("--url (or MEDIA_JOBS_URL) must be the service's http(s) URL")
    if not args.token:
        p.error("--token (or MEDIA_JOBS_WORKER_TOKEN) is required: a worker token from media-jobs workers create-token")
    if not 1 <= args.concurrency <= 64:
        p.error("--concurrency must be a whole number from 1 to 64")
    if not shutil.which(command[0]):
        # A command that cannot start would fail every job this worker claims.
        p.error("cannot run %r: not found or not executable" % command[0])
    log_json("worker started", url=args.url, job_types=job_types, concurrency=args.concurrency, command=command[0])
    try:
        run_worker(CommandHandler(command), job_types=job_types, url=args.url, token=args.token,
                   concurrency=args.concurrency, grace=args.grace)
    except MediaJobsError:
        log_json("worker stopped: the service refused it")
        return 1
    log_json("worker stopped")
    return 0


if __name__ == "__main__":
    sys.exit(main())
