"""Every CSV export writes its cells through kit.csvexport: no cell reaches a spreadsheet as a formula."""

import csv
import io
from decimal import Decimal

import pytest

from kit.csvexport import csv_cell, csv_write


@pytest.mark.parametrize(
    "value,written",
    [
        ("=1+1", "'=1+1"),
        ("+1", "'+1"),
        ("-2+3", "'-2+3"),
        ("-3", "'-3"),  # text, even when it reads as a number: only numbers the application computed stay numeric
        ("@SUM(A1)", "'@SUM(A1)"),
        ("\t=1", "'\t=1"),
        ("\r=1", "'\r=1"),
        ("read_job_status", "read_job_status"),
        ("a=b", "a=b"),
        ("", ""),
        (None, ""),
        (-3, -3),
        (-0.25, "-0.25"),
        (96.98396199999999, "96.983962"),  # a float without its binary noise
        (0.1 + 0.2, "0.3"),
        (1 / 3, "0.333333333333333"),
        (2.0, "2"),
        (Decimal("-1.5"), Decimal("-1.5")),
        (0, 0),
        (True, "True"),
    ],
)
def test_csv_cell(value, written):
    assert csv_cell(value) == written


def test_negative_numbers_are_written_as_numbers_and_formula_text_quoted():
    stream = io.StringIO()
    csv_write(stream, [("name", "delta"), ("=cmd|' /C calc'!A0", -12), ("-1", -0.5)])
    assert list(csv.reader(io.StringIO(stream.getvalue()))) == [
        ["name", "delta"],
        ["'=cmd|' /C calc'!A0", "-12"],
        ["'-1", "-0.5"],
    ]
