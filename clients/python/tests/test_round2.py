"""The client against the Jobs API round 2 (issue 19): deadlines, priority,
retention, deletion, batches, and progress objects from workers and in SSE.
"""
from __future__ import annotations

import threading
import unittest
import uuid as uuidlib
from typing import Any, List

from media_jobs import BadRequestError, ConflictError, GoneError, NotFoundError
from media_jobs.worker import JobContext, Output, Worker, WorkerJob

from support import URL, WORKER_TOKEN, client, needs_service, needs_worker, remote_type, wait_for

@needs_service
class Round2(unittest.TestCase):
    def setUp(self) -> None:
        self.c = client()

    def test_submit_carries_deadline_priority_and_retention(self) -> None:
        job = self.c.submit("test-sleep", model="v1", input={"ms": 0}, cancel_after="5m", priority=30, retention="1h")
        self.assertIsNotNone(job["deadline"])
        self.assertEqual(job["priority"], 30)
        self.assertFalse(job["data_removed"])
        plain = self.c.submit("test-sleep", model="v1", input={"ms": 0})
        self.assertIsNone(plain["deadline"])
        self.assertEqual(plain["priority"], 0)
        with self.assertRaises(BadRequestError) as e:
            self.c.submit("test-sleep", model="v1", input={"ms": 0}, priority=601)
        self.assertIn("priority", e.exception.message)

    def test_a_deadline_cancels_a_job_still_queued(self) -> None:
        # A remote type with no worker: the job can only wait in the queue.
        job = self.c.submit(remote_type("py-w-deadline"), model="v1", input={}, cancel_after=1)
        done = self.c.wait(job["uuid"], timeout=60)
        self.assertEqual(done["status"], "cancelled")
        self.assertEqual(done["status_detail"], "deadline passed while queued")

    def test_delete_leaves_a_tombstone(self) -> None:
        job = self.c.submit("test-sleep", model="v1", input={"ms": 0})
        self.c.wait(job["uuid"], timeout=60)
        gone = self.c.delete(job["uuid"])
        self.assertTrue(gone["data_removed"])
        self.assertFalse(gone["result_ready"])
        self.assertEqual(gone["status"], "completed")
        self.assertEqual(self.c.delete(job["uuid"]), gone)  # the same answer again
        with self.assertRaises(GoneError):
            self.c.result(job["uuid"])
        running = self.c.submit("test-sleep", model="v1", input={"ms": 60_000})
        with self.assertRaises(ConflictError):
            self.c.delete(running["uuid"])
        self.c.cancel(running["uuid"])
        with self.assertRaises(NotFoundError):
            self.c.delete(str(uuidlib.uuid4()))

    def test_a_batch_answers_per_item_and_a_retry_makes_no_second_job(self) -> None:
        items = [
            {"job_type": "test-sleep", "model": "v1", "input": {"ms": 0}},
            {"job_type": "test-sleep", "model": "nope", "input": {"ms": 0}},
            {"job_type": "test-sleep", "model": "v1", "input": {"ms": 0}, "idempotency_key": "own-%s" % uuidlib.uuid4()},
        ]
        key = "batch-%s" % uuidlib.uuid4()
        first = self.c.submit_batch(items, idempotency_key=key)
        self.assertEqual([i["status"] for i in first], [200, 400, 200])
        self.assertEqual(first[1]["code"], -1)
        self.assertIn("model", first[1]["message"])
        again = self.c.submit_batch(items, idempotency_key=key)
        self.assertEqual([i["data"].get("uuid") for i in again], [i["data"].get("uuid") for i in first])


@needs_worker
class Round2Progress(unittest.TestCase):
    def test_worker_progress_is_an_object_in_the_status_and_the_stream(self) -> None:
        t = remote_type("py-w-progress")
        c = client()
        go = threading.Event()

        def handle(job: WorkerJob, ctx: JobContext) -> Output:
            ctx.progress(34.2, "swapping faces")
            go.wait(60)
            return Output(b'{"ok": true}', "application/json")

        logs: List[Any] = []
        w = Worker(handle, job_types=[t], url=URL, token=WORKER_TOKEN, log=lambda m, **f: logs.append(m)).start()
        self.addCleanup(lambda: (w.stop(0), w.join(60)))
        job = c.submit(t, model="v1", input={})
        events = c.events(job["uuid"])
        seen = wait_for(lambda: (lambda s: s if s.get("progress") else None)(c.status(job["uuid"])), "progress")
        self.assertEqual(seen["progress"]["stage"], "swapping faces")
        self.assertAlmostEqual(seen["progress"]["percent"], 34.2)
        self.assertTrue(w.client.progress_objects)  # the service took the object form
        go.set()
        got = list(events)
        self.assertTrue(any(e.job.get("progress") for e in got))
        self.assertEqual(got[-1].job["status"], "completed")


if __name__ == "__main__":
    unittest.main()
