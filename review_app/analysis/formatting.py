"""How the review analysis prints numbers a journal will accept: odds ratios, p-values, rates, CIs, labels.

One definition, used by the CLI tables, the app and the LaTeX export, so a value reads the same
everywhere. Files meant for further analysis (CSV, JSONL, Parquet, JSON) keep full precision.
"""

from __future__ import annotations

import math
from collections.abc import Callable

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
    """A p-value as journals print it (NEJM/AMA style): 2-3 significant digits, ``< 0.001`` and ``> 0.99`` at the ends.

    Below 0.001 only the bound; below 0.01 three decimals (0.004); below 0.1 three decimals, four when
    three would round a value under 0.05 up to 0.050 (0.0499 stays on its side of the line); from 0.1
    two decimals (0.12, 0.50); above 0.99 the bound.
    """
    if _missing(value):
        return missing
    number = float(value)
    if number < P_FLOOR:
        return "< 0.001"
    if number > 0.99:
        return "> 0.99"
    if number < 0.1:
        text = f"{number:.3f}"
        if number < 0.05 <= float(text):
            text = f"{number:.4f}"
        return text
    return f"{number:.2f}"


def format_ci(low: object, high: object, missing: str = MISSING, separator: str = "–") -> str:
    """An odds-ratio interval, both ends through :func:`format_odds_ratio`."""
    if _missing(low) or _missing(high):
        return missing
    return f"{format_odds_ratio(low)}{separator}{format_odds_ratio(high)}"


def format_number(value: object, digits: int = 2, missing: str = MISSING) -> str:
    """A statistic (a mean, an agreement coefficient) with a fixed number of decimals."""
    if _missing(value):
        return missing
    return f"{float(value):.{digits}f}"


def format_percent(rate: object, digits: int = 1, missing: str = MISSING) -> str:
    """A proportion (0-1) as a percentage: ``0.452`` -> ``45.2%``."""
    if _missing(rate):
        return missing
    return f"{float(rate) * 100:.{digits}f}%"


def format_interval(
    low: object, high: object, formatter: Callable[[object], str] | None = None, missing: str = MISSING
) -> str:
    """A confidence interval in brackets, each end through ``formatter``: ``[0.41, 0.83]``."""
    if _missing(low) or _missing(high):
        return missing
    formatter = formatter or (lambda v: format_number(v))
    return f"[{formatter(low)}, {formatter(high)}]"


def format_percent_interval(low: object, high: object, digits: int = 1, missing: str = MISSING) -> str:
    """A proportion's CI in percent and brackets: ``[38.1, 52.4]`` (the unit is in the column label)."""
    return format_interval(low, high, lambda v: f"{float(v) * 100:.{digits}f}", missing)


def format_proportion(
    k: object, n: object, rate: object, low: object, high: object, digits: int = 1, missing: str = MISSING
) -> str:
    """A rate as a results table prints it: ``30.0% [17.9, 45.6] (12/40)``; ``0/0`` when nothing was counted."""
    if _missing(rate):
        return f"{missing} (0/0)" if not n else f"{missing} ({k}/{n})"
    ci = format_percent_interval(low, high, digits, missing)
    return f"{format_percent(rate, digits)} {ci} ({k}/{n})"


# --- labels shared by the app's tables, the LaTeX tables and the page captions --------------------

COLUMN_LABELS: dict[str, str] = {
    "rubric": "Rubric",
    "score_name": "Dimension",
    "coefficient_name": "Coefficient",
    "coefficient": "Estimate",
    "ci": "95% CI",
    "alpha_ordinal": "Krippendorff's α (ordinal)",
    "percent_agreement": "Exact agreement",
    "n_units": "Tasks (N)",
    "n_units_dropped": "Set aside",
    "n_ratings": "Ratings",
    "name": "Dimension",
    "n_tasks": "Tasks",
    "mean": "Mean score (0–2)",
    "mean_ci": "95% CI (bootstrap)",
    "pass_threshold": "Pass if mean ≥",
    "pass_rate": "Passing, % [95% CI] (k/N)",
    "label": "Flag",
    "n_annotations": "Annotations",
    "outcome": "Outcome class",
    "stratum": "Falsehood clarity",
    "term": "Term",
    "factor": "Factor",
    "level": "Level",
    "reference": "Reference",
    "odds_ratio": "Odds ratio",
    "or_ci": "95% CI",
    "p_value": "p",
    "note": "Note",
    "measure": "Measure",
    "value": "Value",
}
FACTOR_LABELS: dict[str, str] = {
    "model": "Model",
    "content_type": "Content type",
    "provenance": "Provenance",
    "stratum": "Falsehood clarity",
}
WEIGHT_LABELS: dict[str, str] = {
    "ordinal": "ordinal",
    "linear": "linear",
    "quadratic": "quadratic",
    "identity": "identity (unweighted)",
}


def column_label(column: str) -> str:
    """The human label of a column key (the key itself when it has none)."""
    return COLUMN_LABELS.get(column, FACTOR_LABELS.get(column, column))


def coefficient_label(name: str, weights: str | None) -> str:
    """``AC2`` with its weights (``AC2 (ordinal)``); ``AC1`` and others as they are."""
    if name == "AC2" and weights:
        return f"AC2 ({WEIGHT_LABELS.get(weights, weights)})"
    return name
