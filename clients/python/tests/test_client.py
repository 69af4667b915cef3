"""Every Client method against a started service, over real HTTP on loopback."""
from __future__ import annotations

import datetime
import json
import os
import shutil
import tempfile
import unittest
import uuid as uuidlib
from typing import Any, Dict, List, Optional

import media_jobs
from media_jobs import (
    AuthenticationError,
    BadRequestError,
    Client,
    ConflictError,
    MediaJobsError,
    NotFoundError,
    WaitTimeoutError,
)

from support import KEY, MEDIA, URL, client, needs_media, needs_service

SLEEP = "test-sleep"  # the test service's job type that sleeps `ms`, then returns {"slept": ms}


def sleep_job(c: Client, ms: int = 0, options: Optional[Dict[str, Any]] = None, **kw: Any) -> Dict[str, Any]:
    opts: Dict[str, Any] = {"ms": ms}
    opts.update(options or {})
    return dict(c.submit(SLEEP, model="v1", input=opts, **kw))


class Configuration(unittest.TestCase):
    def test_defaults_come_from_the_environment(self) -> None:
        saved = {k: os.environ.get(k) for k in ("MEDIA_JOBS_URL", "MEDIA_JOBS_API_KEY")}
        try:
            os.environ["MEDIA_JOBS_URL"] = "http://jobs.example.com:8080/api/v1/"
            os.environ["MEDIA_JOBS_API_KEY"] = "mj_from_env"
            c = Client()
            self.assertEqual(c.base_url, "http://jobs.example.com:8080")
            del os.environ["MEDIA_JOBS_URL"]
            self.assertEqual(Client().base_url, "http://localhost:8080")
            del os.environ["MEDIA_JOBS_API_KEY"]
            with self.assertRaises(ValueError) as e:
                Client("http://localhost:8080")
            self.assertIn("MEDIA_JOBS_API_KEY", str(e.exception))
            with self.assertRaises(ValueError):
                Client("ftp://example.com", "k")
        finally:
            for k, v in saved.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v

    def test_the_installed_package_is_typed(self) -> None:
        here = os.path.dirname(media_jobs.__file__)
        self.assertTrue(os.path.isfile(os.path.join(here, "py.typed")), here)
        if os.environ.get("MJ_TEST_EXPECT_INSTALLED") == "1":
            # The runner installs the package with pip: the tests must use that copy, not the source.
            self.assertNotIn(os.path.join("clients", "python", "media_jobs"), here)


@needs_service
class Jobs(unittest.TestCase):
    def setUp(self) -> None:
        self.c = client()
        self.dir = tempfile.mkdtemp(prefix="mj-py-client-")
        self.addCleanup(shutil.rmtree, self.dir, True)

    def test_submit_wait_result_download(self) -> None:
        job = sleep_job(self.c, 50)
        self.assertIn(job["status"], ("queued", "processing"))
        self.assertEqual(job["job_type"], SLEEP)
        for field in ("uuid", "model", "status_detail", "error_type", "error_message", "result_ready", "created_at"):
            self.assertIn(field, job)
        seen: List[Any] = []
        done = self.c.wait(job["uuid"], timeout=60, on_update=seen.append)
        self.assertEqual(done["status"], "completed")
        self.assertTrue(done["result_ready"])
        self.assertEqual(seen[-1], done)  # on_update saw the end
        self.assertEqual(seen[0]["uuid"], job["uuid"])

        link = self.c.result(job["uuid"])
        self.assertEqual(link["uuid"], job["uuid"])
        self.assertEqual(link["content_type"], "application/json")
        self.assertTrue(link["url"].startswith("http"))

        path = os.path.join(self.dir, "out.json")
        got = self.c.download(job["uuid"], path)
        self.assertEqual(got["path"], path)
        with open(path, "rb") as f:
            data = f.read()
        self.assertEqual(json.loads(data), {"slept": 50})
        self.assertEqual(len(data), got["size_bytes"])
        self.assertEqual(os.listdir(self.dir), ["out.json"])  # no partial file left beside it

    def test_status_long_polls_until_terminal(self) -> None:
        job = sleep_job(self.c, 300)
        got = self.c.status(job["uuid"], wait=30)
        self.assertEqual(got["status"], "completed")  # answered at the end, not at once
        self.assertEqual(self.c.status(job["uuid"])["status"], "completed")

    def test_a_failed_job_is_returned_not_raised(self) -> None:
        job = sleep_job(self.c, 0, options={"fail": "processing_error"})
        done = self.c.wait(job["uuid"], timeout=60)
        self.assertEqual(done["status"], "failed")
        self.assertEqual(done["error_type"], "processing_error")
        self.assertIn("on purpose", done["error_message"])
        with self.assertRaises(ConflictError):
            self.c.result(job["uuid"])

    def test_wait_times_out_then_cancel(self) -> None:
        job = sleep_job(self.c, 120_000)
        with self.assertRaises(WaitTimeoutError) as e:
            self.c.wait(job["uuid"], timeout=0.5)
        self.assertIsNotNone(e.exception.job)
        self.assertEqual(e.exception.job["uuid"], job["uuid"])  # type: ignore[index]
        self.assertEqual(e.exception.status, 0)

        with self.assertRaises(ConflictError) as r:
            self.c.result(job["uuid"])  # not ready
        self.assertEqual(r.exception.status, 409)

        cancelled = self.c.cancel(job["uuid"])
        self.assertEqual(cancelled["status"], "cancelled")
        self.assertEqual(self.c.wait(job["uuid"], timeout=30)["status"], "cancelled")
        with self.assertRaises(ConflictError) as again:
            self.c.cancel(job["uuid"])  # terminal: 409, not retried
        self.assertTrue(again.exception.request_id)

    def test_idempotency_keys(self) -> None:
        key = "py-%s" % uuidlib.uuid4()
        a = sleep_job(self.c, 0, idempotency_key=key)
        b = sleep_job(self.c, 0, idempotency_key=key)
        self.assertEqual(a["uuid"], b["uuid"])
        with self.assertRaises(ConflictError) as e:
            sleep_job(self.c, 1, idempotency_key=key)  # the same key, another body
        self.assertEqual(e.exception.status, 409)
        # Without a key of one's own, each call is a new job (the generated key is per call).
        self.assertNotEqual(sleep_job(self.c, 0)["uuid"], sleep_job(self.c, 0)["uuid"])

    def test_jobs_iterates_every_page(self) -> None:
        mine = {sleep_job(self.c, 0)["uuid"] for _ in range(5)}
        for u in mine:
            self.c.wait(u, timeout=60)
        listed = [j["uuid"] for j in self.c.jobs(job_type=SLEEP, limit=2)]
        self.assertEqual(len(listed), len(set(listed)))  # no job twice across pages
        self.assertTrue(mine <= set(listed))
        for j in self.c.jobs(status="completed", job_type=SLEEP, limit=3):
            self.assertEqual((j["status"], j["job_type"]), ("completed", SLEEP))
        self.assertEqual(list(self.c.jobs(job_type="no-such-type-%s" % uuidlib.uuid4().hex[:6])), [])

    def test_job_types(self) -> None:
        types = {t["name"]: t for t in self.c.job_types()}
        self.assertIn(SLEEP, types)
        self.assertIn("image-transform", types)
        it = types["image-transform"]
        self.assertIn("lanczos3", [m["name"] for m in it["models"]])
        self.assertIn("source", it["slots"])
        self.assertEqual(it["submit_path"], "/api/v1/jobs/submit/image-transform")

    def test_durations_and_webhook_go_into_the_body(self) -> None:
        # Only what is given is sent: a seed-only service sees the same body as before.
        job = self.c.submit(SLEEP, model="v1", input={"ms": 0},
                            webhook={"url": "http://127.0.0.1:9/hook", "events": ["job.failed"]})
        self.assertEqual(self.c.wait(job["uuid"], timeout=60)["status"], "completed")
        self.assertEqual(media_jobs.client._duration(datetime.timedelta(minutes=5)), 300)
        self.assertEqual(media_jobs.client._duration(datetime.timedelta(milliseconds=1500)), 1.5)
        self.assertEqual(media_jobs.client._duration("1h30m"), "1h30m")


@needs_service
class Errors(unittest.TestCase):
    def setUp(self) -> None:
        self.c = client()

    def test_unknown_job_is_404_with_the_request_id(self) -> None:
        with self.assertRaises(NotFoundError) as e:
            self.c.status(str(uuidlib.uuid4()))
        err = e.exception
        self.assertIsInstance(err, MediaJobsError)
        self.assertEqual(err.status, 404)
        self.assertEqual(err.message, "job not found")
        self.assertTrue(err.request_id)
        self.assertIn("HTTP 404", str(err))
        self.assertEqual(err.body["code"], -1)  # type: ignore[index]

    def test_bad_request_names_the_field(self) -> None:
        with self.assertRaises(BadRequestError) as e:
            self.c.submit("image-transform", model="no-such-model", input={"source": "http://127.0.0.1:9/a.jpg"})
        self.assertEqual(e.exception.status, 400)
        self.assertIn("model", e.exception.message)

    def test_a_bad_key_is_401(self) -> None:
        with self.assertRaises(AuthenticationError) as e:
            Client(URL, "mj_not-a-key").job_types()
        self.assertEqual(e.exception.status, 401)

    def test_unknown_job_type_is_not_retried_and_raises(self) -> None:
        with self.assertRaises(MediaJobsError) as e:
            self.c.submit("no-such-type", model="v1", input={})
        self.assertIn(e.exception.status, (400, 404))


@needs_media
class Images(unittest.TestCase):
    def test_an_image_transform_downloads_a_real_image(self) -> None:
        c = client()
        job = c.submit("image-transform", model="lanczos3",
                       input={"source": MEDIA + "/photo.jpg", "width": 64, "format": "png"})  # type: ignore[operator]
        done = c.wait(job["uuid"], timeout=120)
        self.assertEqual(done["status"], "completed", done)
        d = tempfile.mkdtemp(prefix="mj-py-img-")
        self.addCleanup(shutil.rmtree, d, True)
        got = c.download(job["uuid"], os.path.join(d, "small.png"))
        self.assertEqual(got["content_type"], "image/png")
        with open(got["path"], "rb") as f:
            self.assertEqual(f.read(8), b"\x89PNG\r\n\x1a\n")


@needs_service
class Events(unittest.TestCase):
    def test_events_follow_a_job_to_its_end(self) -> None:
        c = client()
        job = sleep_job(c, 800)
        events = list(c.events(job["uuid"]))
        self.assertEqual(events[0].type, "status")
        self.assertEqual(events[-1].type, "status")
        self.assertEqual(events[-1].job["status"], "completed")
        self.assertTrue(events[-1].job["result_ready"])
        # No state twice in a row, and a status event exactly when the status changed.
        for prev, cur in zip(events, events[1:]):
            key = lambda e: (e.job["status"], e.job["status_detail"], e.job.get("progress"))  # noqa: E731
            self.assertNotEqual(key(prev), key(cur))
            self.assertEqual(cur.type == "status", prev.job["status"] != cur.job["status"])

    def test_events_of_a_finished_job_end_at_once(self) -> None:
        c = client()
        job = sleep_job(c, 0)
        c.wait(job["uuid"], timeout=60)
        events = list(c.events(job["uuid"]))
        self.assertEqual([(e.type, e.job["status"]) for e in events], [("status", "completed")])

    def test_events_of_an_unknown_job_raise_404(self) -> None:
        with self.assertRaises(NotFoundError):
            next(client().events(str(uuidlib.uuid4())))

    def test_a_consumer_may_stop_early(self) -> None:
        c = client()
        job = sleep_job(c, 60_000)
        stream = c.events(job["uuid"])
        first = next(stream)
        self.assertEqual(first.job["uuid"], job["uuid"])
        stream.close()  # closes the connection
        c.cancel(job["uuid"])


if __name__ == "__main__":
    unittest.main()
