"""Study planning: the Wilson closed form, AC2 and harm-model plans checked on fresh simulations."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from statsmodels.stats.proportion import proportion_confint

from review_app.analysis.agreement import agreement
from review_app.analysis.harm_model import fit_random_intercept_logit
from review_app.analysis.harm_model_result import LATENT_LOGISTIC_VARIANCE
from review_app.analysis.layout import AnalysisInputError
from review_app.analysis.sample_size import (
    HarmPilot,
    Plan,
    combine,
    expected_ac2,
    latent_correlation,
    plan_ac2,
    plan_harm_or,
    plan_rate,
    wilson_sample_size,
)
from review_app.analysis.sample_size.ac2 import _cutpoints, _sim_ac2
from review_app.analysis.sample_size.harm_odds_ratio import _sim_harm
from review_app.analysis.sample_size.simulation import _rng, _Simulator

FRESH_SEED = 987_654  # seeds no plan below uses


def _brute_force_wilson_n(p: float, width: float) -> int:
    """Smallest n whose Wilson interval (statsmodels) at an observed rate of exactly p is <= width."""
    n = 1
    while True:
        low, high = proportion_confint(p * n, n, alpha=0.05, method="wilson")
        if high - low <= width:
            return n
        n += 1


@pytest.mark.parametrize(("p", "width"), [(0.38, 0.2), (0.38, 0.1), (0.05, 0.06), (0.5, 0.15), (0.981, 0.05), (0, 0.1)])
def test_rate_plan_is_the_closed_form_wilson_sample_size(p: float, width: float) -> None:
    plan = plan_rate(p, width, simulations=500, seed=1)
    assert plan.n_tasks == plan.closed_form_n == wilson_sample_size(p, width) == _brute_force_wilson_n(p, width)
    assert plan.n_dual == 0 and plan.dual_share == 0
    # The simulation checks the closed form: the mean width over binomial draws is close to the target.
    assert plan.achieved == pytest.approx(width, rel=0.08)
    assert plan.simulations == 500 and plan.seed == 1


def test_rate_plan_counts_the_wanted_dual_ratings_and_hours() -> None:
    plan = plan_rate(0.38, 0.2, dual_share=0.72, raters=2, seconds_per_rating=180, simulations=100)
    assert plan.n_tasks == 87 and plan.n_dual == round(0.72 * 87)
    assert plan.n_ratings == 87 + plan.n_dual
    assert plan.reviewer_hours == pytest.approx(plan.n_ratings * 180 / 3600)


def test_rate_plan_from_pilot_outcomes() -> None:
    outcomes = np.array([1] * 34 + [0] * 55)  # the paper's 34/89
    plan = plan_rate(None, 0.2, pilot_outcomes=outcomes, simulations=300, seed=2)
    assert plan.assumptions["expected"] == pytest.approx(34 / 89)
    assert plan.n_tasks == wilson_sample_size(34 / 89, 0.2)
    assert "resampled" in plan.notes[0]


@pytest.mark.parametrize(
    ("expected", "shares", "weights"),
    [(0.7, [1, 1, 1], "ordinal"), (0.5, [0.15, 0.25, 0.6], "ordinal"), (0.8, [0.2, 0.3, 0.5], "quadratic")],
)
def test_latent_model_has_the_expected_ac2(expected: float, shares: list[float], weights: str) -> None:
    pi = np.asarray(shares) / sum(shares)
    rho = latent_correlation(expected, pi, weights)
    assert expected_ac2(pi, rho, weights) == pytest.approx(expected, abs=1e-8)
    # One large simulated study scored by the Agreement page's function lands on it.
    params = dict(raters=2, rho=rho, cuts=_cutpoints(pi), categories=(0, 1, 2), weights=weights, pilot=None)
    rng = _rng(FRESH_SEED, 0)
    latent = math.sqrt(rho) * rng.standard_normal((20_000, 1)) + math.sqrt(1 - rho) * rng.standard_normal((20_000, 2))
    ratings = np.searchsorted(params["cuts"], latent)
    frame = pd.DataFrame(
        {"task_id": np.repeat(np.arange(20_000), 2), "rater": np.tile(["a", "b"], 20_000), "score": ratings.ravel()}
    )
    assert agreement(frame, "score", weights=weights).coefficient == pytest.approx(expected, abs=0.015)


@pytest.mark.parametrize(("expected", "width", "raters"), [(0.7, 0.2, 2), (0.55, 0.12, 2), (0.8, 0.15, 3)])
def test_ac2_plan_width_holds_on_a_fresh_simulation(expected: float, width: float, raters: int, capsys) -> None:
    plan = plan_ac2(expected, width, categories=3, raters=raters, simulations=150, seed=4, workers=2)
    assert plan.n_tasks == plan.n_dual and plan.dual_share == 1
    rho = plan.assumptions["latent_correlation"]
    pi = np.asarray(plan.assumptions["category_shares"])
    params = dict(
        n=plan.n_dual, raters=raters, rho=rho, cuts=_cutpoints(pi), categories=(0, 1, 2), weights="ordinal", pilot=None
    )
    fresh = np.array([_sim_ac2(_rng(FRESH_SEED, i), **params) for i in range(200)])
    with capsys.disabled():
        print(
            f"\nAC2 {expected} target width {width}, {raters} raters: {plan.n_dual} dual-rated tasks, "
            f"plan's width {plan.achieved:.4f}, fresh simulation {fresh.mean():.4f} ({plan.simulations} simulations)"
        )
    assert fresh.mean() == pytest.approx(width, rel=0.10)
    assert plan.achieved <= width


def test_ac2_plan_with_fixed_tasks_reports_the_dual_share() -> None:
    plan = plan_ac2(0.7, 0.2, tasks=300, simulations=60, seed=1)
    assert plan.n_tasks == 300 and plan.dual_share == pytest.approx(plan.n_dual / 300)
    assert combine([plan, plan_rate(0.38, 0.1, simulations=50)]) == (
        max(300, wilson_sample_size(0.38, 0.1)),
        plan.n_dual,
    )


def test_ac2_plan_from_pilot_ratings_resamples_them() -> None:
    rng = np.random.default_rng(5)
    truth = rng.integers(0, 3, 80)
    noisy = np.where(rng.random(80) < 0.8, truth, rng.integers(0, 3, 80))
    pilot = pd.DataFrame(
        {"task_id": np.repeat(np.arange(80), 2), "rater": np.tile(["a", "b"], 80), "score": np.c_[truth, noisy].ravel()}
    )
    observed = agreement(pilot, "score", unit="task_id", rater="rater")
    plan = plan_ac2(None, 0.15, pilot=pilot, simulations=60, seed=2)
    assert "resampling the pilot's 80" in plan.notes[0]
    assert plan.assumptions["latent_correlation"] is None
    # Resampling the pilot, the width at 80 tasks is the pilot's own width; the plan scales it.
    pilot_width = observed.ci_high - observed.ci_low
    assert plan.n_dual == pytest.approx(80 * (pilot_width / 0.15) ** 2, rel=0.25)


def test_plans_are_reproducible_and_do_not_depend_on_the_number_of_workers() -> None:
    one = plan_ac2(0.6, 0.25, simulations=40, seed=11, workers=1)
    two = plan_ac2(0.6, 0.25, simulations=40, seed=11, workers=2)
    assert one.to_dict() == two.to_dict()
    assert Plan.from_dict(one.to_dict()) == one
    other = plan_ac2(0.6, 0.25, simulations=40, seed=12, workers=1)
    assert other.achieved != one.achieved


def test_harm_plan_power_holds_on_a_fresh_simulation(capsys) -> None:
    plan = plan_harm_or(2.0, 0.8, reviewers=8, icc=0.15, baseline=0.3, simulations=300, seed=6, workers=2)
    sigma = math.sqrt(0.15 / 0.85 * LATENT_LOGISTIC_VARIANCE)
    params = dict(
        n=plan.n_tasks,
        dual_share=0.72,
        raters=2,
        reviewers=8,
        sigma=sigma,
        beta0=math.log(0.3 / 0.7),
        log_or=math.log(2.0),
        share=0.5,
        alpha=0.05,
        pilot=None,
    )
    with _Simulator(FRESH_SEED, 2, None, 500) as simulator:  # other seeds than the plan's, in two processes
        fresh = simulator.run(_sim_harm, params, 500)
    with capsys.disabled():
        print(
            f"\nharm OR 2.0, power 0.8: {plan.n_tasks} tasks ({plan.n_dual} dual), plan's power {plan.achieved:.3f}, "
            f"fresh simulation {fresh.mean():.3f} over 500 ({plan.simulations} simulations in the plan)"
        )
    assert abs(fresh.mean() - 0.8) <= 0.05
    assert plan.n_dual == round(0.72 * plan.n_tasks)
    assert plan.assumptions["icc"] == 0.15 and plan.assumptions["term"] == "x[1]"


def test_harm_simulation_fits_the_random_intercept_model_with_the_stated_effect() -> None:
    """Under the null the test rejects at about alpha; under a huge effect nearly always."""
    base = dict(n=300, dual_share=0.72, raters=2, reviewers=6, sigma=0.6, beta0=-0.5, share=0.5, alpha=0.05, pilot=None)
    null = np.mean([_sim_harm(_rng(FRESH_SEED, i), log_or=1e-9, **base) for i in range(300)])
    strong = np.mean([_sim_harm(_rng(FRESH_SEED, i), log_or=math.log(4), **base) for i in range(40)])
    assert null <= 0.06  # one-sided count of a two-sided test: about alpha / 2
    assert strong >= 0.95


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: plan_rate(1.5, 0.1), "expected rate"),
        (lambda: plan_rate(0.3, 0), "CI width"),
        (lambda: plan_rate(None, 0.1), "expected rate"),
        (lambda: plan_ac2(-0.9, 0.2), "outside what raters"),
        (lambda: plan_ac2(0.7, 0.2, categories=1), "two distinct"),
        (lambda: plan_ac2(0.7, 0.2, weights="cosine"), "unknown weights"),
        (lambda: plan_harm_or(1.0, 0.8, reviewers=5, icc=0.1), "not 1"),
        (lambda: plan_harm_or(2.0, 0.8, reviewers=1, icc=0.1), "at least 2 reviewers"),
        (lambda: plan_harm_or(2.0, 0.8, reviewers=5), "ICC"),
        (lambda: plan_harm_or(2.0, 0.3, reviewers=5, icc=0.1), "power"),
        (lambda: plan_rate(0.3, 0.1, seed=-1), "seed"),
    ],
)
def test_bad_inputs_are_refused_with_a_reason(call, message: str) -> None:
    with pytest.raises(AnalysisInputError, match=message):
        call()


def test_harm_plan_from_a_pilot_fit_with_a_separated_level() -> None:
    rng = np.random.default_rng(8)
    n = 240
    tasks = pd.DataFrame(
        {
            "task_id": np.arange(n),
            "model": rng.choice(["a", "b"], n),
            "stratum": np.where(np.arange(n) < 12, "potentially_true", rng.choice(["clear", "soft"], n)),
        }
    )
    rows = tasks.loc[tasks.index.repeat(2)].reset_index(drop=True)
    rows["rater"] = rng.choice([f"R{k}" for k in range(6)], len(rows))
    eta = -0.8 + 0.7 * (rows["model"] == "b")
    rows["worst_case"] = (rng.random(len(rows)) < 1 / (1 + np.exp(-eta))).astype(int)
    rows.loc[rows["stratum"] == "potentially_true", "worst_case"] = 0  # 0 of 24: separation
    fit = fit_random_intercept_logit(rows, "worst_case", ["model", "stratum"], "rater", reference={"model": "a"})
    pilot = HarmPilot.from_fit(rows, fit, task="task_id", term="model[b]")
    assert pilot.not_estimable == ("stratum[potentially_true]",)
    assert pilot.coefficients["stratum[potentially_true]"] == 0 and len(pilot.tasks) == n
    plan = plan_harm_or(2.5, 0.8, pilot=pilot, simulations=60, seed=3, workers=1)
    assert plan.assumptions["term"] == "model[b]" and plan.assumptions["reviewers"] == 6
    assert any("stratum[potentially_true]" in note for note in plan.notes)
    assert plan.achieved >= 0.7 and plan.n_tasks > 20
    with pytest.raises(AnalysisInputError, match="no term"):
        HarmPilot.from_fit(rows, fit, task="task_id", term="model[z]")


def test_pilot_plans_the_first_estimable_term_from_the_rows_in_the_model_under_the_pilots_penalty() -> None:
    rng = np.random.default_rng(11)
    n = 200
    tasks = pd.DataFrame(
        {
            "task_id": np.arange(n),
            "model": np.where(np.arange(n) < 10, "b", rng.choice(["a", "c"], n)),  # model[b] sorts first
            "stratum": rng.choice(["clear", "soft"], n),
        }
    )
    rows = tasks.loc[tasks.index.repeat(2)].reset_index(drop=True)
    rows["rater"] = rng.choice([f"R{k}" for k in range(5)], len(rows))
    eta = -0.7 + 0.6 * (rows["stratum"] == "soft") + 0.5 * (rows["model"] == "c")
    rows["worst_case"] = (rng.random(len(rows)) < 1 / (1 + np.exp(-eta))).astype(int)
    rows.loc[rows["model"] == "b", "worst_case"] = 0  # model b: no events
    # Tasks 190.. stand for items without a clarity score: outside the model, never resampled.
    rows["in_model"] = rows["task_id"] < 190
    used = rows.loc[rows["in_model"]]
    ml = fit_random_intercept_logit(used, "worst_case", ["model", "stratum"], "rater", reference={"model": "a"})
    pilot = HarmPilot.from_fit(rows, ml, task="task_id", term=None)
    assert pilot.term == "model[c]" and pilot.not_estimable == ("model[b]",)
    assert pilot.coefficients["model[b]"] == 0 and len(pilot.tasks) == 190 and pilot.penalty == "none"
    penalised = fit_random_intercept_logit(
        used, "worst_case", ["model", "stratum"], "rater", reference={"model": "a"}, penalty="normal"
    )
    assert np.isfinite(penalised.term("model[b]").estimate)  # finite only through the prior
    pilot = HarmPilot.from_fit(rows, penalised, task="task_id", term="stratum[soft]")
    assert pilot.not_estimable == ("model[b]",) and pilot.coefficients["model[b]"] == 0
    assert pilot.penalty == "normal"
    plan = plan_harm_or(2.5, 0.8, pilot=pilot, simulations=50, seed=1, workers=1)
    assert "penalised" in plan.assumptions["model"] and plan.assumptions["term"] == "stratum[soft]"
    assert any("model[b]" in note for note in plan.notes)
    no_intercept = fit_random_intercept_logit(
        used, "worst_case", ["model", "stratum"], "rater", reference={"model": "b"}
    )
    with pytest.raises(AnalysisInputError, match="no finite intercept"):
        HarmPilot.from_fit(rows, no_intercept, task="task_id", term=None)
