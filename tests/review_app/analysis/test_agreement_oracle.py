"""medrev's Gwet AC1/AC2 against irrCAC 0.4.4, the reference implementation, run as an oracle.

irrCAC cannot be installed beside medrev (it pins scipy 1.12, numpy<2, pandas<3), so
``tests/oracles/irrcac_oracle.py`` runs it in an environment of its own and writes its outputs to a
fixture. The committed fixture (``tests/data/irrcac_oracle.json``) is compared here case by case, to
1e-9, with the few documented departures of ``tests/oracles/compare.py`` applied as rules. When CI has
just run the oracle, ``MEDREV_IRRCAC_ORACLE`` names its output: medrev is compared with that too, and
the committed fixture must hold the same cases and numbers (else it is stale).
"""

from __future__ import annotations

import copy
import json
import os
from pathlib import Path

import pytest

from tests.oracles.compare import (
    FIXTURE,
    RULE_CLIPPED,
    RULE_NO_DUAL,
    RULE_T_QUANTILE,
    RULE_ZERO_SE,
    TOLERANCE,
    check,
    check_case,
    failures,
    fixture_differences,
    load_fixture,
)
from tests.review_app.analysis.gwet_handbook import CATEGORIES, RAW_4RATERS

LIVE_VARIABLE = "MEDREV_IRRCAC_ORACLE"
COMMITTED = load_fixture(FIXTURE)
CASES = COMMITTED["cases"]
WEIGHTS = {"identity", "linear", "quadratic", "ordinal"}


def _describe(rows: list) -> str:
    return "\n".join(
        f"{d.case_id} {d.field}: medrev {d.medrev_value!r}, irrCAC {d.irrcac_value!r} (difference {d.abs_diff:.3g})"
        for d in rows
    )


@pytest.mark.parametrize("case", CASES, ids=[case["id"] for case in CASES])
def test_medrev_equals_irrcac(case: dict) -> None:
    bad = failures(check_case(case))
    assert not bad, "medrev departs from irrCAC:\n" + _describe(bad)


def _live_path() -> Path:
    name = os.environ.get(LIVE_VARIABLE)
    if not name:
        pytest.skip(
            f"{LIVE_VARIABLE} is not set: no live oracle output to compare (CI sets it to the file "
            "`python3 tests/oracles/irrcac_oracle.py --out PATH` writes)"
        )
    path = Path(name)
    assert path.is_file(), f"{LIVE_VARIABLE}={name} names no file"
    return path


def test_medrev_equals_the_live_oracle() -> None:
    bad = failures(check(_live_path()))
    assert not bad, "medrev departs from the live irrCAC output:\n" + _describe(bad)


def test_committed_fixture_is_the_live_oracle_output() -> None:
    problems = fixture_differences(COMMITTED, load_fixture(_live_path()))
    assert not problems, (
        "tests/data/irrcac_oracle.json is stale; regenerate it with `python3 tests/oracles/irrcac_oracle.py`:\n"
        + "\n".join(problems[:20])
    )


def _rated(unit: list) -> int:
    return sum(x is not None for x in unit)


def test_fixture_covers_what_it_claims() -> None:
    """Read from the tables and outputs themselves, not from the case names."""
    assert {c["weights"] for c in CASES} == WEIGHTS
    category_sets = {tuple(c["categories"]) for c in CASES}
    assert {(0, 1, 2), (0, 1), (-1, 0, 1), (1, 2, 3, 4, 5), (0, 0.5, 1, 3)} <= category_sets
    for categories in category_sets:
        assert {c["weights"] for c in CASES if tuple(c["categories"]) == categories} >= (
            {"identity"} if len(categories) == 2 else WEIGHTS
        ), categories
    for n_raters in (2, 3, 5, 10, 20):
        tables = [c["table"] for c in CASES if len(c["table"][0]) == n_raters]
        assert any(all(x is not None for u in t for x in u) for t in tables), f"{n_raters} raters, complete"
        assert any(any(x is None for u in t for x in u) for t in tables), f"{n_raters} raters, incomplete"
    # partial overlap of a panel: 10 raters or more, every unit rated by at most 3
    assert any(len(c["table"][0]) >= 10 and all(_rated(u) <= 3 for u in c["table"]) for c in CASES)
    for min_ratings in (1, 2):
        with_single = [c for c in CASES if c["min_ratings"] == min_ratings and any(_rated(u) == 1 for u in c["table"])]
        assert with_single, f"singly rated units with min_ratings={min_ratings}"
        for case in with_single:  # irrCAC saw them (1) or not (2)
            assert case["irrcac"]["n_units"] == sum(_rated(u) >= min_ratings for u in case["table"]), case["id"]
    one_value = [c for c in CASES if len({x for u in c["table"] for x in u if x is not None}) == 1]
    assert {c["weights"] for c in one_value} == WEIGHTS
    assert any(set(c["categories"]) - {x for u in c["table"] for x in u} for c in CASES), "an unused category"
    assert len({c["id"] for c in CASES if c["confidence"] == 0.9}) >= 2
    assert any(c["irrcac"]["n_units"] == 2 and c["irrcac"]["se"] > 1e-6 for c in CASES), "two units, nonzero SE"
    assert any(c["irrcac"]["n_units"] >= 200 for c in CASES)
    uneven = {c["weights"] for c in CASES if c["categories"] == [0, 0.5, 1, 3]}
    assert {"linear", "quadratic"} <= uneven
    # every documented departure is exercised, so each rule is known to be needed and to hold
    rules = {part for row in check(FIXTURE) for part in row.rule.split("; ") if part}
    assert rules == {RULE_CLIPPED, RULE_T_QUANTILE, RULE_ZERO_SE, RULE_NO_DUAL}


def test_fixture_records_its_provenance() -> None:
    header = COMMITTED["header"]
    assert header["versions"]["irrCAC"] == "0.4.4" and header["versions"]["scipy"] == "1.12.0"
    assert {"numpy", "pandas", "python"} <= set(header["versions"])
    assert header["command"].startswith("python3 tests/oracles/irrcac_oracle.py")
    assert header["n_cases"] == len(CASES) == len({c["id"] for c in CASES})


def test_handbook_table_is_irrcacs() -> None:
    """The table the tests write out (gwet_handbook.py) is the one irrCAC gave the oracle."""
    for case in CASES:
        if case["id"].startswith("handbook-4x12"):
            assert case["table"] == [list(unit) for unit in RAW_4RATERS]
            assert case["categories"] == list(CATEGORIES)


def _perturbed(tmp_path: Path, change) -> Path:
    fixture = copy.deepcopy(COMMITTED)
    change({c["id"]: c for c in fixture["cases"]})
    path = tmp_path / "perturbed.json"
    path.write_text(json.dumps(fixture))
    return path


def test_a_perturbed_fixture_fails(tmp_path: Path) -> None:
    """The comparison can fail: a number moved by 10x the tolerance, and a value made undefined."""

    def nudge(cases: dict) -> None:
        cases["handbook-4x12/ordinal/min1/ci95"]["irrcac"]["coefficient"] += 10 * TOLERANCE
        cases["large-200/quadratic/min2/ci95"]["irrcac"]["pe"] = None
        cases["one-category-012/ordinal/min2/ci95"]["irrcac"]["se"] = 0.01  # no longer the zero-variance rule

    path = _perturbed(tmp_path, nudge)
    bad = {(d.case_id, d.field) for d in failures(check(path))}
    assert bad == {
        ("handbook-4x12/ordinal/min1/ci95", "coefficient"),
        ("large-200/quadratic/min2/ci95", "pe"),
        ("one-category-012/ordinal/min2/ci95", "se"),
        ("one-category-012/ordinal/min2/ci95", "p_value"),
    }
    stale = fixture_differences(COMMITTED, load_fixture(path))
    assert len(stale) == 3 and all("committed" in line for line in stale)


def test_a_limit_the_quantile_does_not_explain_fails(tmp_path: Path) -> None:
    """The exact-quantile rule only absorbs what the quantile's error times the SE explains."""

    def move(cases: dict) -> None:
        cases["panel-10-signed/quadratic/min2/ci95"]["irrcac"]["ci_low"] += 1e-6

    bad = failures(check(_perturbed(tmp_path, move)))
    assert [(d.case_id, d.field) for d in bad] == [("panel-10-signed/quadratic/min2/ci95", "ci_low")]
