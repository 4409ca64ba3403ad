"""medrev's Gwet AC1/AC2 against irrCAC's numbers in an oracle fixture (``tests/oracles/irrcac_oracle.py``).

Each case's table goes into :func:`review_app.analysis.agreement.agreement` in medrev's long layout
(one row per rating; missing ratings are absent rows) with the case's weights, full category set,
``min_ratings`` and confidence, and every output irrCAC gives is compared with medrev's.

Definedness (None in medrev, NaN, stored as null, in irrCAC) is compared, not tolerated: both undefined
is a match, one defined and the other not is a mismatch (an infinite difference). medrev departs from
irrCAC on purpose in the places below, and only there; each is a rule applied to the case, not a wider
tolerance:

* **Confidence limits are clipped to [-1, 1].** irrCAC caps only the upper end, so its lower end can
  fall below -1 with few units; irrCAC's limits are clipped before comparing.
* **Student-t quantile.** irrCAC runs on scipy 1.12, whose ``t.ppf`` is off by up to about 1e-8
  relative (0.975 quantile on 39 df: 2.02269091173 against 2.02269092004); medrev's newer scipy has the
  exact quantile, so the limits differ by that error times the SE (1.2e-9 here). The oracle records
  irrCAC's interval recomputed with the exact quantile (``ci_low_exact_t``, ``ci_high_exact_t``: irrCAC's
  coefficient, SE and statements, only the quantile changed); medrev's limits are compared with those,
  and irrCAC's own limits must differ from them by no more than the quantile's error explains.
* **Zero variance.** When the linearisation variance is 0, irrCAC reports its placeholder SE 1e-15 (or,
  when the variance is a rounding residue, an SE that rounds to 0) and a p-value computed from it. medrev
  reports SE 0.0 and no p-value (``agreement()``: ``se = 0.0`` unless the SE exceeds 1e-14, and
  ``p_value`` only when ``se > 0``). So where irrCAC's SE is at most 1e-14, medrev's SE must be exactly
  0.0 and its p-value None, whatever irrCAC's p-value is.
* **No unit with two ratings.** Gwet's pa is undefined; irrCAC still reports pe (from the category
  propensities alone) and an upper limit of 1 (``min(1, nan)``). medrev reports nothing but the counts,
  so its pa, pe, SE, limits and p-value must all be None.

The SE path needs two units: irrCAC divides by ``n (n - 1)`` and raises on one unit, so the fixture holds
no one-unit table (medrev then reports the coefficient with no SE, pa or pe).

    python -m tests.oracles.compare tests/data/irrcac_oracle.json [MORE.json ...]
"""

from __future__ import annotations

import json
import math
import sys
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any, NamedTuple

import pandas as pd

from review_app.analysis.agreement import AgreementResult, agreement

FIXTURE = Path(__file__).resolve().parents[1] / "data" / "irrcac_oracle.json"  # the committed oracle output
TOLERANCE = 1e-9
# medrev's own threshold (agreement(): ``se = ... if est["se"] > 1e-14 else 0.0``).
ZERO_SE = 1e-14
# medrev field -> irrCAC field in the fixture.
FIELDS: dict[str, str] = {
    "coefficient": "coefficient",
    "se": "se",
    "ci_low": "ci_low",
    "ci_high": "ci_high",
    "pa_weighted": "pa",
    "pe": "pe",
    "p_value": "p_value",
    "n_units": "n_units",
}
RULE_CLIPPED = "confidence limit clipped to [-1, 1]"
RULE_T_QUANTILE = "exact Student-t quantile"
# What irrCAC's 15-digit rounding of the coefficient and SE can add to a limit recomputed from them.
ROUNDING = 1e-12
RULE_ZERO_SE = "zero variance: medrev SE 0.0, no p-value"
RULE_NO_DUAL = "no unit with two ratings: medrev reports nothing"


class Difference(NamedTuple):
    """One compared value. ``abs_diff`` is 0.0 when both are undefined or a documented rule holds, and
    infinite when only one is defined (or a rule does not hold)."""

    case_id: str
    field: str
    medrev_value: float | None
    irrcac_value: float | None
    abs_diff: float


class Checked(NamedTuple):
    """A :class:`Difference` with the rule that decided it ("" when the values were compared as they are)."""

    difference: Difference
    rule: str


def load_fixture(path: str | Path) -> dict[str, Any]:
    return json.loads(Path(path).read_text())


def cases_by_id(fixture: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {case["id"]: case for case in fixture["cases"]}


def long_layout(table: Sequence[Sequence[float | None]]) -> pd.DataFrame:
    """Units x raters (None: not rated) as medrev's input rows: unit, rater, score; missing ratings omitted.

    Unit ids are the row numbers, so medrev's sorted units keep the table's order (and irrCAC's sums'
    order).
    """
    rows = [
        (unit, f"R{rater + 1:02d}", float(score))
        for unit, ratings in enumerate(table)
        for rater, score in enumerate(ratings)
        if score is not None
    ]
    return pd.DataFrame(rows, columns=["unit", "rater", "score"])


def medrev_result(case: dict[str, Any]) -> AgreementResult:
    return agreement(
        long_layout(case["table"]),
        "score",
        unit="unit",
        rater="rater",
        weights=case["weights"],
        categories=case["categories"],
        min_ratings=case["min_ratings"],
        confidence=case["confidence"],
    )


def _defined(value: float | None) -> bool:
    return value is not None and not (isinstance(value, float) and math.isnan(value))


def _clip(value: float | None) -> float | None:
    return None if value is None else min(max(value, -1.0), 1.0)


def check_case(case: dict[str, Any], result: AgreementResult | None = None) -> list[Checked]:
    """Every field of one case, each decided by the documented rules (module notes)."""
    result = medrev_result(case) if result is None else result
    irrcac = case["irrcac"]
    rated = [sum(x is not None for x in unit) for unit in case["table"]]
    analysed = [r for r in rated if r >= case["min_ratings"]]
    no_dual = not any(r >= 2 for r in analysed)
    zero_se = _defined(irrcac["se"]) and irrcac["se"] <= ZERO_SE
    checked = []
    for field, source in FIELDS.items():
        ours, theirs = getattr(result, field), irrcac[source]
        rule = ""
        if no_dual and field != "coefficient" and field != "n_units":
            rule, diff = RULE_NO_DUAL, 0.0 if ours is None else math.inf
        elif zero_se and field == "se":
            rule, diff = RULE_ZERO_SE, 0.0 if ours == 0.0 else math.inf
        elif zero_se and field == "p_value":
            rule, diff = RULE_ZERO_SE, 0.0 if ours is None else math.inf
        else:
            rules = []
            if field in ("ci_low", "ci_high"):
                theirs, rules = _limit(irrcac, field)
            rule = "; ".join(rules)
            if rule.endswith("does not hold"):
                diff = math.inf
            elif _defined(ours) and _defined(theirs):
                diff = abs(float(ours) - float(theirs))
            else:
                diff = 0.0 if _defined(ours) == _defined(theirs) else math.inf
        checked.append(Checked(Difference(case["id"], field, ours, irrcac[source], diff), rule))
    return checked


def _limit(irrcac: dict[str, Any], field: str) -> tuple[float | None, list[str]]:
    """The confidence limit medrev must give, from irrCAC's, and the rules that turned one into the other.

    irrCAC's limit with the exact Student-t quantile, once irrCAC's own limit is shown to differ from it
    by no more than the quantile error times the SE; then clipped to [-1, 1].
    """
    raw, exact = irrcac[field], irrcac[f"{field}_exact_t"]
    rules = []
    if _defined(raw) and _defined(exact) and raw != exact:
        low_q, high_q = irrcac["t_quantiles"]
        t_exact = irrcac["t_quantile_exact"]
        quantile_error = abs(low_q + t_exact) if field == "ci_low" else abs(high_q - t_exact)
        explained = abs(raw - exact) <= irrcac["se"] * quantile_error + ROUNDING
        rules.append(RULE_T_QUANTILE if explained else f"{RULE_T_QUANTILE} does not hold")
    elif _defined(raw) != _defined(exact):
        rules.append(f"{RULE_T_QUANTILE} does not hold")
    target = _clip(exact)
    if target != exact:
        rules.insert(0, RULE_CLIPPED)
    return target, rules


def check(fixture_path: str | Path) -> list[Checked]:
    return [row for case in load_fixture(fixture_path)["cases"] for row in check_case(case)]


def compare(fixture_path: str | Path) -> list[Difference]:
    """(case_id, field, medrev_value, irrcac_value, abs_diff) for every output of every case of the fixture."""
    return [row.difference for row in check(fixture_path)]


def failures(rows: Sequence[Checked | Difference], tolerance: float = TOLERANCE) -> list[Difference]:
    """Differences above the tolerance, definedness mismatches (infinite) included."""
    differences = [row.difference if isinstance(row, Checked) else row for row in rows]
    return [d for d in differences if not d.abs_diff <= tolerance]


def fixture_differences(committed: dict[str, Any], live: dict[str, Any], tolerance: float = 1e-12) -> list[str]:
    """How a freshly computed oracle output departs from the committed fixture (empty: it does not).

    Same cases in the same order with the same inputs, and irrCAC's numbers equal to ``tolerance`` with
    the same definedness; the pins must agree too. The tolerance only absorbs last-bit differences of
    the BLAS kernels a CPU selects, as every package version is pinned.
    """
    problems = []
    if committed["header"]["pins"] != live["header"]["pins"]:
        problems.append(f"pins differ: {committed['header']['pins']} vs {live['header']['pins']}")
    ours, theirs = [c["id"] for c in committed["cases"]], [c["id"] for c in live["cases"]]
    if ours != theirs:
        missing, extra = sorted(set(theirs) - set(ours)), sorted(set(ours) - set(theirs))
        problems.append(f"cases differ: only in the live output {missing}, only in the committed fixture {extra}")
    live_cases = cases_by_id(live)
    for case in committed["cases"]:
        other = live_cases.get(case["id"])
        if other is None:
            continue
        for key in ("table", "categories", "weights", "min_ratings", "confidence"):
            if case[key] != other[key]:
                problems.append(f"{case['id']}: {key} differs")
        for key in sorted(set(case["irrcac"]) | set(other["irrcac"])):
            a, b = case["irrcac"].get(key), other["irrcac"].get(key)
            if isinstance(a, float) and isinstance(b, float):
                if abs(a - b) > tolerance:
                    problems.append(f"{case['id']}: irrCAC {key} {a!r} committed, {b!r} live")
            elif a != b:
                problems.append(f"{case['id']}: irrCAC {key} {a!r} committed, {b!r} live")
    return problems


def summary(path: str | Path, rows: Sequence[Checked]) -> str:
    """One line: cases, numbers compared, the largest difference with its case and field, rules applied."""
    differences = [row.difference for row in rows]
    compared = [
        row.difference
        for row in rows
        if row.rule not in (RULE_ZERO_SE, RULE_NO_DUAL)
        and _defined(row.difference.medrev_value)
        and _defined(row.difference.irrcac_value)
    ]
    n_cases = len({d.case_id for d in differences})
    largest = max(differences, key=lambda d: d.abs_diff, default=None)
    text = f"{path}: {n_cases} cases, {len(compared)} numbers compared"
    if largest is not None:
        text += f", largest difference {largest.abs_diff:.3g} ({largest.case_id}, {largest.field})"
    rules = Counter(row.rule for row in rows if row.rule)
    if rules:
        text += "; by rule: " + ", ".join(f"{rule} x{n}" for rule, n in sorted(rules.items()))
    return text


def main(argv: Sequence[str] | None = None) -> int:
    paths = list(sys.argv[1:] if argv is None else argv)
    if not paths:
        print("usage: python -m tests.oracles.compare FIXTURE.json [FIXTURE.json ...]", file=sys.stderr)
        return 2
    status = 0
    for path in paths:
        rows = check(path)
        print(summary(path, rows))
        for bad in failures(rows):
            status = 1
            print(
                f"  MISMATCH {bad.case_id} {bad.field}: medrev {bad.medrev_value!r}, irrCAC {bad.irrcac_value!r}"
                f" (difference {bad.abs_diff:.3g})"
            )
    return status


if __name__ == "__main__":
    sys.exit(main())
