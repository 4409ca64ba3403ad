"""Agreement against published values and against a hand computation of Gwet's formula."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from review_app.analysis.agreement import (
    agreement,
    agreement_report,
    binary_agreement,
    gwet_coefficient,
    gwet_estimate,
    weight_matrix,
)
from review_app.analysis.agreement_counts import category_counts, ratings_matrix
from review_app.analysis.layout import AnalysisInputError
from review_app.rubrics import RUBRIC_A
from tests.oracles.compare import FIXTURE, cases_by_id, load_fixture
from tests.review_app.analysis.gwet_handbook import raw_4raters_long

# Gwet's ordinal weights for three ordered categories (Gwet 2014, §3.5): with d = |k - l|,
# w = 1 - C(d + 1, 2) / C(q, 2), i.e. 1, 2/3, 0.
ORDINAL_3 = [[1, 2 / 3, 0], [2 / 3, 1, 2 / 3], [0, 2 / 3, 1]]


def hand_gwet(units: list[list[float]], categories: list[float], weights: list[list[float]]) -> float:
    """Gwet's AC2 written out from the handbook formulas, with plain loops and no library.

    ``units`` lists each unit's ratings (missing ratings simply absent). pa averages, over units
    with two or more ratings, sum_k r_ik (r*_ik - 1) / (r_i (r_i - 1)) with r*_ik = sum_l w_kl r_il;
    pi_k averages r_ik / r_i over all units; pe = T_w / (q (q - 1)) * sum_k pi_k (1 - pi_k).
    """
    q = len(categories)
    pa_terms, pi = [], [0.0] * q
    for ratings in units:
        r = len(ratings)
        counts = [sum(1 for x in ratings if x == c) for c in categories]
        for k in range(q):
            pi[k] += counts[k] / r / len(units)
        if r >= 2:
            total = 0.0
            for k in range(q):
                weighted = sum(weights[k][m] * counts[m] for m in range(q))
                total += counts[k] * (weighted - 1)
            pa_terms.append(total / (r * (r - 1)))
    pa = sum(pa_terms) / len(pa_terms)
    t_w = sum(sum(row) for row in weights)
    pe = t_w / (q * (q - 1)) * sum(p * (1 - p) for p in pi)
    return (pa - pe) / (1 - pe)


def long_from_units(units: list[list[float]]) -> pd.DataFrame:
    rows = []
    for index, ratings in enumerate(units):
        for slot, value in enumerate(ratings):
            rows.append({"task_id": f"T{index}", "rater": f"R{(index + slot) % 5}", "score": value})
    return pd.DataFrame(rows)


@pytest.fixture
def four_raters() -> pd.DataFrame:
    """Gwet's 4 raters x 12 units example (= Krippendorff 2011's reliability data), long layout."""
    return raw_4raters_long()


@pytest.fixture(scope="module")
def oracle() -> dict[str, dict]:
    """irrCAC's outputs by case id (tests/data/irrcac_oracle.json, written by tests/oracles/irrcac_oracle.py)."""
    return cases_by_id(load_fixture(FIXTURE))


# Published values for the 4-raters example (Gwet 2014; the irrCAC R package vignettes
# "overview" and "weighting", cac.raw4raters): coefficient, SE, CI low, pa, pe.
HANDBOOK = {
    "identity": (0.77544, 0.14295, 0.461, 0.8181818, 0.1903212),
    "quadratic": (0.914, 0.10396, 0.685, 0.9753788, 0.7137044),
    "ordinal": (0.899, 0.107, 0.664, 0.968, 0.685),
    "linear": (0.859, 0.117, 0.600, 0.939, 0.571),
}


@pytest.mark.parametrize("weights", sorted(HANDBOOK))
def test_gwet_handbook_example(four_raters: pd.DataFrame, weights: str) -> None:
    value, se, ci_low, pa, pe = HANDBOOK[weights]
    result = agreement(four_raters, "score", unit="Units", weights=weights, categories=[1, 2, 3, 4, 5], min_ratings=1)
    digits = len(str(value).split(".")[1])
    assert round(result.coefficient, digits) == value
    assert round(result.se, len(str(se).split(".")[1])) == se
    assert round(result.ci_low, 3) == ci_low
    assert result.ci_high == 1.0
    assert result.pa_weighted == pytest.approx(pa, abs=6e-4)
    assert result.pe == pytest.approx(pe, abs=6e-4)
    assert result.coefficient_name == ("AC1" if weights == "identity" else "AC2")


def test_krippendorff_2011_ordinal_alpha(four_raters: pd.DataFrame) -> None:
    """Krippendorff (2011), "Computing Krippendorff's alpha-reliability": ordinal alpha = 0.815."""
    result = agreement(four_raters, "score", unit="Units", categories=[1, 2, 3, 4, 5])
    assert round(result.alpha_ordinal, 3) == 0.815
    # Unit 12 has one rating and enters neither alpha nor (with min_ratings=2) AC2.
    assert result.n_units == 11


def test_unused_score_keeps_the_full_category_set() -> None:
    """Nobody uses 0: AC2 must still be computed on {0, 1, 2}, matching the hand formula."""
    units = [[2, 2], [2, 1], [1, 1], [2, 2], [1, 2], [2, 2], [2, 2, 1], [1, 1]]
    result = agreement(long_from_units(units), "score")
    expected = hand_gwet(units, [0, 1, 2], ORDINAL_3)
    assert result.coefficient == pytest.approx(expected, abs=1e-12)
    assert result.category_counts == {0.0: 0, 1.0: 7, 2.0: 10}
    assert any("never used" in w for w in result.warnings)
    # The trap: inferring the categories from the data (irrCAC's default) drops 0, and ordinal weights on
    # the two categories left are the identity: a different coefficient.
    inferred = hand_gwet(units, [1, 2], [[1, 0], [0, 1]])
    assert abs(inferred - expected) > 0.05
    assert agreement(long_from_units(units), "score", categories=[1, 2]).coefficient == pytest.approx(inferred)


def test_missing_ratings_match_the_hand_formula() -> None:
    """Partial overlap, a missing score and singly rated units (dropped at min_ratings=2)."""
    units = [[0, 0], [0, 1], [2, 2, 1], [1, 1], [2, 0], [2, 2], [1, 2], [0, 0, 0], [2], [1]]
    data = long_from_units(units)
    data.loc[len(data)] = {"task_id": "T1", "rater": "R9", "score": np.nan}  # a missing rating
    result = agreement(data, "score")
    analysed = [u for u in units if len(u) >= 2]
    assert result.coefficient == pytest.approx(hand_gwet(analysed, [0, 1, 2], ORDINAL_3), abs=1e-12)
    assert result.n_units == len(analysed)
    all_units = agreement(data, "score", min_ratings=1)
    assert all_units.coefficient == pytest.approx(hand_gwet(units, [0, 1, 2], ORDINAL_3), abs=1e-12)
    pairs = [sum(u.count(c) * (u.count(c) - 1) for c in (0, 1, 2)) / (len(u) * (len(u) - 1)) for u in analysed]
    assert result.percent_agreement == pytest.approx(sum(pairs) / len(pairs))


@pytest.mark.parametrize("weights", ["identity", "linear", "quadratic", "ordinal"])
def test_vectorised_formula_equals_irrcac(four_raters: pd.DataFrame, oracle: dict[str, dict], weights: str) -> None:
    """The bootstrap's own implementation agrees with irrCAC (the oracle fixture) on the full sample."""
    categories = [1, 2, 3, 4, 5]
    matrix = ratings_matrix(four_raters, "Units", "rater", "score", categories=categories)
    ours = gwet_coefficient(category_counts(matrix, categories), weight_matrix(categories, weights))
    theirs = oracle[f"handbook-4x12/{weights}/min1/ci95"]["irrcac"]["coefficient"]
    assert ours == pytest.approx(theirs, abs=1e-12)


def test_bootstrap_ci_is_seeded_and_brackets_the_estimate(four_raters: pd.DataFrame) -> None:
    first = agreement(four_raters, "score", unit="Units", categories=[1, 2, 3, 4, 5], n_boot=400, seed=7)
    second = agreement(four_raters, "score", unit="Units", categories=[1, 2, 3, 4, 5], n_boot=400, seed=7)
    other = agreement(four_raters, "score", unit="Units", categories=[1, 2, 3, 4, 5], n_boot=400, seed=8)
    assert first.bootstrap_ci == second.bootstrap_ci
    assert first.bootstrap_ci != other.bootstrap_ci
    low, high = first.bootstrap_ci
    assert low < first.coefficient <= high <= 1.0


def test_binary_ac1_for_an_outcome() -> None:
    units = [[1, 1], [0, 0], [0, 1], [0, 0], [1, 1], [0, 0]]
    result = binary_agreement(long_from_units(units), "score")
    assert result.coefficient_name == "AC1"
    assert result.coefficient == pytest.approx(hand_gwet(units, [0, 1], [[1, 0], [0, 1]]), abs=1e-12)
    assert "ac1" in result.to_dict() and "ac2" not in result.to_dict()


def test_perfect_agreement_on_one_value() -> None:
    result = agreement(long_from_units([[2, 2], [2, 2], [2, 2]]), "score")
    assert result.coefficient == 1.0
    assert result.alpha_ordinal is None
    assert any("alpha is undefined" in w for w in result.warnings)


def test_one_unit_has_no_standard_error() -> None:
    result = agreement(long_from_units([[2, 1], [2]]), "score")
    assert result.n_units == 1 and result.se is None and result.ci_low is None
    assert math.isfinite(result.coefficient)


def test_no_dual_ratings() -> None:
    result = agreement(long_from_units([[2], [1]]), "score")
    assert result.coefficient is None and result.n_units == 0
    assert "no unit has two or more ratings" in result.warnings[0]


@pytest.mark.parametrize(
    ("rows", "message"),
    [
        ([("T1", "R1", "x")], "must be numeric"),
        ([("T1", "R1", 3)], "outside the categories"),
        ([("T1", "R1", 1), ("T1", "R1", 2)], "more than once"),
    ],
)
def test_bad_scores_are_refused(rows: list[tuple], message: str) -> None:
    data = pd.DataFrame(rows, columns=["task_id", "rater", "score"])
    with pytest.raises(AnalysisInputError, match=message):
        agreement(data, "score")


def test_missing_column_is_named() -> None:
    with pytest.raises(AnalysisInputError, match="'score'"):
        agreement(pd.DataFrame({"task_id": [1], "rater": ["R1"]}), "score")


def test_report_covers_every_rubric_dimension() -> None:
    units = [[2, 2], [1, 2], [0, 0], [2, 1]]
    base = long_from_units(units)
    for key in RUBRIC_A.dimension_keys:
        base[key] = base["score"]
    base["rubric"] = "A"
    report = agreement_report(base, "A")
    assert [r.score for r in report.results] == list(RUBRIC_A.dimension_keys)
    frame = report.to_frame()
    assert list(frame.index) == list(RUBRIC_A.dimension_keys)
    assert frame["coefficient"].iloc[0] == pytest.approx(hand_gwet(units, [0, 1, 2], ORDINAL_3))
    assert "falsehood_clarity" in report.summary()


def test_min_ratings_one_reproduces_gwets_handbook_and_irrcac(
    four_raters: pd.DataFrame, oracle: dict[str, dict]
) -> None:
    """Gwet (2014) and irrCAC keep singly rated units: ordinal AC2 = 0.89894 on raw4raters."""
    every = agreement(four_raters, "score", unit="Units", categories=[1, 2, 3, 4, 5], min_ratings=1)
    assert round(every.coefficient, 5) == 0.89894
    irr = oracle["handbook-4x12/ordinal/min1/ci95"]["irrcac"]
    assert every.coefficient == pytest.approx(irr["coefficient"], abs=1e-12)
    assert every.se == pytest.approx(irr["se"], abs=1e-12)
    assert every.ci_low == pytest.approx(irr["ci_low_exact_t"], abs=1e-12)  # irrCAC's limit, exact t quantile
    assert (every.n_units, every.n_units_dropped, every.min_ratings) == (12, 0, 1)
    dual = agreement(four_raters, "score", unit="Units", categories=[1, 2, 3, 4, 5])
    assert (dual.n_units, dual.n_units_dropped, dual.min_ratings) == (11, 1, 2)  # unit 12 has one rating
    assert round(dual.coefficient, 5) != 0.89894
    data = dual.to_dict()
    assert (data["min_ratings"], data["n_units_dropped"]) == (2, 1)
    frame = dual.to_frame()
    assert frame.loc["score", "min_ratings"] == 2 and frame.loc["score", "n_units_dropped"] == 1
    three = agreement(four_raters, "score", unit="Units", categories=[1, 2, 3, 4, 5], min_ratings=3)
    assert (three.n_units, three.n_units_dropped) == (10, 2)
    assert "1 with fewer set aside" in dual.summary()


@pytest.mark.parametrize("bad", [0, -1, 1.5, True])
def test_min_ratings_must_be_a_positive_whole_number(bad: object) -> None:
    with pytest.raises(AnalysisInputError, match="min_ratings"):
        agreement(long_from_units([[1, 1], [2, 2]]), "score", min_ratings=bad)


def test_confidence_limits_are_clipped_to_the_coefficient_range(oracle: dict[str, dict]) -> None:
    """Three units in total disagreement: irrCAC's Student-t interval on 2 df reaches far below -1."""
    units = [[0, 2], [2, 0], [1, 1]]
    data = long_from_units(units)
    case = oracle["disagreement-3units/ordinal/min2/ci95"]
    assert case["table"] == units and case["categories"] == [0, 1, 2]
    assert case["irrcac"]["ci_low"] < -1  # the trap the clipping removes
    result = agreement(data, "score")
    assert result.ci_low == -1.0 and result.ci_high <= 1.0
    assert result.coefficient < 0
    boot = agreement(data, "score", n_boot=200, seed=1)
    assert -1.0 <= boot.bootstrap_ci[0] <= boot.bootstrap_ci[1] <= 1.0


def dense_reference(data: pd.DataFrame, score: str, *, weights: str, categories, min_ratings: int) -> dict:
    """The previous implementation's shape: a units x raters table, counted per category (as irrCAC counts
    it) into Gwet's estimate, and krippendorff on the reliability matrix (dense). Gwet's numbers themselves
    are checked against irrCAC by test_agreement_oracle.py, on panels of up to 20 raters."""
    import krippendorff

    categories = tuple(sorted(float(c) for c in categories))
    matrix = ratings_matrix(data, "task_id", "rater", score, categories=categories)
    rated = matrix.notna().sum(axis=1)
    dropped = int(((rated >= 1) & (rated < min_ratings)).sum())
    matrix = matrix.loc[rated >= min_ratings]
    matrix = matrix.loc[:, matrix.notna().any(axis=0)]
    counts = category_counts(matrix, categories)
    est = gwet_estimate(counts, categories, weights, 0.95)
    alpha = krippendorff.alpha(
        reliability_data=matrix.to_numpy(dtype=float).T,
        value_domain=list(categories),
        level_of_measurement="ordinal",
    )
    return {
        "n_units": len(matrix),
        "n_raters": matrix.shape[1],
        "n_units_dropped": dropped,
        "coefficient": float(est["coefficient_value"]),
        "se": float(est["se"]),
        "ci_low": max(-1.0, float(est["confidence_interval"][0])),
        "ci_high": min(1.0, float(est["confidence_interval"][1])),
        "p_value": float(est["p_value"]),
        "pa_weighted": float(est["pa"]),
        "pe": float(est["pe"]),
        "alpha_ordinal": float(alpha),
        "category_counts": {c: int(counts[:, k].sum()) for k, c in enumerate(categories)},
    }


@pytest.mark.parametrize("weights", ["ordinal", "quadratic", "identity"])
@pytest.mark.parametrize("min_ratings", [1, 2])
def test_count_tables_equal_the_dense_path_with_many_reviewers(weights: str, min_ratings: int) -> None:
    """300 reviewers, 400 tasks, 1-4 ratings each: the per-unit count tables give the dense path's
    numbers to the last bit (the dense table here is 400 x 300; with 1,000 reviewers at panel scale
    it was what took gigabytes)."""
    rng = np.random.default_rng(7)
    rows = []
    for task in range(400):
        raters = rng.choice(300, size=int(rng.integers(1, 5)), replace=False)
        latent = rng.integers(0, 3)
        for rater in raters:
            value = int(np.clip(latent + rng.integers(-1, 2) * (rng.random() < 0.3), 0, 2))
            rows.append({"task_id": 1000 + task, "rater": f"R{rater:03d}", "score": value})
    data = pd.DataFrame(rows).sample(frac=1.0, random_state=1)  # order of the rows must not matter
    assert data["rater"].nunique() > 250
    ours = agreement(data, "score", weights=weights, min_ratings=min_ratings)
    reference = dense_reference(data, "score", weights=weights, categories=(0, 1, 2), min_ratings=min_ratings)
    for key, expected in reference.items():
        assert getattr(ours, key) == expected, key


def test_report_frame_keeps_every_category_of_every_score():
    """Judge audit: the label is -1/0/1 and the confidence 0/1/2; the frame counts 2 (it once took the first
    score's columns only, so the confidence chart lost its 2)."""
    rows = [
        {"task_id": t, "rater": r, "rubric": "judge", "clinician_label": label, "confidence": conf}
        for t, (label, conf) in enumerate([(-1, 2), (0, 2), (1, 1), (1, 2)])
        for r in ("R01", "R02")
    ]
    frame = agreement_report(pd.DataFrame(rows), "judge").to_frame()
    counts = [c for c in frame.columns if c.startswith("n_score_")]
    assert counts == ["n_score_-1", "n_score_0", "n_score_1", "n_score_2"]
    assert int(frame.loc["confidence", "n_score_2"]) == 6 and int(frame.loc["confidence", "n_score_1"]) == 2
    assert pd.isna(frame.loc["clinician_label", "n_score_2"]) and pd.isna(frame.loc["confidence", "n_score_-1"])
