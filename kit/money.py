"""Money in dollars, from the micro-dollars the engine counts in, rounded once and shown as it was rounded.

The engine keeps costs as integer micro-dollars (exact). What people read, on a page or in a
spreadsheet, is dollars: to the cent, or to a hundredth of a cent where one run's cost would
otherwise round to nothing. The rounding is decimal (half up), never binary floating point,
so a page and the CSV behind it show the same figure.
"""

from __future__ import annotations

from decimal import ROUND_HALF_UP, Decimal

CENTS = 2  # totals
HUNDREDTHS_OF_A_CENT = 4  # one run's cost, or a per-run figure (a median, a cost per packet)
MICROS_PER_DOLLAR = Decimal(1_000_000)


def usd(micros: int | float | Decimal, *, places: int) -> Decimal:
    """`micros` micro-dollars as dollars rounded half up to `places` decimals: usd(1_234_567, places=2) == 1.23."""
    return (Decimal(str(micros)) / MICROS_PER_DOLLAR).quantize(Decimal(1).scaleb(-places), rounding=ROUND_HALF_UP)


def usd_text(dollars: Decimal) -> str:
    """Dollars as a person reads them, with the places they were rounded to: "$1,234.57", "-$0.0012"."""
    return f"{'-' if dollars < 0 else ''}${abs(dollars):,}"
