"""Zendesk's webhook signature: who sent a request to `POST /api/intake/zendesk`. Pure.

Zendesk signs each webhook request with the webhook's signing secret:
`X-Zendesk-Webhook-Signature` is base64(HMAC-SHA256(secret, timestamp + body)),
where the timestamp is the `X-Zendesk-Webhook-Signature-Timestamp` header's
value (ISO 8601, e.g. 2026-12-06T03:47:00Z) and the body the raw request body.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
from datetime import datetime

SIGNATURE_HEADER = "X-Zendesk-Webhook-Signature"
TIMESTAMP_HEADER = "X-Zendesk-Webhook-Signature-Timestamp"
MAX_SKEW_SECONDS = 300


def zendesk_signature(*, secret: str, timestamp: str, body: bytes) -> str:
    """The signature Zendesk sends for `body` signed at `timestamp`."""
    digest = hmac.new(secret.encode(), timestamp.encode() + body, hashlib.sha256).digest()
    return base64.b64encode(digest).decode("ascii")


def zendesk_refusal(*, secret: str, timestamp: str, signature: str, body: bytes, now: datetime) -> str | None:
    """Why the request is not Zendesk's, or None when it is: signed with `secret`, at most 5 minutes off `now`.

    The signature is compared in constant time, before the timestamp is even read.
    """
    if not signature or not timestamp:
        return f"the request has no {SIGNATURE_HEADER} or {TIMESTAMP_HEADER} header"
    expected = zendesk_signature(secret=secret, timestamp=timestamp, body=body)
    if not hmac.compare_digest(expected.encode(), signature.encode("utf-8", "surrogateescape")):
        return "the signature does not match the body and timestamp"
    signed_at = _parse(timestamp)
    if signed_at is None:
        return f"{TIMESTAMP_HEADER} is not an ISO 8601 time with a time zone"
    if abs((now - signed_at).total_seconds()) > MAX_SKEW_SECONDS:
        return f"the request was signed more than {MAX_SKEW_SECONDS // 60} minutes from now"
    return None


def _parse(timestamp: str) -> datetime | None:
    try:
        value = datetime.fromisoformat(timestamp)
    except ValueError:
        return None
    return value if value.tzinfo is not None else None
