"""Every CSV the project writes goes through here, so that no cell reaches a spreadsheet as a formula.

A spreadsheet takes a cell that begins with `=`, `+`, `-`, `@`, a tab or a carriage
return for a formula; text from outside (a tool name a model proposed, a ticket
reference from a help desk) could then compute, or link out, when opened. Such
text is written with a leading single quote (OWASP's advice for CSV injection).
Numbers the application computed are written as numbers, a negative one included.
"""

from __future__ import annotations

import csv
from collections.abc import Iterable, Sequence
from decimal import Decimal

from django.http import HttpResponse

FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


def csv_cell(value: object) -> object:
    """`value` as it is safe to write: numbers unchanged, text that would start a formula quoted with `'`."""
    if isinstance(value, int | float | Decimal) and not isinstance(value, bool):
        return value
    text = "" if value is None else str(value)
    return "'" + text if text.startswith(FORMULA_STARTS) else text


def csv_write(stream, rows: Iterable[Sequence[object]]) -> None:
    writer = csv.writer(stream)
    for row in rows:
        writer.writerow([csv_cell(value) for value in row])


def csv_response(rows: Iterable[Sequence[object]], *, filename: str) -> HttpResponse:
    """A CSV download of `rows` (header first), every cell through `csv_cell`."""
    response = HttpResponse(content_type="text/csv")
    response["Content-Disposition"] = f'attachment; filename="{filename}"'
    csv_write(response, rows)
    return response
