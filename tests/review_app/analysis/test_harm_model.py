"""The harm model against lme4::glmer, and its warnings on data it cannot fit sensibly.

Reference values were printed by ``tests/data/lme4_reference.R`` (lme4 1.1.31, R from Debian) and
are kept here as constants (``tests/data/lme4_reference.out`` has the full output); the test needs
no R. Targets: each log-odds coefficient within 2e-3 and the variance within 1 % of glmer's.

Standard errors: with adaptive quadrature ours match glmer's to about 1e-4 relative. With Laplace
they differ by up to 1.2 % (cbpp, period 2) because lme4 evaluates the Laplace log-determinant with the IRLS weights
of its penultimate PIRLS iteration (its reported logLik is 2.8e-4 below the exact Laplace value at
its own estimates, and its Laplace SEs are the outliers: 0.3031 for period 2 where its own nAGQ=7
fit gives 0.3068 and ours 0.3066); we evaluate the Laplace approximation exactly at the conditional
mode.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from review_app.analysis.harm_model import fit_random_intercept_logit
from review_app.analysis.layout import AnalysisInputError

DATA = Path(__file__).resolve().parents[2] / "data"

# glmer(y ~ period + (1 | herd), cbpp expanded to one 0/1 row per animal): (estimates, SEs, variance, loglik)
CBPP_BINARY = {
    1: (
        {
            "Intercept": -1.3983315442,
            "period[2]": -0.9919237687,
            "period[3]": -1.1282144973,
            "period[4]": -1.5797501735,
        },
        {"Intercept": 0.2312115468, "period[2]": 0.3031492690, "period[3]": 0.3228304891, "period[4]": 0.4220486437},
        0.4122463998,
        -277.5022260717,
    ),
    7: (
        {
            "Intercept": -1.3992319665,
            "period[2]": -0.9914026489,
            "period[3]": -1.1278184232,
            "period[4]": -1.5794693642,
        },
        {"Intercept": 0.2335119993, "period[2]": 0.3067671807, "period[3]": 0.3267674465, "period[4]": 0.4275936810},
        0.4192826206,
        -277.4590140059,
    ),
    15: (
        {
            "Intercept": -1.3992304151,
            "period[2]": -0.9914036886,
            "period[3]": -1.1278194985,
            "period[4]": -1.5794707239,
        },
        {"Intercept": 0.2335116915, "period[2]": 0.3067681852, "period[3]": 0.3267686113, "period[4]": 0.4275947808},
        0.4192801305,
        -277.4590287205,
    ),
}
# glmer(cbind(incidence, size - incidence) ~ period + (1 | herd), cbpp): the documented lme4 example.
CBPP_AGGREGATED = (
    {"Intercept": -1.3983315518, "period[2]": -0.9919238090, "period[3]": -1.1282143876, "period[4]": -1.5797500560},
    0.4122465778,
)
SIM_TERMS = (
    "Intercept",
    "model[gemini]",
    "model[gpt]",
    "content_type[exception_poisoning]",
    "content_type[relationship_inversion]",
    "content_type[spurious_anchoring]",
    "content_type[threshold_corruption]",
    "provenance[authority]",
    "provenance[patient]",
    "stratum[potentially_true]",
    "stratum[soft]",
)
# glmer(worst_case ~ model + content_type + provenance + stratum + (1 | rater), sim_harm.csv)
SIM = {
    1: (
        (
            -0.5133708831,
            -0.0806713492,
            -0.2470609867,
            0.9676907283,
            0.5548166958,
            0.0268753518,
            1.0225706976,
            0.0223850427,
            -1.0298813477,
            0.2892149694,
            -0.3631550415,
        ),
        (
            0.4188504399,
            0.4844789142,
            0.4298590968,
            0.5526906815,
            0.5375203895,
            0.5454784121,
            0.6994000964,
            0.4113612818,
            0.4956961334,
            0.5868015826,
            0.4765678077,
        ),
        0.0563715717,
        -98.2271417723,
    ),
    9: (
        (
            -0.5135745981,
            -0.0795524488,
            -0.2469322491,
            0.9704378603,
            0.5546103605,
            0.0279676746,
            1.0247663904,
            0.0209164066,
            -1.0301609345,
            0.2878048897,
            -0.3635585610,
        ),
        (
            0.4195687073,
            0.4849400366,
            0.4301356830,
            0.5537511903,
            0.5379612161,
            0.5460729236,
            0.7002544713,
            0.4120452359,
            0.4962184398,
            0.5874677405,
            0.4770236357,
        ),
        0.0604383958,
        -98.2235842913,
    ),
}
SIM_REFERENCE = {"model": "claude", "content_type": "cue_remapping", "provenance": "neutral", "stratum": "clear"}


@pytest.fixture(scope="module")
def cbpp() -> pd.DataFrame:
    return pd.read_csv(DATA / "cbpp.csv", dtype={"herd": str, "period": str})


@pytest.fixture(scope="module")
def cbpp_binary(cbpp: pd.DataFrame) -> pd.DataFrame:
    rows = []
    for r in cbpp.itertuples(index=False):
        rows += [{"herd": r.herd, "period": r.period, "y": 1}] * r.incidence
        rows += [{"herd": r.herd, "period": r.period, "y": 0}] * (r.size - r.incidence)
    return pd.DataFrame(rows)


@pytest.mark.parametrize("n_agq", [1, 7, 15])
def test_cbpp_binary_matches_glmer(cbpp_binary: pd.DataFrame, n_agq: int) -> None:
    estimates, ses, variance, loglik = CBPP_BINARY[n_agq]
    fit = fit_random_intercept_logit(cbpp_binary, "y", ["period"], "herd", reference={"period": "1"}, n_agq=n_agq)
    assert fit.converged and not fit.warnings
    assert [t.name for t in fit.terms] == list(estimates)
    for name, value in estimates.items():
        assert fit.term(name).estimate == pytest.approx(value, abs=2e-3)
        assert fit.term(name).se == pytest.approx(ses[name], rel=1.5e-2 if n_agq == 1 else 1e-3)
    assert fit.group_variance == pytest.approx(variance, rel=1e-2)
    assert fit.loglik == pytest.approx(loglik, abs=1e-3 if n_agq == 1 else 1e-6)
    assert fit.n == 842 and fit.n_groups == 15 and fit.n_events == 99


def test_binary_expansion_matches_the_aggregated_lme4_example(cbpp_binary: pd.DataFrame) -> None:
    """The per-animal Laplace fit has the aggregated fit's estimates (the likelihoods differ by a constant)."""
    estimates, variance = CBPP_AGGREGATED
    fit = fit_random_intercept_logit(cbpp_binary, "y", ["period"], "herd", reference={"period": "1"})
    for name, value in estimates.items():
        assert fit.term(name).estimate == pytest.approx(value, abs=2e-3)
    assert fit.group_variance == pytest.approx(variance, rel=1e-2)


@pytest.mark.parametrize("n_agq", [1, 9])
def test_paper_shaped_simulation_matches_glmer(n_agq: int) -> None:
    data = pd.read_csv(DATA / "sim_harm.csv")
    estimates, ses, variance, loglik = SIM[n_agq]
    fit = fit_random_intercept_logit(
        data,
        "worst_case",
        ["model", "content_type", "provenance", "stratum"],
        "rater",
        reference=SIM_REFERENCE,
        n_agq=n_agq,
    )
    assert fit.converged
    assert [t.name for t in fit.terms] == list(SIM_TERMS)
    for term, value, se in zip(fit.terms, estimates, ses, strict=True):
        assert term.estimate == pytest.approx(value, abs=2e-3), term.name
        assert term.se == pytest.approx(se, rel=1e-2), term.name
    assert fit.group_variance == pytest.approx(variance, rel=1e-2)
    assert fit.loglik == pytest.approx(loglik, abs=1e-3)
    assert fit.icc == pytest.approx(fit.group_variance / (fit.group_variance + math.pi**2 / 3))
    assert (fit.n, fit.n_groups) == (160, 14)


def test_odds_ratios_and_wald_intervals(cbpp_binary: pd.DataFrame) -> None:
    fit = fit_random_intercept_logit(cbpp_binary, "y", ["period"], "herd", reference={"period": "1"})
    term = fit.term("period[2]")
    assert term.odds_ratio == pytest.approx(math.exp(term.estimate))
    assert term.or_ci_low == pytest.approx(math.exp(term.estimate - 1.959964 * term.se), rel=1e-6)
    assert term.or_ci_high == pytest.approx(math.exp(term.estimate + 1.959964 * term.se), rel=1e-6)
    assert term.p_value == pytest.approx(2 * (1 - 0.5 * (1 + math.erf(abs(term.z) / math.sqrt(2)))), rel=1e-6)
    payload = fit.to_dict()
    assert {"n", "n_groups", "converged", "loglik", "group_variance", "icc", "terms"} <= set(payload)
    assert set(payload["terms"]["period[2]"]) == {
        "estimate", "se", "odds_ratio", "or_ci_low", "or_ci_high", "p_value", "separated",
    }  # fmt: skip
    assert payload["terms"]["period[2]"]["separated"] is False
    assert payload["separated_terms"] == [] and payload["penalty"] == "none"
    assert list(fit.to_frame().index) == [t.name for t in fit.terms]
    assert "period[4]" in fit.summary()


def test_default_reference_is_the_most_frequent_level() -> None:
    data = pd.read_csv(DATA / "sim_harm.csv")
    fit = fit_random_intercept_logit(data, "worst_case", ["provenance", "content_type"], "rater")
    assert fit.reference_levels == {"provenance": "authority", "content_type": "cue_remapping"}
    counts = data["provenance"].value_counts()
    assert counts["authority"] == counts.max()


def _toy(seed: int = 3, n: int = 240, groups: int = 12) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    data = pd.DataFrame(
        {
            "g": rng.choice([f"G{i}" for i in range(groups)], size=n),
            "a": rng.choice(["x", "y", "z"], size=n),
            "b": rng.choice(["p", "q"], size=n),
        }
    )
    effect = data["g"].map({f"G{i}": v for i, v in enumerate(rng.normal(0, 1.0, groups))})
    eta = -0.3 + (data["a"] == "y") * 0.8 + effect
    data["y"] = (rng.random(n) < 1 / (1 + np.exp(-eta))).astype(int)
    return data


def test_separation_is_reported_not_hidden() -> None:
    data = _toy()
    data.loc[data["a"] == "z", "y"] = 0
    fit = fit_random_intercept_logit(data, "y", ["a"], "g", reference={"a": "x"})
    n_z = int((data["a"] == "z").sum())
    assert any(f"separation: a = z: 0 of {n_z} annotation(s) are events" in w for w in fit.warnings)
    assert fit.separated_terms == ("a[z]",) and fit.converged
    separated = fit.term("a[z]")
    assert separated.separated and separated.separation == "no events in this level"
    assert math.isnan(separated.estimate) and math.isnan(separated.odds_ratio) and not separated.estimable
    assert all(t.estimable for t in fit.terms if t.name != "a[z]")
    assert "a[z]" in fit.summary() and "not estimable (no events in this level)" in fit.summary()


def test_boundary_variance_is_reported() -> None:
    rng = np.random.default_rng(11)
    data = pd.DataFrame({"g": np.repeat([f"G{i}" for i in range(10)], 30), "a": rng.choice(["x", "y"], 300)})
    data["y"] = (rng.random(300) < 0.4).astype(int)  # no group effect at all
    fit = fit_random_intercept_logit(data, "y", ["a"], "g")
    assert fit.group_variance == 0.0 and fit.icc == 0.0
    assert any("boundary (singular) fit" in w for w in fit.warnings)
    assert fit.converged
    assert all(math.isfinite(t.se) for t in fit.terms)


def test_aliased_terms_are_dropped_with_a_warning() -> None:
    data = _toy()
    data["copy"] = data["a"].map({"x": "one", "y": "two", "z": "three"})
    fit = fit_random_intercept_logit(data, "y", ["a", "copy"], "g", reference={"a": "x", "copy": "one"})
    assert [t.name for t in fit.terms] == ["Intercept", "a[y]", "a[z]"]
    assert any("rank deficient" in w and "copy[three]" in w for w in fit.warnings)


def test_missing_rows_are_dropped_and_counted() -> None:
    data = _toy()
    data.loc[:4, "a"] = np.nan
    fit = fit_random_intercept_logit(data, "y", ["a"], "g")
    assert fit.dropped_rows == 5 and fit.n == len(data) - 5
    assert any("dropped 5 row(s)" in w for w in fit.warnings)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"reference": {"a": "nope"}}, "unknown reference level 'nope' for column 'a'"),
        ({"reference": {"zz": "x"}}, "not a fixed-effect column"),
        ({"fixed": ["a", "missing"]}, "no column(s) 'missing'"),
        ({"n_agq": 0}, "n_agq"),
    ],
)
def test_bad_arguments_are_refused(kwargs: dict, message: str) -> None:
    arguments = {"fixed": ["a"], **kwargs}
    fixed = arguments.pop("fixed")
    with pytest.raises(AnalysisInputError, match=message.replace("(", r"\(").replace(")", r"\)")):
        fit_random_intercept_logit(_toy(), "y", fixed, "g", **arguments)


def test_outcome_must_be_binary_and_vary() -> None:
    data = _toy()
    bad = data.assign(y=data["y"] * 2)
    with pytest.raises(AnalysisInputError, match="must hold 0/1"):
        fit_random_intercept_logit(bad, "y", ["a"], "g")
    with pytest.raises(AnalysisInputError, match="no variation"):
        fit_random_intercept_logit(data.assign(y=1), "y", ["a"], "g")


@pytest.mark.parametrize("n_agq", [1, 5])
def test_analytic_gradient_matches_finite_differences(n_agq: int) -> None:
    from review_app.analysis.harm_model import _build_design, _Fit

    data = pd.read_csv(DATA / "sim_harm.csv")
    design = _build_design(data, "worst_case", ["model", "content_type", "provenance", "stratum"], "rater", {})
    fit = _Fit(design.y, design.X, design.groups, design.n_groups, n_agq)
    params = np.append(np.random.default_rng(0).normal(0, 0.5, design.X.shape[1]), 0.8)
    numeric = []
    for j in range(len(params)):
        step = np.zeros(len(params))
        step[j] = 1e-6
        up, down = params + step, params - step
        numeric.append((fit.loglik(up[:-1], up[-1]) - fit.loglik(down[:-1], down[-1])) / 2e-6)
    assert fit.gradient(params[:-1], params[-1]) == pytest.approx(np.array(numeric), abs=1e-6)


def _row_by_row_loglik(
    y: np.ndarray, X: np.ndarray, groups: np.ndarray, beta: np.ndarray, sigma: float, n_agq: int
) -> float:
    """The Laplace / adaptive Gauss-Hermite log-likelihood summed over rows, one group at a time (no cells)."""
    total = 0.0
    for j in np.unique(groups):
        yj, xb = y[groups == j], X[groups == j] @ beta

        def h(u: float, yj: np.ndarray = yj, xb: np.ndarray = xb) -> float:
            eta = xb + sigma * u
            return float(np.sum(yj * eta - np.logaddexp(0.0, eta)) - u**2 / 2)

        u = 0.0
        for _ in range(200):
            mu = 1 / (1 + np.exp(-(xb + sigma * u)))
            step = (sigma * np.sum(yj - mu) - u) / (sigma**2 * np.sum(mu * (1 - mu)) + 1)
            u += step
            if abs(step) < 1e-13:
                break
        mu = 1 / (1 + np.exp(-(xb + sigma * u)))
        curv = sigma**2 * np.sum(mu * (1 - mu)) + 1
        if n_agq == 1:
            total += h(u) - 0.5 * math.log(curv)
            continue
        nodes, weights = np.polynomial.hermite_e.hermegauss(n_agq)
        scale = 1 / math.sqrt(curv)
        terms = [h(u + scale * z) + math.log(w) + z**2 / 2 for z, w in zip(nodes, weights, strict=True)]
        total += math.log(scale) + float(np.logaddexp.reduce(terms)) - 0.5 * math.log(2 * math.pi)
    return total


@pytest.mark.parametrize("n_agq", [1, 5])
def test_fit_on_cells_has_the_row_by_row_likelihood(n_agq: int) -> None:
    """The fit collapses rows to (covariate pattern, group) cells; its likelihood is the rows' one."""
    from review_app.analysis.harm_model import _build_design, _Fit

    data = pd.read_csv(DATA / "sim_harm.csv")
    design = _build_design(data, "worst_case", ["model", "content_type", "provenance", "stratum"], "rater", {})
    fit = _Fit(design.y, design.X, design.groups, design.n_groups, n_agq)
    assert len(fit.g) < len(design.y) and fit.n.sum() == len(design.y) and fit.s.sum() == design.y.sum()
    rng = np.random.default_rng(1)
    for sigma in (0.0, 0.4, 1.3):
        beta = rng.normal(0, 0.5, design.X.shape[1])
        expected = _row_by_row_loglik(design.y, design.X, design.groups, beta, sigma, n_agq)
        assert fit.loglik(beta, sigma) == pytest.approx(expected, rel=1e-11)


def test_blank_and_stripped_text_decide_each_distinct_value_as_the_cell_by_cell_forms_do() -> None:
    """The fits' preparation decides each distinct value once; the result is the per-cell one exactly."""
    import numpy as np
    import pandas as pd

    from review_app.analysis.harm_model_design import blank_text, stripped_text

    frame = pd.DataFrame(
        {
            "text": ["x", " ", None, np.nan, "", " y "],
            "numbers": [1, 2, 3, 4, 5, 6],
            "mixed": ["", 1, True, " ", None, "z"],
            "categories": pd.Categorical(["a", " ", "a", "", "b", "b"]),
            "numpy_text": [np.str_(" "), "a", "b", "", "c", "d"],
        }
    )
    expected = frame.map(lambda v: isinstance(v, str) and not v.strip()).to_numpy()
    assert (blank_text(frame) == expected).all()
    for column in frame:
        assert list(stripped_text(frame[column])) == list(frame[column].astype(str).str.strip())
    assert blank_text(frame.iloc[0:0]).shape == (0, 5) and len(stripped_text(frame["text"].iloc[0:0])) == 0
