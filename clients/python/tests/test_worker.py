"""media_jobs.worker end to end: run_worker/Worker in this process and `python -m media_jobs.worker`
as a child process, against declared (remote) job types of a started service."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import unittest
import urllib.request
from typing import Any, Dict, List

from media_jobs import AuthenticationError
from media_jobs.worker import JobContext, Output, Worker, WorkerJob, WorkerJobError, run_worker

from support import MEDIA, URL, WORKER_TOKEN, client, needs_worker, remote_type, wait_for


class Logs:
    def __init__(self) -> None:
        self.lines: List[Dict[str, Any]] = []

    def __call__(self, msg: str, **fields: Any) -> None:
        self.lines.append(dict(fields, msg=msg))

    def __str__(self) -> str:
        return "\n".join(json.dumps(x) for x in self.lines)


@needs_worker
class InProcess(unittest.TestCase):
    def setUp(self) -> None:
        self.c = client()
        self.logs = Logs()

    def start(self, job_type: str, handle: Any, **kw: Any) -> Worker:
        w = Worker(handle, job_types=[job_type], url=URL, token=WORKER_TOKEN, log=self.logs, **kw).start()

        def stop() -> None:
            w.stop(0)
            self.assertTrue(w.join(60), "the worker did not stop")

        self.addCleanup(stop)
        return w

    @unittest.skipUnless(MEDIA, "MJ_TEST_MEDIA_URL is not set")
    def test_a_handler_downloads_reports_progress_and_completes(self) -> None:
        t = remote_type("py-w-e2e")
        seen: Dict[str, Any] = {}
        go = threading.Event()

        def handle(job: WorkerJob, ctx: JobContext) -> Output:
            seen["job"] = job
            data = ctx.download(job.media["source"][0])
            assert isinstance(data, bytes)
            ctx.progress(50, "halfway")
            go.wait(60)
            return Output(data, "image/jpeg")

        w = self.start(t, handle)
        job = self.c.submit(t, model="v1", input={"source": MEDIA + "/photo.jpg", "scale": 2})  # type: ignore[operator]
        status = wait_for(lambda: (lambda s: s if s["status_detail"].startswith("halfway") else None)(self.c.status(job["uuid"])),
                          "the progress in the status")
        self.assertEqual(status["status"], "processing")
        self.assertIn("50", status["status_detail"])
        self.assertEqual(w.active, 1)
        go.set()
        done = self.c.wait(job["uuid"], timeout=60)
        self.assertEqual(done["status"], "completed", str(self.logs))

        got: WorkerJob = seen["job"]
        self.assertEqual((got.uuid, got.job_type, got.model, got.attempt), (job["uuid"], t, "v1", 1))
        self.assertEqual(got.input["scale"], 2)
        self.assertEqual(list(got.media), ["source"])
        self.assertNotIn(MEDIA, got.media["source"][0])  # a staged copy on the service, not the client's URL
        with urllib.request.urlopen(MEDIA + "/photo.jpg") as r:  # type: ignore[operator]
            original = r.read()
        with urllib.request.urlopen(self.c.result(job["uuid"])["url"]) as r:
            self.assertEqual(r.read(), original)

    def test_errors_fail_the_job_with_their_type_and_retryable_ones_come_back(self) -> None:
        t = remote_type("py-w-fail")
        attempts: List[int] = []

        def handle(job: WorkerJob, ctx: JobContext) -> Any:
            what = job.input["text"]
            if what == "typed":
                raise WorkerJobError("invalid_media", "no face in the source")
            if what == "bug":
                raise RuntimeError("boom in the model")
            attempts.append(job.attempt)
            if job.attempt == 1:
                raise WorkerJobError("processing_error", "GPU busy", retryable=True)
            return json.dumps({"attempt": job.attempt}).encode(), "application/json"

        self.start(t, handle)
        typed = self.c.submit(t, model="v1", input={"text": "typed"})
        bug = self.c.submit(t, model="v1", input={"text": "bug"})
        retried = self.c.submit(t, model="v1", input={"text": "retry"})
        a = self.c.wait(typed["uuid"], timeout=60)
        self.assertEqual((a["status"], a["error_type"], a["error_message"]), ("failed", "invalid_media", "no face in the source"))
        b = self.c.wait(bug["uuid"], timeout=60)
        self.assertEqual((b["status"], b["error_type"]), ("failed", "processing_error"))
        self.assertIn("boom in the model", b["error_message"])
        r = self.c.wait(retried["uuid"], timeout=60)
        self.assertEqual(r["status"], "completed", str(self.logs))
        self.assertEqual(attempts, [1, 2])
        with urllib.request.urlopen(self.c.result(retried["uuid"])["url"]) as res:
            self.assertEqual(json.loads(res.read()), {"attempt": 2})

    def test_a_cancel_aborts_the_handler(self) -> None:
        t = remote_type("py-w-cancel")
        reasons: List[str] = []
        started = threading.Event()

        def handle(job: WorkerJob, ctx: JobContext) -> Any:
            ctx.on_abort(reasons.append)
            started.set()
            ctx.aborted.wait(120)
            ctx.check()  # raises JobAborted
            return b"never"

        self.start(t, handle, heartbeat_interval=0.2)
        job = self.c.submit(t, model="v1", input={})
        self.assertTrue(started.wait(60))
        self.c.cancel(job["uuid"])
        wait_for(lambda: reasons, "the handler to hear of the cancel")
        self.assertEqual(reasons, ["cancelled"])
        self.assertEqual(self.c.status(job["uuid"])["status"], "cancelled")
        wait_for(lambda: any(x["msg"] == "job dropped" for x in self.logs.lines), "the worker to drop the job")

    def test_a_stop_hands_the_running_job_back(self) -> None:
        t = remote_type("py-w-stop")
        reasons: List[str] = []
        started = threading.Event()

        def handle(job: WorkerJob, ctx: JobContext) -> Any:
            started.set()
            ctx.aborted.wait(120)
            reasons.append(ctx.abort_reason or "")
            return b"too late"

        w = Worker(handle, job_types=[t], url=URL, token=WORKER_TOKEN, log=self.logs).start()
        job = self.c.submit(t, model="v1", input={})
        self.assertTrue(started.wait(60))
        w.stop(0.2)
        self.assertTrue(w.join(60))
        self.assertEqual(reasons, ["stop"])
        self.assertEqual(self.c.status(job["uuid"])["status"], "queued", str(self.logs))  # back in the queue
        self.c.cancel(job["uuid"])

    def test_a_refused_token_raises(self) -> None:
        with self.assertRaises(AuthenticationError) as e:
            run_worker(lambda j, c: None, job_types=[remote_type("py-w-stop")], url=URL, token="mjw_wrong",
                       handle_signals=False, log=self.logs)
        self.assertEqual(e.exception.status, 401)
        with self.assertRaises(ValueError):
            Worker(lambda j, c: None, job_types=[], url=URL, token="x")


@needs_worker
class CommandMode(unittest.TestCase):
    def test_python_m_media_jobs_worker_runs_a_command_per_job(self) -> None:
        t = remote_type("py-w-cli")
        c = client()
        d = tempfile.mkdtemp(prefix="mj-py-cli-")
        script = "\n".join([
            "import json, os, sys",
            "print('progress: 0.5 thinking', flush=True)",
            "json.dump({'text': json.loads(os.environ['MJ_OPTIONS'])['text'], 'uuid': sys.argv[1],"
            " 'token': os.environ.get('MEDIA_JOBS_WORKER_TOKEN')}, open(sys.argv[2], 'w'))",
        ])
        env = dict(os.environ, MEDIA_JOBS_URL=URL or "", MEDIA_JOBS_WORKER_TOKEN=WORKER_TOKEN or "",
                   PYTHONDONTWRITEBYTECODE="1")
        proc = subprocess.Popen(
            [sys.executable, "-m", "media_jobs.worker", "--job-type", t, "--grace", "1s", "--",
             sys.executable, "-c", script, "{uuid}", "{output}.json"],
            cwd=d, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        )
        self.addCleanup(lambda: None if proc.poll() is not None else proc.kill())
        job = c.submit(t, model="v1", input={"text": "hello"})
        done = c.wait(job["uuid"], timeout=60)
        proc.send_signal(signal.SIGTERM)
        out = proc.communicate(timeout=60)[0].decode()
        self.assertEqual(done["status"], "completed", out)
        with urllib.request.urlopen(c.result(job["uuid"])["url"]) as r:
            self.assertEqual(json.loads(r.read()), {"text": "hello", "uuid": job["uuid"], "token": None})
        self.assertEqual(proc.returncode, 0, out)
        self.assertIn('"msg": "job completed"', out)

    def test_usage_errors_exit_2(self) -> None:
        r = subprocess.run([sys.executable, "-m", "media_jobs.worker", "--job-type", "x"],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=dict(os.environ, MEDIA_JOBS_URL="http://x"))
        self.assertEqual(r.returncode, 2)
        self.assertIn(b'give the command to run after "--"', r.stderr)


if __name__ == "__main__":
    unittest.main()
