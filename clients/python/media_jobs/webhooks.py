"""Receiver-side verification of media-jobs webhooks.

Every signed delivery carries two styles of headers over the same timestamp and raw body:

    X-Service-Signature = lowercase hex( HMAC-SHA256( key = secret, message = timestamp + "." + raw_body ) )
    webhook-signature   = "v1," + base64( HMAC-SHA256( key = standard_key(secret), message = id + "." + timestamp + "." + raw_body ) )

where ``timestamp`` is the X-Service-Timestamp (or webhook-timestamp) header, ``id`` the event id and
``raw_body`` the body exactly as received. The second is Standard Webhooks'; during a secret
rotation it lists several space-separated signatures. The same scheme as the service's
src/webhooks/sign.ts and the TypeScript ``verifyWebhook``, with the same reasons.
"""
from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import re
import time
from typing import Any, Iterable, List, Mapping, Optional, Sequence, Tuple, Union, cast

from .types import WebhookEvent

EVENT_ID_HEADER = "x-service-event-id"
TIMESTAMP_HEADER = "x-service-timestamp"
SIGNATURE_HEADER = "x-service-signature"
STANDARD_ID_HEADER = "webhook-id"
STANDARD_TIMESTAMP_HEADER = "webhook-timestamp"
STANDARD_SIGNATURE_HEADER = "webhook-signature"
SECRET_PREFIX = "whsec_"

_HEX_SHA256 = re.compile(r"^[0-9a-fA-F]{64}$")
_UNIX_SECONDS = re.compile(r"^\d{1,15}$")

Headers = Union[Mapping[str, Any], Iterable[Tuple[str, str]]]


class WebhookVerificationError(Exception):
    """A delivery that must not be trusted. ``reason`` is stable for code: ``missing_header``,
    ``invalid_timestamp``, ``timestamp_too_old``, ``timestamp_in_future``, ``invalid_signature``,
    ``invalid_payload``; the message is for people."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason


def compute_signature(secret: Union[str, bytes], timestamp: Union[int, str], body: Union[str, bytes]) -> str:
    """Lowercase hex HMAC-SHA256 of ``timestamp + "." + body`` under ``secret``."""
    key = secret.encode("utf-8") if isinstance(secret, str) else secret
    raw = body.encode("utf-8") if isinstance(body, str) else body
    return hmac.new(key, str(timestamp).encode("ascii") + b"." + raw, hashlib.sha256).hexdigest()


def standard_key(secret: str) -> bytes:
    """Standard Webhooks' HMAC key: the base64 after ``whsec_``, else the secret's UTF-8 bytes."""
    if secret.startswith(SECRET_PREFIX):
        try:
            return base64.b64decode(secret[len(SECRET_PREFIX):])
        except (binascii.Error, ValueError):
            return secret.encode("utf-8")
    return secret.encode("utf-8")


def compute_standard_signature(
    secret: str, event_id: str, timestamp: Union[int, str], body: Union[str, bytes]
) -> str:
    """Base64 HMAC-SHA256 of ``id + "." + timestamp + "." + body`` (webhook-signature without ``v1,``)."""
    raw = body.encode("utf-8") if isinstance(body, str) else body
    message = ("%s.%s." % (event_id, timestamp)).encode("utf-8") + raw
    return base64.b64encode(hmac.new(standard_key(secret), message, hashlib.sha256).digest()).decode("ascii")


def _header(headers: Headers, name: str) -> Optional[str]:
    """A header in any letter case, from a dict, an email.message.Message (http.server's
    ``self.headers``), a WSGI-style mapping or a list of pairs."""
    value: Any = None
    get = getattr(headers, "get", None)
    if callable(get):
        value = get(name)
        if value is None:
            value = get(name.title())
    if value is None:
        items_of = getattr(headers, "items", None)  # a Mapping, or an email.message.Message
        for k, v in items_of() if callable(items_of) else headers:
            if isinstance(k, str) and k.lower() == name:
                value = v
                break
    if isinstance(value, (list, tuple)):
        value = value[0] if value else None
    if isinstance(value, bytes):
        value = value.decode("latin-1")
    if value is None:
        return None
    value = str(value).strip()
    return value or None


def _required(headers: Headers, *names: str) -> str:
    """The first of ``names`` present (the X-Service-* name, then the Standard Webhooks one)."""
    for name in names:
        value = _header(headers, name)
        if value is not None:
            return value
    raise WebhookVerificationError("missing_header", "missing %s header" % " or ".join(names))


def _signature_matches(headers: Headers, secrets: List[str], event_id: str, timestamp: str, raw: bytes) -> bool:
    """True when any signature of either header matches under any of the secrets."""
    hexes = [h.lower() for h in (_header(headers, SIGNATURE_HEADER) or "").split() if _HEX_SHA256.match(h)]
    standard = [s[3:] for s in (_header(headers, STANDARD_SIGNATURE_HEADER) or "").split() if s.startswith("v1,")]
    for secret in secrets:
        if hexes:
            expected = compute_signature(secret, timestamp, raw)
            if any(hmac.compare_digest(expected, h) for h in hexes):
                return True
        if standard:
            expected = compute_standard_signature(secret, event_id, timestamp, raw)
            if any(hmac.compare_digest(expected.encode("ascii"), s.encode("utf-8")) for s in standard):
                return True
    return False


def verify_webhook(
    secret: Union[str, Sequence[str]],
    headers: Headers,
    body: Union[bytes, str],
    tolerance: float = 300,
    now: Optional[float] = None,
) -> WebhookEvent:
    """Checks a delivery and returns its parsed event; raises WebhookVerificationError.

    ``body`` is the raw request body as received (bytes, before any JSON parsing), ``headers`` the
    request's headers, ``tolerance`` how many seconds X-Service-Timestamp may be from ``now``
    (default the system clock) either way. Checks, in order: the headers are present, a
    signature matches (constant-time comparison), the timestamp is fresh (replay protection), and
    the body is a JSON object whose ``event_id`` is the header's. Either header style is accepted
    (X-Service-* or Standard Webhooks' webhook-*), with several signatures; ``secret`` may be a list
    of secrets (the old and the new one while you rotate).
    """
    secrets = [secret] if isinstance(secret, str) else list(secret)
    if not secrets or not all(isinstance(s, str) and s for s in secrets):
        raise TypeError("verify_webhook: secret must be a non-empty string (or a list of them)")
    if not isinstance(body, (bytes, bytearray, str)):
        raise TypeError("verify_webhook: body must be the raw request body (bytes or str), not parsed JSON")
    raw = body.encode("utf-8") if isinstance(body, str) else bytes(body)

    event_id = _required(headers, EVENT_ID_HEADER, STANDARD_ID_HEADER)
    timestamp = _required(headers, TIMESTAMP_HEADER, STANDARD_TIMESTAMP_HEADER)
    _required(headers, SIGNATURE_HEADER, STANDARD_SIGNATURE_HEADER)
    if not _UNIX_SECONDS.match(timestamp):
        raise WebhookVerificationError(
            "invalid_timestamp", '%s must be Unix seconds (got "%s")' % (TIMESTAMP_HEADER, timestamp[:32])
        )

    if not _signature_matches(headers, secrets, event_id, timestamp, raw):
        raise WebhookVerificationError("invalid_signature", "signature does not match the body, timestamp and secret")

    skew = int(time.time() if now is None else now) - int(timestamp)
    if skew > tolerance:
        raise WebhookVerificationError(
            "timestamp_too_old", "timestamp is %ds old, more than the %gs tolerance (a replay?)" % (skew, tolerance)
        )
    if -skew > tolerance:
        raise WebhookVerificationError(
            "timestamp_in_future",
            "timestamp is %ds in the future, more than the %gs tolerance (check the clock)" % (-skew, tolerance),
        )

    try:
        event = json.loads(raw.decode("utf-8"))
    except ValueError:
        raise WebhookVerificationError("invalid_payload", "body is not valid JSON") from None
    if not isinstance(event, dict):
        raise WebhookVerificationError("invalid_payload", "body is not a JSON object")
    # The header is not signed; the body is. They must agree, so deduplicating on either is safe.
    if event.get("event_id") != event_id:
        raise WebhookVerificationError("invalid_payload", "%s does not match the payload's event_id" % EVENT_ID_HEADER)
    return cast(WebhookEvent, event)
