"""One line of text: the one definition of what breaks a line, for titles, subjects and one-line settings.

Only Django's ValidationError is imported (settings use it too: nothing here reads settings).
"""

from __future__ import annotations

from django.core.exceptions import ValidationError

# Every character str.splitlines() breaks at: LF, VT, FF, CR, the file, group and record separators,
# NEL, and the Unicode line and paragraph separators. A title that holds one shows as two lines
# somewhere (a log, a CSV, a help desk's note) and can pass for a second field.
LINE_BREAKS = frozenset("\n\x0b\x0c\r\x1c\x1d\x1e\x85\u2028\u2029")


def line_break_in(value: str) -> str | None:
    """The first line or paragraph separator in `value`, or None when it is one line."""
    return next((char for char in value if char in LINE_BREAKS), None)


def single_line_check(value: str, what: str) -> str:
    """`value` unchanged when it is one line; ValueError naming `what` and the separator otherwise."""
    char = line_break_in(value)
    if char is not None:
        raise ValueError(f"the {what} is more than one line (it contains U+{ord(char):04X})")
    return value


def validate_single_line(value: str) -> None:
    """The model fields' validator (admin forms): the same rule as a Django ValidationError."""
    char = line_break_in(value)
    if char is not None:
        raise ValidationError(f"Use one line: this text contains a line break (U+{ord(char):04X}).", code="single_line")
