"""irrCAC on the oracle's cases: runs inside the oracle's own environment only (irrCAC, scipy 1.12, pandas 2).

Imported by ``irrcac_oracle.py`` (its sibling, from this folder) in compute mode; it never imports medrev.
"""

from __future__ import annotations

import math
import sys
import warnings

Table = list[list[float | None]]


def _json_float(value: object) -> float | None:
    number = float(value)
    return number if math.isfinite(number) else None


def _rated(row: list[float | None]) -> int:
    return sum(x is not None for x in row)


def irrcac_outputs(
    table: Table, categories: list[float], weights: str, min_ratings: int, confidence: float
) -> dict[str, object]:
    """irrCAC's ``CAC(...).gwet()`` on the table, as medrev's ``min_ratings`` sees it.

    With ``min_ratings=2`` the singly rated (and unrated) units are removed before irrCAC sees the
    table, since irrCAC always keeps them; with 1 the table goes in whole (irrCAC drops unrated units
    itself). Non-finite values become None, and which ones were not finite is recorded.
    """
    import numpy as np
    import pandas as pd
    from irrCAC.raw import CAC

    rows = [row for row in table if _rated(row) >= min_ratings]
    frame = pd.DataFrame(
        [[np.nan if x is None else float(x) for x in row] for row in rows],
        columns=[f"Rater{j + 1}" for j in range(len(table[0]))],
    )
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        cac = CAC(frame, weights=weights, categories=list(categories), confidence_level=confidence, digits=15)
        est = cac.gwet()["est"]
    raw = {
        "coefficient": est["coefficient_value"],
        "se": est["se"],
        "ci_low": est["confidence_interval"][0],
        "ci_high": est["confidence_interval"][1],
        "pa": est["pa"],
        "pe": est["pe"],
        "p_value": est["p_value"],
    }
    outputs: dict[str, object] = {key: _json_float(value) for key, value in raw.items()}
    outputs["n_units"] = int(cac.n)
    outputs.update(_exact_t_interval(float(est["coefficient_value"]), float(est["se"]), int(cac.n) - 1, confidence))
    outputs["coefficient_name"] = est["coefficient_name"]
    nonfinite = {key: repr(float(value)) for key, value in raw.items() if not math.isfinite(float(value))}
    if nonfinite:
        outputs["nonfinite"] = nonfinite
    return outputs


def _exact_t_quantile(p: float, df: int) -> float:
    """The Student-t quantile to the last bit: scipy 1.12's ``t.ppf`` refined by Newton steps on ``t.sf``.

    scipy 1.12's ``t.ppf`` (irrCAC's, through ``t.interval``) is off by up to about 1e-8 relative
    (2.02269091173 for the 0.975 quantile on 39 df, against 2.02269092004); its ``t.sf`` and ``t.pdf``
    are accurate, so three Newton steps give the quantile to about 1e-15 relative.
    """
    from scipy import stats

    x = float(stats.t.ppf(p, df))
    for _ in range(3):
        x += float((stats.t.sf(x, df) - (1 - p)) / stats.t.pdf(x, df))
    return x


def _exact_t_interval(coefficient: float, se: float, df: int, confidence: float) -> dict[str, object]:
    """irrCAC's interval again, with the exact Student-t quantile in place of scipy 1.12's.

    The limits are irrCAC's statements (``t.interval`` on ``n - 1`` df around the coefficient, the upper
    end capped at 1, 15 digits) on irrCAC's coefficient and SE; only the quantile changes. A newer scipy
    (medrev's) has the exact quantile, so its limits can differ from irrCAC's by the quantile's error
    times the SE (1.2e-9 on this fixture): the comparison uses these limits, and checks that irrCAC's own
    differ from them by no more than that error explains.
    """
    from scipy import stats

    if df < 1 or not (math.isfinite(coefficient) and math.isfinite(se)):
        return {"t_quantiles": None, "t_quantile_exact": None, "ci_low_exact_t": None, "ci_high_exact_t": None}
    low_q, high_q = (1 - confidence) / 2, (1 + confidence) / 2
    exact = _exact_t_quantile(high_q, df)
    return {
        "t_quantiles": [float(stats.t.ppf(low_q, df)), float(stats.t.ppf(high_q, df))],
        "t_quantile_exact": exact,
        "ci_low_exact_t": round(coefficient - se * exact, 15),
        "ci_high_exact_t": round(min(1.0, coefficient + se * exact), 15),
    }


def versions() -> dict[str, str]:
    """The versions the fixture's numbers come from (its header)."""
    from importlib import metadata

    names = {"irrCAC": "irrcac", "numpy": "numpy", "pandas": "pandas", "scipy": "scipy"}
    found = {key: metadata.version(name) for key, name in names.items()}
    found["python"] = ".".join(map(str, sys.version_info[:3]))
    return found


def environment() -> list[str]:
    """Every distribution of the oracle environment, pinned (the header: what to rebuild it from)."""
    from importlib import metadata

    skip = {"pip", "setuptools", "wheel"}
    found = {(d.metadata["Name"] or "").lower(): d.version for d in metadata.distributions()}
    return sorted(f"{name}=={version}" for name, version in found.items() if name and name not in skip)


def oracle_cases(specs: list[dict]) -> list[dict[str, object]]:
    """Every table of ``specs`` (``irrcac_tables.tables``) through irrCAC, once per weighting, ``min_ratings``
    and confidence level: the fixture's cases, in order."""
    cases = []
    for spec in specs:
        for weights in spec["weights"]:
            for min_ratings in spec["min_ratings"]:
                for confidence in spec["confidence"]:
                    case_id = f"{spec['id']}/{weights}/min{min_ratings}/ci{round(confidence * 100)}"
                    cases.append(
                        {
                            "id": case_id,
                            "description": spec["description"],
                            "categories": spec["categories"],
                            "weights": weights,
                            "min_ratings": min_ratings,
                            "confidence": confidence,
                            "irrcac": irrcac_outputs(
                                spec["table"], spec["categories"], weights, min_ratings, confidence
                            ),
                            "table": spec["table"],
                        }
                    )
    return cases
