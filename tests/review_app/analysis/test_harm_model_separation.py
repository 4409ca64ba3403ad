"""The harm model under separation and its penalised option, against lme4::glmer and blme::bglmer.

References come from ``tests/data/lme4_separation_reference.R`` (lme4 1.1.31, blme 1.0.5), whose
output ``tests/data/lme4_separation_reference.out`` is committed and parsed here, so the tests need no
R. Data: ``sim_harm_separated.csv`` (0 of 6 potentially-true annotations are worst case; 12 of 12
threshold-corruption ones are) and ``quasi_separated.csv`` (separation only in combinations of levels),
both written by ``tests/data/make_sim_harm_separated.py``.
"""

from __future__ import annotations

import json
import math
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from review_app.analysis.harm_model import Penalty, fit_random_intercept_logit
from review_app.analysis.harm_model_result import ALL_EVENTS, NO_EVENTS
from review_app.analysis.layout import AnalysisInputError

DATA = Path(__file__).resolve().parents[2] / "data"
FIXED = ["model", "content_type", "provenance", "stratum"]
REFERENCE = {"model": "claude", "content_type": "cue_remapping", "provenance": "neutral", "stratum": "clear"}
SEPARATED = ("content_type[threshold_corruption]", "stratum[potentially_true]")
R_NAMES = {  # lme4's coefficient names -> ours
    "(Intercept)": "Intercept",
    **{f"{c}{lv}": f"{c}[{lv}]" for c in FIXED for lv in (
        "gemini", "gpt", "exception_poisoning", "relationship_inversion", "spurious_anchoring",
        "threshold_corruption", "authority", "patient", "potentially_true", "soft",
    )},
    "ay": "a[y]", "bq": "b[q]", "cv": "c[v]", "cw": "c[w]",
}  # fmt: skip


def _reference() -> dict[str, dict]:
    """Sections of the R output: label -> {"coef": {name: (estimate, se)}, "variance", "loglik"}."""
    sections: dict[str, dict] = {}
    current: dict = {}
    for line in (DATA / "lme4_separation_reference.out").read_text().splitlines():
        parts = line.split()
        if line.startswith("== "):
            current = sections.setdefault(line[3:].strip(), {"coef": {}, "messages": []})
        elif parts and parts[0] == "coef":
            current["coef"][R_NAMES[parts[1]]] = (float(parts[2]), float(parts[3]))
        elif parts and parts[0] in ("variance", "loglik", "laplace_loglik"):
            current[parts[0]] = float(parts[1])
        elif parts and parts[0] == "message":
            current["messages"].append(line)
    return sections


R = _reference()


@pytest.fixture(scope="module")
def separated() -> pd.DataFrame:
    return pd.read_csv(DATA / "sim_harm_separated.csv")


def test_fixture_is_separated_as_described(separated: pd.DataFrame) -> None:
    by_stratum = separated.groupby("stratum")["worst_case"].agg(["count", "sum"])
    assert tuple(by_stratum.loc["potentially_true"]) == (6, 0)
    by_content = separated.groupby("content_type")["worst_case"].agg(["count", "sum"])
    assert tuple(by_content.loc["threshold_corruption"]) == (12, 12)
    # lme4 stopped somewhere along both separated directions: huge estimates with exploding SEs.
    for name in SEPARATED:
        estimate, se = R["separated ML Laplace"]["coef"][name]
        assert abs(estimate) > 10 and se > 100


def test_other_terms_keep_lme4s_estimates_and_ses(separated: pd.DataFrame) -> None:
    reference = R["separated ML Laplace"]
    fit = fit_random_intercept_logit(separated, "worst_case", FIXED, "rater", reference=REFERENCE)
    assert fit.converged and fit.separated_terms == SEPARATED
    for name, (estimate, se) in reference["coef"].items():
        term = fit.term(name)
        if name in SEPARATED:
            assert term.separated and not term.estimable
            assert math.isnan(term.estimate) and math.isnan(term.se) and math.isnan(term.odds_ratio)
            continue
        assert not term.separated
        assert term.estimate == pytest.approx(estimate, abs=2e-3), name
        assert term.se == pytest.approx(se, rel=0.05), name  # the bound
        assert term.se == pytest.approx(se, rel=5e-3), name  # what we actually achieve
    assert fit.group_variance == pytest.approx(reference["variance"], rel=1e-2)
    assert fit.loglik == pytest.approx(reference["loglik"], abs=1e-3)
    assert fit.term("stratum[potentially_true]").separation == NO_EVENTS
    assert fit.term("content_type[threshold_corruption]").separation == ALL_EVENTS


def test_separation_keys_in_json(separated: pd.DataFrame) -> None:
    fit = fit_random_intercept_logit(separated, "worst_case", FIXED, "rater", reference=REFERENCE)
    payload = json.loads(json.dumps(fit.to_dict(), default=str).replace("NaN", "null"))
    assert payload["separated_terms"] == list(SEPARATED)
    assert payload["penalty"] == "none"
    assert payload["terms"]["stratum[potentially_true]"]["separated"] is True
    assert payload["terms"]["stratum[potentially_true]"]["estimate"] is None
    assert payload["terms"]["stratum[soft]"]["separated"] is False
    assert payload["separation"]["stratum[potentially_true]"] == NO_EVENTS
    notes = fit.separation_notes()
    assert any(
        "stratum = potentially_true (against clear): not estimable (no events in this level)" in n for n in notes
    )


@pytest.mark.parametrize(
    ("label", "penalty", "data"),
    [
        ("separated bglmer normal(10, 2.5)", "normal", "sim_harm_separated.csv"),
        ("separated bglmer normal(10, 1)", "normal:1", "sim_harm_separated.csv"),
        ("ordinary bglmer normal(10, 2.5)", "normal", "sim_harm.csv"),
    ],
)
def test_penalised_fit_matches_bglmer(label: str, penalty: str, data: str) -> None:
    reference = R[label]
    frame = pd.read_csv(DATA / data)
    fit = fit_random_intercept_logit(frame, "worst_case", FIXED, "rater", reference=REFERENCE, penalty=penalty)
    assert fit.converged and fit.penalty.key == penalty
    for name, (estimate, se) in reference["coef"].items():
        term = fit.term(name)
        assert term.estimate == pytest.approx(estimate, abs=1e-4), name  # measured: within 1e-5
        assert term.se == pytest.approx(se, rel=1e-3), name  # measured: within 0.01 %
    assert fit.group_variance == pytest.approx(reference["variance"], rel=1e-3)
    # bglmer's logLik is the unpenalised Laplace log-likelihood at its estimates (checked in the R script).
    assert reference["loglik"] == pytest.approx(reference["laplace_loglik"], abs=1e-9)
    assert fit.loglik == pytest.approx(reference["loglik"], abs=1e-3)
    if data == "sim_harm_separated.csv":
        assert fit.separated_terms == SEPARATED  # still marked: the data are separated, the prior made it finite
        assert all(t.estimable for t in fit.terms)
        assert fit.term("stratum[potentially_true]").odds_ratio < 1
    assert "bglmer" in fit.penalty.describe() and "cov.prior = NULL" in fit.penalty.describe()
    assert "penalised" in fit.summary() and fit.to_dict()["penalty"] == penalty


def test_quasi_complete_separation_found_in_the_fit() -> None:
    reference = R["quasi ML Laplace"]
    data = pd.read_csv(DATA / "quasi_separated.csv")
    fit = fit_random_intercept_logit(data, "y", ["a", "b", "c"], "g", reference={"a": "x", "b": "p", "c": "u"})
    assert set(fit.separated_terms) == {"Intercept", "a[y]", "b[q]"}
    assert all("quasi-complete separation" in fit.term(n).separation for n in fit.separated_terms)
    for name in ("c[v]", "c[w]"):
        estimate, se = reference["coef"][name]
        assert fit.term(name).estimate == pytest.approx(estimate, abs=2e-3)
        # lme4's own Hessian failed here and it fell back to its RX-based covariance; within 5 %.
        assert fit.term(name).se == pytest.approx(se, rel=0.05)
    assert fit.group_variance == pytest.approx(reference["variance"], rel=1e-2)
    assert fit.loglik == pytest.approx(reference["loglik"], abs=1e-3)


def test_separated_reference_level_makes_its_contrasts_not_estimable(separated: pd.DataFrame) -> None:
    """A reference level without events: every contrast against it (and the intercept) is infinite;
    the other factors' terms are the fit without that level's rows."""
    fit = fit_random_intercept_logit(
        separated, "worst_case", FIXED, "rater", reference={**REFERENCE, "stratum": "potentially_true"}
    )
    assert set(fit.separated_terms) == {"Intercept", "stratum[clear]", "stratum[soft]", SEPARATED[0]}
    assert any("the reference level stratum = potentially_true has 0 of 6" in w for w in fit.warnings)
    without = separated.loc[separated["stratum"] != "potentially_true"]
    plain = fit_random_intercept_logit(without, "worst_case", FIXED, "rater", reference=REFERENCE)
    for term in fit.terms:
        if term.column in ("model", "provenance") or term.name == "content_type[exception_poisoning]":
            assert term.estimate == pytest.approx(plain.term(term.name).estimate, abs=1e-4)
            assert term.se == pytest.approx(plain.term(term.name).se, rel=1e-3)


def test_no_information_left_after_separation_is_a_clear_error() -> None:
    data = pd.DataFrame(
        {"y": [0, 0, 0, 1, 1, 1], "a": ["x", "x", "x", "y", "y", "y"], "g": ["G1", "G2", "G1", "G2", "G1", "G2"]}
    )
    with pytest.raises(AnalysisInputError, match="penalised fit"):
        fit_random_intercept_logit(data, "y", ["a"], "g", reference={"a": "x"})
    fit = fit_random_intercept_logit(data, "y", ["a"], "g", reference={"a": "x"}, penalty="normal")
    assert fit.separated_terms == ("Intercept", "a[y]") and all(t.estimable for t in fit.terms)


@pytest.mark.parametrize(
    ("text", "key", "r_prior"),
    [
        (None, "none", "normal(sd = c(10, 2.5))"),
        ("none", "none", "normal(sd = c(10, 2.5))"),
        ("normal", "normal", "normal(sd = c(10, 2.5))"),
        (" Normal ", "normal", "normal(sd = c(10, 2.5))"),
        ("normal:1", "normal:1", "normal(sd = c(10, 1))"),
        ("normal:5,1.5", "normal:5,1.5", "normal(sd = c(5, 1.5))"),
        ("normal:10,2.5", "normal", "normal(sd = c(10, 2.5))"),
    ],
)
def test_penalty_parsing(text: str | None, key: str, r_prior: str) -> None:
    penalty = Penalty.parse(text)
    assert penalty.key == key and penalty.r_prior == r_prior
    assert penalty.active == (key != "none")


@pytest.mark.parametrize("text", ["firth", "normal:", "normal:-1", "normal:a", "normal:1,2,3", "none:1"])
def test_bad_penalty_is_refused(text: str) -> None:
    with pytest.raises(AnalysisInputError, match="penalty"):
        Penalty.parse(text)


def test_outcome_errors_name_the_file_line_counting_the_header() -> None:
    """Row 3 of the frame after dropping an incomplete row is line 5 of the file (header = line 1)."""
    data = pd.DataFrame(
        {
            "y": ["1", "0", "1", "maybe", "0", "1"],
            "a": ["x", None, "y", "y", "x", "y"],
            "g": ["G1", "G2", "G1", "G2", "G1", "G2"],
        }
    )
    with pytest.raises(AnalysisInputError, match=r"outcome column 'y' must hold 0/1 \(or true/false\): line 5 holds"):
        fit_random_intercept_logit(data, "y", ["a"], "g", row_offset=2)
    with pytest.raises(AnalysisInputError, match="row 3 holds 'maybe'"):
        fit_random_intercept_logit(data, "y", ["a"], "g")


@pytest.mark.parametrize("values", [["True", "false", "TRUE", "False"], [True, False, True, False]])
def test_true_false_outcome_raises_no_warning(values: list) -> None:
    rng = np.random.default_rng(1)
    n = 80
    data = pd.DataFrame(
        {
            "y": (values * (n // 4))[:n],
            "a": rng.choice(["x", "y"], n),
            "g": rng.choice(["G1", "G2", "G3", "G4"], n),
        }
    )
    data["y"] = data["y"].astype(object)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        fit = fit_random_intercept_logit(data, "y", ["a"], "g")
    assert fit.n == n and fit.n_events == n // 2
