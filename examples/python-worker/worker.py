#!/usr/bin/env python3
"""A media-jobs remote worker in one file, Python 3.8+ standard library only.

Runs COMMAND once per job, as `media-jobs worker` does (docs/workers.md):

    python3 worker.py --url https://jobs.example.com --token mjw_... --job-type upscale -- \
        python3 upscale.py {source} {output}.png

Inputs are downloaded to files; in ARGs {source} {target} {reference} {audio} (first file of the
slot), {output}, {input_json}, {dir}, {model} and {uuid} are replaced, and the command gets MJ_*
environment variables. A line "progress: [0.42] text" on its stdout or stderr shows in the job's
status. Exit 0 with an output file completes the job, exit 75 fails it retryably, any other exit
fails it. A cancel (seen on the next heartbeat) kills the command's process group. SIGTERM or
SIGINT stops claiming, lets running jobs finish for --grace, then hands them back; a second
signal hands them back at once.
"""
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

SLOTS = ("source", "target", "reference", "audio")
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
BACKOFF_MIN, BACKOFF_MAX = 0.1, 5.0


def log(msg, **fields):
    fields.update(time=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), msg=msg)
    sys.stderr.write(json.dumps(fields) + "\n")
    sys.stderr.flush()


class HttpError(Exception):
    def __init__(self, status, message):
        super().__init__(message)
        self.status = status


def transient(err):
    """Worth retrying: the network, timeouts, 429 and 5xx."""
    if isinstance(err, HttpError):
        return err.status == 429 or err.status >= 500
    return isinstance(err, (urllib.error.URLError, OSError, http.client.HTTPException, TimeoutError))


def backoff_after(previous):
    return min(BACKOFF_MAX, max(BACKOFF_MIN, previous * 2))


class Polls:
    """The sockets of claims in flight, so stop() can cut their long polls short.

    urllib cannot cancel a request; shutting its socket down from another thread can. The service
    sees the hang-up and keeps the job queued (a job it had already answered with is released).
    """

    def __init__(self):
        self.lock = threading.Lock()
        self.conns = {}
        self.aborted = False

    def connection_class(self, base):
        polls = self

        class Tracked(base):
            def connect(self):
                super().connect()
                with polls.lock:
                    polls.conns[threading.get_ident()] = self
                    if polls.aborted:
                        polls.cut(self)

        return Tracked

    @staticmethod
    def cut(conn):
        try:
            # The raw socket (beneath TLS, if any): the blocked read in the claim's thread ends.
            socket.socket.shutdown(conn.sock, socket.SHUT_RDWR)
        except (OSError, TypeError, AttributeError):
            pass

    def done(self):
        with self.lock:
            self.conns.pop(threading.get_ident(), None)

    def abort(self):
        with self.lock:
            self.aborted = True
            for conn in self.conns.values():
                if conn.sock is not None:
                    self.cut(conn)


class Client:
    """The protocol's calls; answers are the API's envelope {"code","message","data"}."""

    def __init__(self, url, token):
        self.base = url.rstrip("/") + "/api/v1/worker"
        self.token = token
        self.polls = Polls()
        polls = self.polls

        class PollHTTP(urllib.request.HTTPHandler):
            def http_open(self, req):
                return self.do_open(polls.connection_class(http.client.HTTPConnection), req)

        class PollHTTPS(urllib.request.HTTPSHandler):
            def https_open(self, req):
                return self.do_open(polls.connection_class(http.client.HTTPSConnection), req, context=self._context)

        self.poll_opener = urllib.request.build_opener(PollHTTP(), PollHTTPS())
        self.opener = urllib.request.build_opener()

    def call(self, method, path, body=None, raw=None, content_type="application/json", timeout=60, opener=None):
        data = raw if raw is not None else (json.dumps(body).encode() if body is not None else None)
        req = urllib.request.Request(self.base + path, data=data, method=method, headers={
            "authorization": "Bearer " + self.token, "content-type": content_type})
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
            raise HttpError(e.code, "%s: HTTP %d: %s" % (where, e.code, text))
        except ValueError:
            raise HttpError(502, "%s: HTTP 200 without the API's envelope (a proxy in the way?)" % where)
        if not isinstance(env, dict) or "data" not in env:
            raise HttpError(502, "%s: HTTP 200 without the API's envelope (a proxy in the way?)" % where)
        return env["data"], date

    def claim(self, job_types, wait):
        """A job and the seconds its lease lasts, or None after the long poll."""
        try:
            data, date = self.call("POST", "/claim", {"job_types": job_types, "wait": wait},
                                   timeout=wait + 30, opener=self.poll_opener)
        finally:
            self.polls.done()
        job = data.get("job")
        return (job, lease_left(job["lease_expires_at"], date)) if job else None

    def heartbeat(self, uuid, lease, detail=None, progress=None):
        body = {"lease_token": lease}
        if detail is not None:
            body["status_detail"] = detail[:200]
        if progress is not None:
            body["progress"] = max(0.0, min(1.0, progress))
        return self.call("POST", "/jobs/%s/heartbeat" % uuid, body)[0]

    def output(self, uuid, lease, data, content_type):
        q = urllib.parse.urlencode({"lease_token": lease})
        return self.call("PUT", "/jobs/%s/output?%s" % (uuid, q), raw=data, content_type=content_type, timeout=600)[0]

    def complete(self, uuid, lease):
        return self.call("POST", "/jobs/%s/complete" % uuid, {"lease_token": lease})[0]

    def fail(self, uuid, lease, error_type, message, retryable=False):
        body = {"lease_token": lease, "error_type": error_type, "error_message": (message or "failed")[:1000],
                "retryable": retryable}
        return self.call("POST", "/jobs/%s/fail" % uuid, body)[0]

    def release(self, uuid, lease):
        return self.call("POST", "/jobs/%s/release" % uuid, {"lease_token": lease})[0]


def parse_iso(value):
    return datetime.datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()


def lease_left(expires_at, date_header):
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


def parse_progress(line):
    """("denoising", 0.42) for "progress: 0.42 denoising"; a number outside 0-1 is text."""
    m = PROGRESS.match(line.strip())
    if not m:
        return None
    rest = m.group(1).strip()
    n = LEADING_NUMBER.match(rest)
    if n and 0 <= float(n.group(1)) <= 1:
        return (n.group(2) or "").strip() or "processing", float(n.group(1))
    return rest or "processing", None


def kill_group(proc, sig):
    try:
        os.killpg(proc.pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


class Job:
    """One claimed job: files in a temp dir, the command in its own process group, heartbeats."""

    def __init__(self, worker, job, lease_s):
        self.w, self.job, self.lease_s = worker, job, lease_s
        self.uuid, self.lease = job["uuid"], job["lease_token"]
        self.stop_reason = None  # "cancelled", "lost" or "stop"
        self.proc = None
        self.detail = None
        self.lock = threading.Lock()
        self.done = threading.Event()      # set once the outcome is recorded: heartbeats end
        self.wake = threading.Event()      # a progress report wants out
        self.lost = threading.Event()      # cancelled or lost: retries of the outcome end

    def abort(self, why):
        with self.lock:
            if self.stop_reason is None:
                self.stop_reason = why
            proc = self.proc
        if why != "stop":
            self.lost.set()
        if proc is not None and proc.poll() is None:
            kill_group(proc, signal.SIGTERM)
            t = threading.Timer(KILL_GRACE, kill_group, (proc, signal.SIGKILL))
            t.daemon = True
            t.start()

    def heartbeats(self):
        every = max(0.1, self.lease_s / 3)
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

    def beat(self):
        with self.lock:
            detail, self.detail = self.detail, None
        try:
            r = self.w.client.heartbeat(self.uuid, self.lease, *(detail or (None, None)))
            if r.get("cancel_requested"):
                self.abort("cancelled")
        except HttpError as e:
            if e.status in (401, 403, 409):  # someone else holds the job now, or we may not
                self.abort("lost")
            else:
                self.keep(detail)
        except Exception:  # transient: the next beat tries again while the lease lasts
            self.keep(detail)

    def keep(self, detail):
        with self.lock:
            if self.detail is None:
                self.detail = detail

    def progress(self, text, fraction=None):
        with self.lock:
            self.detail = (text, fraction)
        self.wake.set()

    def persist(self, what, call):
        """Retries transient failures until done, the lease is lost, or a stop's grace is over."""
        backoff = 0.0
        while True:
            try:
                return call()
            except Exception as e:
                if not transient(e) or self.lost.is_set() or self.w.grace_over.is_set():
                    raise
                backoff = backoff_after(backoff)
                log("%s failed; retrying" % what, job_uuid=self.uuid, error=str(e), retry_in_s=backoff)
                self.lost.wait(backoff)

    def run(self):
        threading.Thread(target=self.heartbeats, daemon=True).start()
        d = tempfile.mkdtemp(prefix="media-jobs-worker-")
        try:
            try:
                code, sig, tail = self.execute(d)
                failure = None
            except StagedInputError as e:
                code, sig, tail, failure = None, None, [], e
            if self.stop_reason in ("cancelled", "lost"):
                self.done.set()
                log("job dropped", job_uuid=self.uuid, why=self.stop_reason)
            elif self.stop_reason == "stop":
                self.done.set()
                self.w.release(self.job)
            elif failure is not None:
                self.fail("internal_error", str(failure), retryable=True)
            elif code != 0:
                what = "the command was killed by signal %d" % sig if code is None else "the command exited with code %d" % code
                self.fail("processing_error", what + (": " + "\n".join(tail)[-900:] if tail else ""), retryable=(code == EX_TEMPFAIL))
            else:
                self.deliver(d)
        except HttpError as e:
            if e.status == 409:
                log("job dropped", job_uuid=self.uuid, why="lost", error=str(e))
            else:
                log("could not record the job outcome; its lease will expire and another attempt will run it",
                    job_uuid=self.uuid, error=str(e))
        except Exception as e:
            log("could not record the job outcome; its lease will expire and another attempt will run it",
                job_uuid=self.uuid, error=repr(e))
        finally:
            self.done.set()
            self.wake.set()
            shutil.rmtree(d, ignore_errors=True)

    def fail(self, error_type, message, retryable=False):
        r = self.persist("fail", lambda: self.w.client.fail(self.uuid, self.lease, error_type, message, retryable))
        log("job failed", job_uuid=self.uuid, error_type=error_type, error=message[:200], now=r["status"])

    def deliver(self, d):
        out = sorted(f for f in os.listdir(d) if f == "output" or f.startswith("output."))
        path = os.path.join(d, out[0]) if out else None
        if not path or not os.path.isfile(path) or os.path.getsize(path) == 0:
            return self.fail("processing_error", "the command exited 0 but wrote no output (write the result to {output} or $MJ_OUTPUT)")
        with open(path, "rb") as f:
            data = f.read()
        ctype = guess_type(data, out[0])
        try:
            self.persist("output upload", lambda: self.w.client.output(self.uuid, self.lease, data, ctype))
        except HttpError as e:
            if e.status in (400, 413, 415):  # bytes the service will never take: the job fails with why
                return self.fail("processing_error", "the service refused the output: %s" % str(e).split(": ", 2)[-1])
            raise
        self.persist("complete", lambda: self.w.client.complete(self.uuid, self.lease))
        log("job completed", job_uuid=self.uuid, bytes=len(data))

    def download(self, url, slot, path):
        backoff = 0.0
        for attempt in range(4):
            try:
                with urllib.request.urlopen(url, timeout=300) as res, open(path + ".part", "wb") as f:
                    shutil.copyfileobj(res, f)
                    ctype = res.headers.get("content-type", "")
                ext = EXT.get(ctype.split(";")[0].strip().lower(), "bin")
                os.replace(path + ".part", "%s.%s" % (path, ext))
                return "%s.%s" % (path, ext)
            except Exception as e:
                if self.stop_reason is not None:
                    raise StagedInputError("stopped")
                if attempt == 3 or not transient(e) or (isinstance(e, urllib.error.HTTPError) and e.code < 500):
                    # The service's own staged copy: another attempt stages it afresh.
                    raise StagedInputError("could not download the staged %s: %s" % (slot, e))
                backoff = backoff_after(backoff)
                time.sleep(backoff)

    def execute(self, d):
        job, local, first = self.job, dict(self.job["input"]), {}
        for slot in SLOTS:
            urls = job["input"].get(slot)
            if not isinstance(urls, list) or not urls:
                continue
            self.progress("downloading media")
            files = [self.download(url, slot, os.path.join(d, "%s%s" % (slot, "-%d" % i if len(urls) > 1 else "")))
                     for i, url in enumerate(urls)]
            local[slot], first[slot] = files, files[0]
        input_json = os.path.join(d, "input.json")
        with open(input_json, "w") as f:
            json.dump(local, f)
        output = os.path.join(d, "output")
        values = dict(output=output, input_json=input_json, dir=d, model=job["model"], uuid=job["uuid"],
                      **{s: first.get(s, "") for s in SLOTS})
        args = [PLACEHOLDER.sub(lambda m: values[m.group(1)], a) for a in self.w.command]
        env = {k: v for k, v in os.environ.items() if k != "MEDIA_JOBS_WORKER_TOKEN"}  # never the credential
        env.update(MJ_JOB_UUID=job["uuid"], MJ_JOB_TYPE=job["job_type"], MJ_MODEL=job["model"],
                   MJ_ATTEMPT=str(job["attempt"]), MJ_OUTPUT=output, MJ_INPUT_JSON=input_json, MJ_DIR=d,
                   MJ_OPTIONS=json.dumps({k: v for k, v in job["input"].items() if k not in SLOTS}),
                   **{"MJ_" + s.upper(): p for s, p in first.items()})
        self.progress("running")
        with self.lock:
            if self.stop_reason is not None:
                return None, None, []
            try:
                self.proc = subprocess.Popen(args, cwd=d, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                             stderr=subprocess.PIPE, start_new_session=True)
            except OSError as e:
                raise StagedInputError("could not start %s: %s" % (args[0], e))
        tail = []

        def watch(stream, is_err):
            for raw in iter(stream.readline, b""):
                line = raw.decode("utf-8", "replace").rstrip("\r\n")
                sys.stderr.write("[%s] %s\n" % (os.path.basename(args[0]), line))
                p = parse_progress(line)
                if p:
                    self.progress(*p)
                elif is_err:
                    tail.append(line[:1000])
                    del tail[:-8]

        readers = [threading.Thread(target=watch, args=(self.proc.stdout, False), daemon=True),
                   threading.Thread(target=watch, args=(self.proc.stderr, True), daemon=True)]
        for t in readers:
            t.start()
        code = self.proc.wait()
        # Whatever it left behind in its group goes too (and with it, anything holding its pipes).
        kill_group(self.proc, signal.SIGKILL)
        for t in readers:
            t.join(5)
        return (code, None, tail) if code >= 0 else (None, -code, tail)


class StagedInputError(Exception):
    """The job could not be run here (its staged input, the command): another attempt may do better."""


def guess_type(data, name):
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


class Worker:
    def __init__(self, args):
        self.client = Client(args.url, args.token)
        self.job_types, self.command, self.grace = args.job_type, args.command, args.grace
        self.stopping = threading.Event()
        self.grace_over = threading.Event()
        self.fatal = None
        self.running = {}
        self.lock = threading.Lock()
        self.signals = 0

    def loop(self):
        backoff = 0.0
        while not self.stopping.is_set():
            try:
                claimed = self.client.claim(self.job_types, CLAIM_WAIT)
                backoff = 0.0
            except Exception as e:
                if self.stopping.is_set():
                    return
                if not transient(e):
                    self.fatal = e
                    log("worker stopping: the service refused it", error=str(e))
                    self.stopping.set()
                    self.client.polls.abort()
                    return
                backoff = backoff_after(backoff)
                log("claim failed; retrying", error=str(e), retry_in_s=backoff)
                self.stopping.wait(backoff)
                continue
            if not claimed:
                continue
            job, lease_s = claimed
            if self.stopping.is_set():  # the answer raced the stop: hand the job straight back
                self.release(job)
                return
            j = Job(self, job, lease_s)
            with self.lock:
                self.running[j.uuid] = j
            log("job started", job_uuid=j.uuid, job_type=job["job_type"], attempt=job["attempt"])
            try:
                j.run()
            finally:
                with self.lock:
                    self.running.pop(j.uuid, None)

    def release(self, job):
        deadline, backoff = time.time() + RELEASE_WITHIN, 0.0
        while True:
            try:
                self.client.release(job["uuid"], job["lease_token"])
                log("job released", job_uuid=job["uuid"])
                return
            except Exception as e:
                if not transient(e) or time.time() >= deadline:
                    log("could not hand the job back; its lease will expire", job_uuid=job["uuid"], error=str(e))
                    return
                backoff = backoff_after(backoff)
                time.sleep(backoff)

    def stop(self, signum=None, _frame=None):
        self.signals += 1
        now = self.signals > 1
        if now:
            log("stopping now: running jobs are handed back")
        else:
            log("stopping: no new jobs; running ones get the grace period, then are handed back", grace_s=self.grace)
        self.stopping.set()
        self.client.polls.abort()

        def later():
            deadline = time.time() + (0 if now else self.grace)
            while time.time() < deadline and self.running and not self.grace_over.is_set():
                time.sleep(0.05)
            self.grace_over.set()
            with self.lock:
                jobs = list(self.running.values())
            for j in jobs:
                j.abort("stop")

        threading.Thread(target=later, daemon=True).start()


class OneLineParser(argparse.ArgumentParser):
    def error(self, message):
        self.exit(2, "worker.py: %s (see --help)\n" % message)


def duration(text):
    """30, 30s, 500ms, 2m: seconds (a bare number is seconds)."""
    m = re.match(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h)?\s*$", text)
    if not m:
        raise argparse.ArgumentTypeError("%r is not a duration (e.g. 30s, 500ms, 2m)" % text)
    return float(m.group(1)) * {"ms": 0.001, "s": 1, "m": 60, "h": 3600}[m.group(2) or "s"]


def main():
    argv = sys.argv[1:]
    p = OneLineParser(description=__doc__.split("\n")[0],
                      usage="python3 worker.py [--url URL] [--token TOKEN] --job-type NAME [--job-type NAME...] "
                            "[--concurrency N] [--grace 30s] -- COMMAND [ARG...]")
    p.add_argument("--url", default=os.environ.get("MEDIA_JOBS_URL"), help="the service (or MEDIA_JOBS_URL)")
    p.add_argument("--token", default=os.environ.get("MEDIA_JOBS_WORKER_TOKEN"), help="a worker token (or MEDIA_JOBS_WORKER_TOKEN)")
    p.add_argument("--job-type", action="append", required=True, help="a declared job type to serve (repeatable)")
    p.add_argument("--concurrency", type=int, default=1, help="jobs at once (default 1)")
    p.add_argument("--grace", type=duration, default=30.0, help="on SIGTERM, how long running jobs may finish (default 30s)")
    if "--" not in argv:
        p.parse_args(argv)  # --help, or the missing options, first
        p.error('give the command to run after "--"')
    sep = argv.index("--")
    args = p.parse_args(argv[:sep])
    args.command = argv[sep + 1:]
    args.job_type = [t.strip() for v in args.job_type for t in v.split(",") if t.strip()]
    if not args.command:
        p.error('give the command to run after "--"')
    if not args.url or not re.match(r"^https?://[^/]", args.url):
        p.error("--url (or MEDIA_JOBS_URL) must be the service's http(s) URL")
    if not args.token:
        p.error("--token (or MEDIA_JOBS_WORKER_TOKEN) is required: a worker token from media-jobs workers create-token")
    if not 1 <= args.concurrency <= 64:
        p.error("--concurrency must be a whole number from 1 to 64")
    if not shutil.which(args.command[0]):
        # A command that cannot start would fail every job this worker claims.
        p.error("cannot run %r: not found or not executable" % args.command[0])
    w = Worker(args)
    signal.signal(signal.SIGTERM, w.stop)
    signal.signal(signal.SIGINT, w.stop)
    log("worker started", url=args.url, job_types=args.job_type, concurrency=args.concurrency, command=args.command[0])
    loops = [threading.Thread(target=w.loop, daemon=True) for _ in range(args.concurrency)]
    for t in loops:
        t.start()
    while any(t.is_alive() for t in loops):
        for t in loops:
            t.join(0.2)
    log("worker stopped" if not w.fatal else "worker stopped: the service refused it")
    return 1 if w.fatal else 0


if __name__ == "__main__":
    sys.exit(main())
