"""The tricky pieces on their own: no service needed."""
from __future__ import annotations

import ast
import io
import os
import unittest

import media_jobs
from media_jobs import errors
from media_jobs.client import _retry_after, _sse_messages
from media_jobs.worker import duration, guess_type, parse_progress


class Units(unittest.TestCase):
    def test_the_package_parses_as_python_3_9(self) -> None:
        here = os.path.dirname(media_jobs.__file__)
        for name in sorted(os.listdir(here)):
            if name.endswith(".py"):
                with open(os.path.join(here, name)) as f:
                    ast.parse(f.read(), filename=name, feature_version=(3, 9))

    def test_sse_messages(self) -> None:
        stream = io.BytesIO(
            b"retry: 1000\n\n: keep-alive\n\nid: 1\nevent: status\ndata: {\"a\":1}\n\n"
            b"event: progress\r\ndata:{\"b\":\r\ndata: 2}\r\n\r\ndata: plain\n\nevent: half"
        )
        self.assertEqual(
            list(_sse_messages(stream)),
            [("status", '{"a":1}'), ("progress", '{"b":\n2}'), ("message", "plain")],
        )

    def test_retry_after(self) -> None:
        self.assertEqual(_retry_after("3"), 3.0)
        self.assertIsNone(_retry_after(None))
        self.assertIsNone(_retry_after("soon"))
        self.assertEqual(_retry_after("Wed, 21 Oct 2015 07:28:00 GMT"), 0.0)  # in the past

    def test_errors_by_status(self) -> None:
        for status, cls in ((400, errors.BadRequestError), (401, errors.AuthenticationError),
                            (404, errors.NotFoundError), (409, errors.ConflictError), (410, errors.GoneError),
                            (429, errors.RateLimitError), (503, errors.ServiceUnavailableError),
                            (500, errors.MediaJobsError)):
            e = errors.error_for(status, "why", "req-1", retry_after=2.0)
            self.assertIs(type(e), cls)
            self.assertEqual((e.status, e.message, e.request_id, e.retry_after), (status, "why", "req-1", 2.0))

    def test_progress_lines(self) -> None:
        self.assertEqual(parse_progress("progress: 0.42 denoising"), ("denoising", 42.0))
        self.assertEqual(parse_progress("PROGRESS: 1"), ("processing", 100.0))
        self.assertEqual(parse_progress("progress: denoising"), ("denoising", None))
        self.assertEqual(parse_progress("progress: 42 steps"), ("42 steps", None))  # outside 0-1: text
        self.assertIsNone(parse_progress("loading weights"))

    def test_durations_and_types(self) -> None:
        self.assertEqual(duration("500ms"), 0.5)
        self.assertEqual(duration("2m"), 120)
        self.assertEqual(duration("30"), 30)
        self.assertEqual(guess_type(b'{"a": 1}', "output"), "application/json")
        self.assertEqual(guess_type(b"hello", "output.txt"), "text/plain")
        self.assertEqual(guess_type(b"\xff\xd8", "output.jpg"), "application/octet-stream")


if __name__ == "__main__":
    unittest.main()
