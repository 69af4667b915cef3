#!/usr/bin/env python3
"""A media-jobs remote worker in one file, Python 3 standard library only.

Runs COMMAND once per job, as `media-jobs worker` does (docs/workers.md):

    python3 worker.py --url https://jobs.example.com --token mjw_... --job-type upscale -- \
        python3 upscale.py {source} {output}.png

Inputs are downloaded to files; in ARGs {source} {target} {reference} {audio} (first file of the
slot), {output}, {input_json}, {dir}, {model} and {uuid} are replaced, and the command gets MJ_*
environment variables. A line "progress: [0.42] text" on its stdout or stderr shows in the job's
status. Exit 0 with an output file completes the job, exit 75 fails it retryably, any other exit
fails it. A cancel (seen on the next heartbeat) kills the command's process group. SIGTERM or
SIGINT stops claiming, lets running jobs finish for --grace seconds, then hands them back.
"""
import argparse
import calendar
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.parse
import urllib.request

SLOTS = ("source", "target", "reference", "audio")
EXT = {"image/jpeg": "jpg", "image/png": "png", "image/webp": "webp", "image/gif": "gif", "video/mp4": "mp4",
       "video/webm": "webm", "video/quicktime": "mov", "audio/mpeg": "mp3", "audio/wav": "wav", "audio/ogg": "ogg"}
PLACEHOLDER = re.compile(r"\{(source|target|reference|audio|output|input_json|dir|model|uuid)\}")
PROGRESS = re.compile(r"^progress:\s*(?:(\d*\.?\d+)\s+)?(.*)$", re.I)
KILL_GRACE = 5.0


def log(msg, **fields):
    fields.update(time=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), msg=msg)
    sys.stderr.write(json.dumps(fields) + "\n")
    sys.stderr.flush()


class HttpError(Exception):
    def __init__(self, status, message):
        super().__init__(message)
        self.status = status


class Client:
    """The protocol's calls; answers are the API's envelope {"code","message","data"}."""

    def __init__(self, url, token):
        self.base = url.rstrip("/") + "/api/v1/worker"
        self.token = token

    def call(self, method, path, body=None, raw=None, content_type="application/json", timeout=40):
        data = raw if raw is not None else (json.dumps(body).encode() if body is not None else None)
        req = urllib.request.Request(self.base + path, data=data, method=method, headers={
            "authorization": "Bearer " + self.token, "content-type": content_type})
        try:
            with urllib.request.urlopen(req, timeout=timeout) as res:
                return json.loads(res.read() or b"{}").get("data")
        except urllib.error.HTTPError as e:
            text = e.read().decode("utf-8", "replace")
            try:
                text = json.loads(text).get("message", text)
            except ValueError:
                pass
            raise HttpError(e.code, "%s %s: HTTP %d: %s" % (method, path, e.code, text))

    def claim(self, job_types, wait):
        return self.call("POST", "/claim", {"job_types": job_types, "wait": wait}, timeout=wait + 15)["job"]

    def heartbeat(self, uuid, lease, detail=None, progress=None):
        body = {"lease_token": lease}
        if detail is not None:
            body["status_detail"] = detail[:200]
        if progress is not None:
            body["progress"] = max(0.0, min(1.0, progress))
        return self.call("POST", "/jobs/%s/heartbeat" % uuid, body)

    def output(self, uuid, lease, data, content_type):
        q = urllib.parse.urlencode({"lease_token": lease})
        return self.call("PUT", "/jobs/%s/output?%s" % (uuid, q), raw=data, content_type=content_type, timeout=600)

    def complete(self, uuid, lease):
        return self.call("POST", "/jobs/%s/complete" % uuid, {"lease_token": lease})

    def fail(self, uuid, lease, error_type, message, retryable=False):
        return self.call("POST", "/jobs/%s/fail" % uuid, {"lease_token": lease, "error_type": error_type,
                                                          "error_message": (message or "failed")[:1000], "retryable": retryable})

    def release(self, uuid, lease):
        return self.call("POST", "/jobs/%s/release" % uuid, {"lease_token": lease})


def transient(err):
    if isinstance(err, HttpError):
        return err.status == 429 or err.status >= 500
    return isinstance(err, (urllib.error.URLError, OSError, TimeoutError))


class Job:
    """One claimed job: files in a temp dir, the command in its own process group, heartbeats."""

    def __init__(self, worker, job):
        self.w, self.job = worker, job
        self.uuid, self.lease = job["uuid"], job["lease_token"]
        self.stop_reason = None  # "cancelled", "lost" or "stop"
        self.proc = None
        self.detail = None
        self.lock = threading.Lock()
        self.done = threading.Event()

    def abort(self, why):
        with self.lock:
            if self.stop_reason is None:
                self.stop_reason = why
            proc = self.proc
        if proc is not None and proc.poll() is None:
            kill_group(proc, signal.SIGTERM)
            threading.Timer(KILL_GRACE, kill_group, (proc, signal.SIGKILL)).start()

    def heartbeats(self):
        lease_s = max(1.0, parse_time(self.job["lease_expires_at"]) - time.time())
        every = max(0.2, lease_s / 3)
        while not self.done.wait(every):
            self.beat()

    def beat(self):
        with self.lock:
            detail, self.detail = self.detail, None
        try:
            r = self.w.client.heartbeat(self.uuid, self.lease, *(detail or (None, None)))
            if r.get("cancel_requested"):
                self.abort("cancelled")
        except HttpError as e:
            if e.status in (401, 403, 409):
                self.abort("lost")
        except Exception:  # transient: the next beat tries again while the lease lasts
            pass

    def progress(self, text, fraction=None):
        with self.lock:
            self.detail = (text, fraction)
        threading.Thread(target=self.beat, daemon=True).start()

    def run(self):
        beater = threading.Thread(target=self.heartbeats, daemon=True)
        beater.start()
        d = tempfile.mkdtemp(prefix="media-jobs-worker-")
        try:
            code, tail = self.execute(d)
            self.done.set()
            if self.stop_reason in ("cancelled", "lost"):
                log("job dropped", job_uuid=self.uuid, why=self.stop_reason)
            elif self.stop_reason == "stop":
                self.w.client.release(self.uuid, self.lease)
                log("job released", job_uuid=self.uuid)
            elif code != 0:
                what = "the command exited with code %s" % code
                msg = what + (": " + "\n".join(tail)[-900:] if tail else "")
                r = self.w.client.fail(self.uuid, self.lease, "processing_error", msg, retryable=(code == 75))
                log("job failed", job_uuid=self.uuid, code=code, now=r["status"])
            else:
                out = [f for f in os.listdir(d) if f == "output" or f.startswith("output.")]
                data = open(os.path.join(d, out[0]), "rb").read() if out else b""
                if not data:
                    self.w.client.fail(self.uuid, self.lease, "processing_error",
                                       "the command exited 0 but wrote no output (write the result to {output} or $MJ_OUTPUT)")
                    return
                ctype = "application/json" if out[0].endswith(".json") else "text/plain" if out[0].endswith(".txt") else "application/octet-stream"
                self.w.client.output(self.uuid, self.lease, data, ctype)
                self.w.client.complete(self.uuid, self.lease)
                log("job completed", job_uuid=self.uuid, bytes=len(data))
        except HttpError as e:
            log("could not record the job outcome", job_uuid=self.uuid, error=str(e))
        except Exception as e:  # e.g. a staged input could not be downloaded
            log("job failed in the worker", job_uuid=self.uuid, error=str(e))
            try:
                if self.stop_reason is None:
                    self.w.client.fail(self.uuid, self.lease, "internal_error", "worker error: %s" % e)
            except Exception:
                pass
        finally:
            self.done.set()
            shutil.rmtree(d, ignore_errors=True)

    def execute(self, d):
        job, local, first = self.job, dict(self.job["input"]), {}
        for slot in SLOTS:
            urls = job["input"].get(slot)
            if not isinstance(urls, list):
                continue
            files = []
            for i, url in enumerate(urls):
                with urllib.request.urlopen(url, timeout=300) as res:
                    ext = EXT.get(res.headers.get("content-type", "").split(";")[0].strip(), "bin")
                    path = os.path.join(d, "%s%s.%s" % (slot, "-%d" % i if len(urls) > 1 else "", ext))
                    with open(path, "wb") as f:
                        shutil.copyfileobj(res, f)
                files.append(path)
            local[slot], first[slot] = files, files[0]
        input_json = os.path.join(d, "input.json")
        with open(input_json, "w") as f:
            json.dump(local, f)
        output = os.path.join(d, "output")
        values = dict(output=output, input_json=input_json, dir=d, model=job["model"], uuid=job["uuid"],
                      **{s: first.get(s, "") for s in SLOTS})
        args = [PLACEHOLDER.sub(lambda m: values[m.group(1)], a) for a in self.w.command]
        env = dict(os.environ, MJ_JOB_UUID=job["uuid"], MJ_JOB_TYPE=job["job_type"], MJ_MODEL=job["model"],
                   MJ_ATTEMPT=str(job["attempt"]), MJ_OUTPUT=output, MJ_INPUT_JSON=input_json, MJ_DIR=d,
                   MJ_OPTIONS=json.dumps({k: v for k, v in job["input"].items() if k not in SLOTS}),
                   **{"MJ_" + s.upper(): p for s, p in first.items()})
        with self.lock:
            if self.stop_reason is not None:
                return None, []
            self.proc = subprocess.Popen(args, cwd=d, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                         stderr=subprocess.PIPE, start_new_session=True)
        tail = []

        def watch(stream, is_err):
            for raw in iter(stream.readline, b""):
                line = raw.decode("utf-8", "replace").rstrip("\n")
                sys.stderr.write("[%s] %s\n" % (os.path.basename(args[0]), line))
                m = PROGRESS.match(line.strip())
                if m:
                    f = float(m.group(1)) if m.group(1) else None
                    self.progress(m.group(2) or "running", f if f is not None and 0 <= f <= 1 else None)
                elif is_err:
                    tail.append(line)
                    del tail[:-8]

        readers = [threading.Thread(target=watch, args=(self.proc.stdout, False), daemon=True),
                   threading.Thread(target=watch, args=(self.proc.stderr, True), daemon=True)]
        for t in readers:
            t.start()
        code = self.proc.wait()
        for t in readers:
            t.join(5)
        kill_group(self.proc, signal.SIGKILL)  # whatever it left behind in its group
        return code, tail


def kill_group(proc, sig):
    try:
        os.killpg(proc.pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def parse_time(iso):
    return calendar.timegm(time.strptime(iso[:19], "%Y-%m-%dT%H:%M:%S"))


class Worker:
    def __init__(self, args):
        self.client = Client(args.url, args.token)
        self.job_types, self.command, self.grace = args.job_type, args.command, args.grace
        self.stopping = threading.Event()
        self.fatal = None
        self.running = {}
        self.lock = threading.Lock()

    def loop(self):
        backoff = 0.0
        while not self.stopping.is_set():
            try:
                job = self.client.claim(self.job_types, 5)
                backoff = 0.0
            except Exception as e:
                if not transient(e):
                    self.fatal = e
                    log("worker stopping: the service refused it", error=str(e))
                    self.stopping.set()
                    return
                backoff = min(5.0, max(0.1, backoff * 2))
                log("claim failed; retrying", error=str(e), retry_in_s=backoff)
                self.stopping.wait(backoff)
                continue
            if not job:
                continue
            if self.stopping.is_set():
                try:
                    self.client.release(job["uuid"], job["lease_token"])
                except Exception:
                    pass
                return
            j = Job(self, job)
            with self.lock:
                self.running[j.uuid] = j
            log("job started", job_uuid=j.uuid, job_type=job["job_type"], attempt=job["attempt"])
            try:
                j.run()
            finally:
                with self.lock:
                    self.running.pop(j.uuid, None)

    def stop(self, *_):
        if self.stopping.is_set():
            return
        log("stopping: no new jobs; running ones get the grace period, then are handed back", grace_s=self.grace)
        self.stopping.set()

        def later():
            deadline = time.time() + self.grace
            while time.time() < deadline and self.running:
                time.sleep(0.05)
            with self.lock:
                jobs = list(self.running.values())
            for j in jobs:
                j.abort("stop")

        threading.Thread(target=later, daemon=True).start()


def main():
    argv = sys.argv[1:]
    if "--" not in argv or argv.index("--") == len(argv) - 1:
        sys.stderr.write("worker.py: give the command to run after \"--\" (see --help)\n")
        return 2
    sep = argv.index("--")
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--url", default=os.environ.get("MEDIA_JOBS_URL"))
    p.add_argument("--token", default=os.environ.get("MEDIA_JOBS_WORKER_TOKEN"))
    p.add_argument("--job-type", action="append", required=True)
    p.add_argument("--concurrency", type=int, default=1)
    p.add_argument("--grace", type=float, default=30.0, help="seconds running jobs get on SIGTERM")
    args = p.parse_args(argv[:sep])
    args.command = argv[sep + 1:]
    if not args.url or not args.token:
        sys.stderr.write("worker.py: --url and --token (or MEDIA_JOBS_URL, MEDIA_JOBS_WORKER_TOKEN) are required\n")
        return 2
    w = Worker(args)
    signal.signal(signal.SIGTERM, w.stop)
    signal.signal(signal.SIGINT, w.stop)
    log("worker started", url=args.url, job_types=args.job_type, concurrency=args.concurrency)
    loops = [threading.Thread(target=w.loop, daemon=True) for _ in range(max(1, args.concurrency))]
    for t in loops:
        t.start()
    while any(t.is_alive() for t in loops):
        for t in loops:
            t.join(0.2)
    log("worker stopped")
    return 1 if w.fatal else 0


if __name__ == "__main__":
    sys.exit(main())
