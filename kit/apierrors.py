"""The error body every JSON endpoint answers with: a machine code, a message for people, and field errors."""

from __future__ import annotations

from typing import Any

from ninja import Schema
from ninja.responses import codes_4xx

ERRORS = codes_4xx | frozenset({413, 422})  # ninja's 4xx set leaves out 413 (body too large) and 422 (invalid input)


class ErrorOut(Schema):
    code: str
    message: str
    errors: list[dict[str, Any]] | None = None
