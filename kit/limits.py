"""The API's limit on request bodies, checked before a body is read (by the auth classes, and by
operations that take no token)."""

from __future__ import annotations

from kit.refused import Refused

MAX_BODY_BYTES = 64 * 1024


def body_size_check(request) -> None:
    """Refuse (413) a body whose Content-Length is above MAX_BODY_BYTES, before it is read."""
    try:
        length = int(request.META.get("CONTENT_LENGTH") or 0)
    except ValueError:
        raise Refused("bad_request", "Content-Length is not a number.", 400) from None
    if length > MAX_BODY_BYTES:
        raise Refused("body_too_large", f"The request body is larger than {MAX_BODY_BYTES} bytes.", 413)
