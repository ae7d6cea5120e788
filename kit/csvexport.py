"""Every CSV the project writes goes through here, so that no cell reaches a spreadsheet as a formula.

A spreadsheet takes a cell that begins with `=`, `+`, `-`, `@`, a tab or a carriage
return for a formula; text from outside (a tool name a model proposed, a ticket
reference from a help desk) could then compute, or link out, when opened. Such
text is written with a leading single quote (OWASP's advice for CSV injection).
Numbers the application computed are written as numbers, a negative one included; a float
with no more than the 15 significant digits a double holds exactly (`96.98396199999999` is
written `96.983962`, `0.1 + 0.2` is `0.3`): figures that need a fixed number of places are
rounded as `Decimal` before they get here.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Iterable, Iterator, Sequence
from decimal import Decimal

from django.http import HttpResponse, StreamingHttpResponse

FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


def csv_cell(value: object) -> object:
    """`value` as it is safe to write: numbers as numbers (a float without its binary noise), text that would
    start a formula quoted with `'`."""
    if isinstance(value, float):
        return format(value, ".15g")
    if isinstance(value, int | Decimal) and not isinstance(value, bool):
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


STREAM_ROWS = 1000  # rows a streamed CSV sends at a time


def csv_stream_response(rows: Iterable[Sequence[object]], *, filename: str) -> StreamingHttpResponse:
    """A CSV download of `rows` (header first) written as they come, STREAM_ROWS at a time: for a listing
    too long to hold (a year of runs), read from the database while it is sent."""
    response = StreamingHttpResponse(_chunks(rows), content_type="text/csv")
    response["Content-Disposition"] = f'attachment; filename="{filename}"'
    return response


def _chunks(rows: Iterable[Sequence[object]]) -> Iterator[str]:
    buffer = io.StringIO()
    writer = csv.writer(buffer)
    for i, row in enumerate(rows, start=1):
        writer.writerow([csv_cell(value) for value in row])
        if i % STREAM_ROWS == 0:
            yield buffer.getvalue()
            buffer.seek(0)
            buffer.truncate()
    yield buffer.getvalue()
