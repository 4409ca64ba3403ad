"""How the review analysis prints numbers a journal will accept: odds ratios and p-values.

One definition, used by the CLI tables, the app and the LaTeX export, so a value reads the same
everywhere. Files meant for further analysis (CSV, JSONL, Parquet, JSON) keep full precision.
"""

from __future__ import annotations

import math

MISSING = "—"
OR_CAP = 1000.0
P_FLOOR = 0.001


def _missing(value: object) -> bool:
    if value is None:
        return True
    try:
        return not math.isfinite(float(value))
    except (TypeError, ValueError):
        return True


def format_odds_ratio(value: object, missing: str = MISSING) -> str:
    """An odds ratio (or a CI end) with precision that fits its size; ``> 1000`` and ``< 0.001`` at the ends.

    Below 0.1 three decimals (0.045), below 10 two (2.35), below 100 one (23.5), up to 1000 none
    (235); beyond, the value only says it is huge or tiny, never twenty digits of noise.
    """
    if _missing(value):
        return missing
    number = float(value)
    if number > OR_CAP:
        return f"> {OR_CAP:.0f}"
    if number < P_FLOOR:
        return "< 0.001"
    if number < 0.1:
        return f"{number:.3f}"
    if number < 10:
        return f"{number:.2f}"
    if number < 100:
        return f"{number:.1f}"
    return f"{number:.0f}"


def format_p(value: object, missing: str = MISSING) -> str:
    """A p-value as journals print it: ``< 0.001`` below 0.001, otherwise three decimals."""
    if _missing(value):
        return missing
    number = float(value)
    return "< 0.001" if number < P_FLOOR else f"{number:.3f}"


def format_ci(low: object, high: object, missing: str = MISSING, separator: str = "–") -> str:
    """An odds-ratio interval, both ends through :func:`format_odds_ratio`."""
    if _missing(low) or _missing(high):
        return missing
    return f"{format_odds_ratio(low)}{separator}{format_odds_ratio(high)}"
