"""verify_webhook: the scheme's edge cases, then real signed deliveries from the service."""
from __future__ import annotations

import email.message
import json
import time
import unittest
import uuid as uuidlib

from media_jobs import WebhookVerificationError, compute_signature, compute_standard_signature, verify_webhook

from support import Receiver, client, needs_service, wait_for

SECRET = "whsec_python-tests"


def signed(body: bytes, secret: str = SECRET, ts: int = 0, event_id: str = "evt_1") -> dict:
    ts = ts or int(time.time())
    return {
        "X-Service-Event-Id": event_id,
        "X-Service-Timestamp": str(ts),
        "X-Service-Signature": compute_signature(secret, ts, body),
    }


BODY = json.dumps({"event_id": "evt_1", "event_type": "job.completed", "occurred_at": "2026-01-01T00:00:00.000Z",
                   "job": {"uuid": "u", "status": "completed", "status_detail": "done", "error_message": None,
                           "error_type": None, "result_ready": True}}).encode()


class Scheme(unittest.TestCase):
    def reason(self, headers: object, body: object = BODY, **kw: object) -> str:
        with self.assertRaises(WebhookVerificationError) as e:
            verify_webhook(SECRET, headers, body, **kw)  # type: ignore[arg-type]
        return e.exception.reason

    def test_the_signature_is_hmac_sha256_hex_of_timestamp_dot_body(self) -> None:
        import hashlib
        import hmac

        want = hmac.new(b"s", b"123." + b"{}", hashlib.sha256).hexdigest()
        self.assertEqual(compute_signature("s", 123, b"{}"), want)
        self.assertEqual(compute_signature("s", "123", "{}"), want)

    def test_a_good_delivery_returns_the_event(self) -> None:
        event = verify_webhook(SECRET, signed(BODY), BODY)
        self.assertEqual(event["event_type"], "job.completed")
        self.assertEqual(event["job"]["uuid"], "u")
        self.assertEqual(verify_webhook(SECRET, signed(BODY), BODY.decode())["event_id"], "evt_1")  # str body

    def test_headers_in_any_form_and_letter_case(self) -> None:
        h = signed(BODY)
        lower = {k.lower(): v for k, v in h.items()}
        upper = {k.upper(): [v] for k, v in h.items()}
        msg = email.message.Message()
        for k, v in h.items():
            msg[k] = v
        for form in (lower, upper, list(h.items()), msg):
            self.assertEqual(verify_webhook(SECRET, form, BODY)["event_id"], "evt_1")
        del msg["X-Service-Signature"]
        self.assertEqual(self.reason(msg), "missing_header")

    def test_what_is_refused_and_why(self) -> None:
        h = signed(BODY)
        self.assertEqual(self.reason({k: v for k, v in h.items() if "Signature" not in k}), "missing_header")
        self.assertEqual(self.reason({k: v for k, v in h.items() if "Timestamp" not in k}), "missing_header")
        self.assertEqual(self.reason(dict(h, **{"X-Service-Timestamp": "yesterday"})), "invalid_timestamp")
        self.assertEqual(self.reason(h, BODY.replace(b"completed", b"cancelled", 1)), "invalid_signature")
        self.assertEqual(self.reason(signed(BODY, secret="another")), "invalid_signature")
        self.assertEqual(self.reason(dict(h, **{"X-Service-Signature": "not hex"})), "invalid_signature")
        self.assertEqual(self.reason(h, now=time.time() + 301), "timestamp_too_old")
        self.assertEqual(self.reason(h, now=time.time() - 301), "timestamp_in_future")
        self.assertEqual(verify_webhook(SECRET, h, BODY, tolerance=1000, now=time.time() + 900)["event_id"], "evt_1")
        self.assertEqual(self.reason(signed(b"[1]"), b"[1]"), "invalid_payload")
        self.assertEqual(self.reason(signed(b"{nope"), b"{nope"), "invalid_payload")
        self.assertEqual(self.reason(signed(BODY, event_id="evt_other")), "invalid_payload")
        with self.assertRaises(TypeError):
            verify_webhook("", h, BODY)
        with self.assertRaises(TypeError):
            verify_webhook(SECRET, h, json.loads(BODY))  # type: ignore[arg-type]


class StandardWebhooks(unittest.TestCase):
    """The webhook-* headers: a vector from the npm standardwebhooks package, several signatures."""

    KEY = "whsec_cHl0aG9uIHRlc3RzIGtleSwgMjQgYnkh"

    def standard(self, secrets: list, ts: int = 0, event_id: str = "evt_1") -> dict:
        ts = ts or int(time.time())
        sigs = " ".join("v1," + compute_standard_signature(s, event_id, ts, BODY) for s in secrets)
        return {"webhook-id": event_id, "webhook-timestamp": str(ts), "webhook-signature": sigs}

    def test_the_signature_matches_the_standardwebhooks_package(self) -> None:
        # new Webhook(KEY).sign('evt_1', new Date(1700000000 * 1000), '{"a":1}') with standardwebhooks 1.1.1
        self.assertEqual(
            compute_standard_signature(self.KEY, "evt_1", 1700000000, b'{"a":1}'),
            "NuTvPMRH7Or4OvfAdx+PbYx5kINe6EhgLSOOciykUs0=",
        )

    def test_either_header_style_several_signatures_and_several_secrets(self) -> None:
        h = self.standard([self.KEY, SECRET])
        self.assertEqual(verify_webhook(self.KEY, h, BODY)["event_id"], "evt_1")
        self.assertEqual(verify_webhook(SECRET, h, BODY)["event_id"], "evt_1")
        self.assertEqual(verify_webhook(["old", SECRET], signed(BODY), BODY)["event_id"], "evt_1")
        both = dict(signed(BODY, secret="the new one"), **self.standard([SECRET]))
        self.assertEqual(verify_webhook(SECRET, both, BODY)["event_id"], "evt_1")  # the Standard header matches
        for headers, reason in (
            (self.standard(["another"]), "invalid_signature"),
            (dict(self.standard([SECRET]), **{"webhook-signature": "v2,abc v1,AAAA"}), "invalid_signature"),
            (dict(self.standard([SECRET]), **{"webhook-id": "evt_2"}), "invalid_signature"),
            (self.standard([SECRET], ts=int(time.time()) - 301), "timestamp_too_old"),
            ({k: v for k, v in self.standard([SECRET]).items() if k != "webhook-signature"}, "missing_header"),
        ):
            with self.assertRaises(WebhookVerificationError) as e:
                verify_webhook(SECRET, headers, BODY)
            self.assertEqual(e.exception.reason, reason)


@needs_service
class Endpoints(unittest.TestCase):
    """An owner endpoint receives a job's event; rotation signs with both secrets."""

    def test_endpoint_calls_and_a_rotated_delivery(self) -> None:
        receiver = Receiver()
        self.addCleanup(receiver.close)
        c = client()
        ep = c.create_webhook_endpoint(receiver.url + "/py-endpoint", events=["job.completed"], description="py")
        self.addCleanup(lambda: c.delete_webhook_endpoint(ep["id"]))
        self.assertTrue(ep["secret"].startswith("whsec_"))
        self.assertIn(ep["id"], [e["id"] for e in c.webhook_endpoints()])
        new = c.rotate_webhook_endpoint_secret(ep["id"])
        uuid = c.submit("test-sleep", model="v1", input={"ms": 0})["uuid"]
        d = receiver.find("/py-endpoint")
        for secret in (new, ep["secret"]):
            self.assertEqual(verify_webhook(secret, d.headers, d.body)["job"]["uuid"], uuid)
        page = wait_for(
            lambda: (lambda p: p if p["deliveries"] and p["deliveries"][0]["state"] == "delivered" else None)(
                c.webhook_endpoint_deliveries(ep["id"])
            ),
            "delivered",
        )
        self.assertEqual(page["deliveries"][0]["job_uuid"], uuid)
        self.assertEqual(c.recover_webhook_endpoint(ep["id"], "2020-01-01T00:00:00Z"), 0)
        self.assertEqual(c.update_webhook_endpoint(ep["id"], description="changed")["description"], "changed")
        self.assertEqual(c.enable_webhook_endpoint(ep["id"])["status"], "enabled")
        self.assertEqual(c.webhook_endpoint(ep["id"])["secret"], new)


@needs_service
class RealDeliveries(unittest.TestCase):
    """Deliveries signed by the service itself, received by a real HTTP server on loopback."""

    def setUp(self) -> None:
        self.receiver = Receiver()
        self.addCleanup(self.receiver.close)
        self.c = client()

    def submit(self, path: str, ms: int, **webhook: object) -> str:
        hook = dict(url=self.receiver.url + path, **webhook)
        return self.c.submit("test-sleep", model="v1", input={"ms": ms}, webhook=hook)["uuid"]  # type: ignore[arg-type]

    def test_completed_and_cancelled_deliveries_verify(self) -> None:
        done = self.submit("/done", 0, secret=SECRET)
        d = self.receiver.find("/done")
        event = verify_webhook(SECRET, d.headers, d.body)  # http.server's headers, the raw bytes
        self.assertEqual(event["event_type"], "job.completed")
        self.assertEqual(event["job"]["uuid"], done)
        self.assertEqual(event["job"]["status"], "completed")
        self.assertTrue(event["job"]["result_ready"])
        self.assertEqual(event["event_id"], d.headers["X-Service-Event-Id"])

        stopped = self.submit("/cancelled", 120_000, secret=SECRET)
        self.c.cancel(stopped)
        d2 = self.receiver.find("/cancelled")
        self.assertEqual(verify_webhook(SECRET, d2.headers, d2.body)["event_type"], "job.cancelled")

        # The same real delivery, tampered with or checked with the wrong secret or too late, is refused.
        for secret, body, now, reason in (
            ("whsec_wrong", d.body, None, "invalid_signature"),
            (SECRET, d.body.replace(done.encode(), str(uuidlib.uuid4()).encode()), None, "invalid_signature"),
            (SECRET, d.body, time.time() + 3600, "timestamp_too_old"),
        ):
            with self.assertRaises(WebhookVerificationError) as e:
                verify_webhook(secret, d.headers, body, now=now)
            self.assertEqual(e.exception.reason, reason)

    def test_the_delivery_log_and_a_redelivery(self) -> None:
        uuid = self.submit("/log", 0, secret=SECRET)
        first = self.receiver.find("/log")
        event_id = first.headers["X-Service-Event-Id"]
        log = wait_for(lambda: [d for d in self.c.webhook_deliveries(uuid) if d["state"] == "delivered"], "delivered")
        self.assertEqual([(d["event_id"], d["event_type"]) for d in log], [(event_id, "job.completed")])
        self.assertEqual(log[0]["attempts"][0]["http_status"], 204)
        again = self.c.redeliver_webhook(uuid, event_id)
        self.assertEqual(again["event_id"], event_id)
        wait_for(lambda: len([d for d in self.receiver.deliveries if d.path == "/log"]) == 2, "the redelivery")
        second = [d for d in self.receiver.deliveries if d.path == "/log"][1]
        self.assertEqual(second.body, first.body)  # the same event, byte for byte, signed afresh
        self.assertEqual(verify_webhook(SECRET, second.headers, second.body)["event_id"], event_id)

    def test_a_delivery_without_a_secret_is_unsigned(self) -> None:
        self.submit("/unsigned", 0)
        d = self.receiver.find("/unsigned")
        self.assertIsNone(d.headers.get("X-Service-Signature"))
        with self.assertRaises(WebhookVerificationError) as e:
            verify_webhook(SECRET, d.headers, d.body)
        self.assertEqual(e.exception.reason, "missing_header")


if __name__ == "__main__":
    unittest.main()
