"""Gwet's 4 raters x 12 units example, written out once for every test that needs it.

Gwet (2014), "Handbook of Inter-Rater Reliability", 4th ed.; the same ratings are Krippendorff (2011)'s
reliability data ("Computing Krippendorff's alpha-reliability") and irrCAC's ``datasets.raw_4raters``,
copied here value for value from irrCAC 0.4.4 so the tests need no irrCAC: categories 1..5, None
where a rater did not rate the unit; unit 12 has a single rating. The oracle fixture holds the table as
irrCAC gives it, and ``test_agreement_oracle.py`` checks the two are the same.
"""

from __future__ import annotations

import pandas as pd

CATEGORIES: tuple[int, ...] = (1, 2, 3, 4, 5)
RATERS: tuple[str, ...] = ("Rater1", "Rater2", "Rater3", "Rater4")
# Units 1..12 (rows) x Rater1..Rater4 (columns).
RAW_4RATERS: tuple[tuple[int | None, ...], ...] = (
    (1, 1, None, 1),
    (2, 2, 3, 2),
    (3, 3, 3, 3),
    (3, 3, 3, 3),
    (2, 2, 2, 2),
    (1, 2, 3, 4),
    (4, 4, 4, 4),
    (1, 1, 2, 1),
    (2, 2, 2, 2),
    (None, 5, 5, 5),
    (None, None, 1, 1),
    (None, None, 3, None),
)


def raw_4raters() -> pd.DataFrame:
    """Units x raters as irrCAC's ``raw_4raters()`` returns it: index ``Units`` 1..12, float ratings, NaN missing."""
    frame = pd.DataFrame(list(RAW_4RATERS), columns=list(RATERS), dtype=float)
    frame.index = pd.Index(range(1, len(RAW_4RATERS) + 1), name="Units")
    return frame


def raw_4raters_long() -> pd.DataFrame:
    """The long layout medrev reads: ``Units``, ``rater``, ``score`` (a NaN score where a rating is missing)."""
    return raw_4raters().reset_index().melt(id_vars="Units", var_name="rater", value_name="score")
