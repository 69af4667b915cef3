"""Retries: through a real proxy that fails on request in front of the real service, and a real
429 from a service with a tight rate limit."""
from __future__ import annotations

import json
import os
import time
import unittest
import uuid as uuidlib

from media_jobs import (
    APIConnectionError,
    Client,
    MediaJobsError,
    NotFoundError,
    RateLimitError,
    ServiceUnavailableError,
)

from support import KEY, URL, FaultProxy, closed_port, needs_service


@needs_service
class Retries(unittest.TestCase):
    def setUp(self) -> None:
        self.proxy = FaultProxy(URL)  # type: ignore[arg-type]
        self.addCleanup(self.proxy.close)
        self.c = Client(self.proxy.url, KEY, retry_delay=0.02)

    def requests(self, method: str = "", contains: str = "") -> list:
        return [s for s in self.proxy.seen if s[0].startswith(method) and contains in s[1]]

    def test_503_and_502_are_retried_until_an_answer(self) -> None:
        self.proxy.plan = [(503, {}), (502, {})]
        types = self.c.job_types()
        self.assertTrue(types)
        self.assertEqual(len(self.requests("GET", "/job-types")), 3)

    def test_429_waits_for_retry_after(self) -> None:
        self.proxy.plan = [(429, {"retry-after": "1"})]
        started = time.monotonic()
        self.assertTrue(self.c.job_types())
        self.assertGreaterEqual(time.monotonic() - started, 0.9)  # it waited as told
        self.assertEqual(len(self.requests("GET")), 2)

    def test_a_retry_after_beyond_max_retry_delay_is_raised(self) -> None:
        c = Client(self.proxy.url, KEY, max_retry_delay=1)
        self.proxy.plan = [(429, {"retry-after": "120"})]
        with self.assertRaises(RateLimitError) as e:
            c.job_types()
        self.assertEqual(e.exception.retry_after, 120)
        self.assertEqual(e.exception.request_id, "proxy-429")
        self.assertEqual(len(self.requests()), 1)

    def test_gives_up_after_its_retries(self) -> None:
        c = Client(self.proxy.url, KEY, retries=2, retry_delay=0.01)
        self.proxy.plan = [(503, {})] * 5
        with self.assertRaises(ServiceUnavailableError) as e:
            c.job_types()
        self.assertEqual(e.exception.status, 503)
        self.assertEqual(len(self.requests()), 3)

    def test_a_4xx_is_never_retried(self) -> None:
        with self.assertRaises(NotFoundError):
            self.c.status(str(uuidlib.uuid4()))
        self.assertEqual(len(self.requests()), 1)
        self.proxy.plan = [(400, {}), (409, {}), (410, {})]
        for _ in range(3):
            with self.assertRaises(MediaJobsError):
                self.c.job_types()
        self.assertEqual(len(self.requests()), 4)

    def test_connection_errors_are_retried(self) -> None:
        self.proxy.plan = ["drop", "drop"]
        self.assertTrue(self.c.job_types())
        self.assertEqual(len(self.requests()), 3)

    def test_connection_refused_raises_after_the_retries(self) -> None:
        c = Client("http://127.0.0.1:%d" % closed_port(), KEY, retries=2, retry_delay=0.01)
        with self.assertRaises(APIConnectionError) as e:
            c.job_types()
        self.assertEqual(e.exception.status, 0)
        self.assertIn("GET /api/v1/job-types failed", e.exception.message)

    def test_a_submit_whose_answer_is_lost_is_retried_with_the_same_key(self) -> None:
        self.proxy.plan = ["lose"]
        job = self.c.submit("test-sleep", model="v1", input={"ms": 0})
        posts = self.requests("POST", "/jobs/submit/")
        self.assertEqual(len(posts), 2)
        keys = {p[2].get("idempotency-key") for p in posts}
        self.assertEqual(len(keys), 1)
        self.assertTrue(keys.pop())
        # The first attempt made the job; the retry got that job back, not a second one.
        lost = json.loads(self.proxy.lost[0])["data"]
        self.assertEqual(job["uuid"], lost["uuid"])

    def test_a_cancel_whose_answer_is_lost_returns_the_cancelled_job(self) -> None:
        direct = Client(URL, KEY)
        job = direct.submit("test-sleep", model="v1", input={"ms": 120_000})
        self.proxy.plan = ["lose"]
        got = self.c.cancel(job["uuid"])
        self.assertEqual(got["status"], "cancelled")
        self.assertEqual(len(self.requests("POST", "/cancel")), 2)  # the retry met a 409: our own cancel

    def test_the_event_stream_reconnects_and_repeats_nothing(self) -> None:
        direct = Client(URL, KEY)
        job = direct.submit("test-sleep", model="v1", input={"ms": 1500})
        self.proxy.plan = [(503, {}), "cut", "cut"]
        events = list(self.c.events(job["uuid"]))
        self.assertGreaterEqual(len(self.requests("GET", "/events")), 4)
        self.assertEqual(events[-1].job["status"], "completed")
        states = [(e.job["status"], e.job["status_detail"], e.job.get("progress")) for e in events]
        for a, b in zip(states, states[1:]):
            self.assertNotEqual(a, b)


LIMITED_URL = os.environ.get("MJ_TEST_LIMITED_URL")
LIMITED_KEY = os.environ.get("MJ_TEST_LIMITED_KEY")


@unittest.skipUnless(LIMITED_URL and LIMITED_KEY, "MJ_TEST_LIMITED_URL is not set")
class RealRateLimit(unittest.TestCase):
    def test_the_service_429_is_a_rate_limit_error_with_retry_after(self) -> None:
        c = Client(LIMITED_URL, LIMITED_KEY, retries=0)
        with self.assertRaises(RateLimitError) as e:
            for _ in range(10):  # the limit is a few submits a minute
                c.submit("test-sleep", model="v1", input={"ms": 0})
        err = e.exception
        self.assertEqual(err.status, 429)
        self.assertIsNotNone(err.retry_after)
        self.assertGreaterEqual(err.retry_after, 0)  # type: ignore[operator]
        self.assertTrue(err.request_id)


if __name__ == "__main__":
    unittest.main()
