"""Tasks for a given power to detect an adjusted odds ratio of the harm model."""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy import optimize, stats

from review_app.analysis.harm_model import fit_random_intercept_logit
from review_app.analysis.harm_model_result import (
    HUGE_ESTIMATE,
    HUGE_SE,
    INTERCEPT,
    LATENT_LOGISTIC_VARIANCE,
    HarmModelResult,
    Penalty,
)
from review_app.analysis.layout import AnalysisInputError
from review_app.analysis.sample_size.plan import (
    DEFAULT_DUAL_SHARE,
    DEFAULT_HARM_BASELINE,
    Plan,
    _check_raters,
    _check_seconds,
    _check_seed,
)
from review_app.analysis.sample_size.simulation import Progress, _Simulator


@dataclass(frozen=True)
class HarmPilot:
    """What a pilot study contributes to a harm-model power simulation.

    ``tasks`` holds one row per pilot task with its fixed-effect columns (the covariates of a
    resampled task); ``coefficients`` are the pilot fit's log-odds by term name; ``term`` is the
    term whose odds ratio is planned (its coefficient is replaced by log OR in the simulation).
    """

    tasks: pd.DataFrame
    fixed: tuple[str, ...]
    reference: dict[str, str]
    coefficients: dict[str, float]
    group_variance: float
    n_reviewers: int
    term: str
    not_estimable: tuple[str, ...] = ()
    penalty: str = "none"  # the pilot's fit; every simulated study is fitted the same way

    @classmethod
    def from_fit(cls, data: pd.DataFrame, result: HarmModelResult, *, task: str, term: str | None) -> HarmPilot:
        """From a pilot's harm-model input (one row per annotation, with a task column) and its fit.

        Only the rows that entered the fit are resampled (``in_model``, when the table has it: e.g.
        items without a clarity score are left out unless the pilot kept them as a level). Without
        ``term``, the first term the pilot estimates is planned for.
        """
        names = [t.name for t in result.terms if t.name != INTERCEPT]
        if not names:
            raise AnalysisInputError("the pilot's harm model has no fixed-effect term to plan for")
        # A separated term (a level whose pilot annotations are all 0 or all 1) has no finite estimate
        # under maximum likelihood, or one that comes from the prior of a penalised fit; simulating from
        # it would make those outcomes (all but) certain. Such terms, and any the pilot could not
        # estimate, are simulated with no effect (log-odds 0) and named in the plan's notes.
        unusable = {
            t.name
            for t in result.terms
            if t.separated or not t.estimable or abs(t.estimate) > HUGE_ESTIMATE or t.se > HUGE_SE
        }
        chosen = term or next((n for n in names if n not in unusable), names[0])
        if chosen not in names:
            raise AnalysisInputError(f"the pilot's harm model has no term {chosen!r}; terms: {', '.join(names)}")
        not_estimable = tuple(n for n in names if n in unusable and n != chosen)
        if INTERCEPT in unusable:
            raise AnalysisInputError(
                "the pilot's harm model has no finite intercept (worst cases are all but absent or universal at the "
                "reference levels); choose other reference levels for the pilot (Analysis page) or plan without the "
                "pilot (--expected, --icc, --reviewers)"
            )
        if "in_model" in data:
            data = data.loc[data["in_model"].astype(bool)]
        tasks = data.groupby(task, sort=True)[list(result.fixed)].first().reset_index(drop=True)
        return cls(
            tasks=tasks.astype(str),
            fixed=tuple(result.fixed),
            reference=dict(result.reference_levels),
            coefficients={t.name: 0.0 if t.name in not_estimable else t.estimate for t in result.terms},
            not_estimable=not_estimable,
            group_variance=result.group_variance,
            n_reviewers=result.n_groups,
            term=chosen,
            penalty=result.penalty.key,
        )


def _reviewers_for(rng: np.random.Generator, n_tasks: int, n_dual: int, raters: int, reviewers: int) -> np.ndarray:
    """Reviewer index per rating: tasks 0..n_dual-1 get ``raters`` distinct reviewers, the rest one."""
    order = np.argsort(rng.random((n_dual, reviewers)), axis=1)[:, :raters]
    single = rng.integers(0, reviewers, size=n_tasks - n_dual)
    return np.concatenate([order.ravel(), single])


def _sim_harm(
    rng: np.random.Generator,
    *,
    n: int,
    dual_share: float,
    raters: int,
    reviewers: int,
    sigma: float,
    beta0: float,
    log_or: float,
    share: float,
    alpha: float,
    pilot: HarmPilot | None,
) -> float:
    """1.0 when the simulated study's harm-model fit rejects b1 = 0 in the planned direction."""
    n_dual = round(dual_share * n)
    per_task = np.concatenate([np.full(n_dual, raters), np.ones(n - n_dual, dtype=int)])
    task_of_rating = np.repeat(np.arange(n), per_task)
    reviewer = _reviewers_for(rng, n, n_dual, raters, reviewers)
    u = sigma * rng.standard_normal(reviewers)
    if pilot is None:
        x_task = rng.random(n) < share
        x = x_task[task_of_rating]
        eta = beta0 + log_or * x + u[reviewer]
        frame = pd.DataFrame({"x": np.where(x, "1", "0"), "reviewer": reviewer.astype(str)})
        fixed, reference, term = ["x"], {"x": "0"}, "x[1]"
    else:
        tasks = pilot.tasks.iloc[rng.integers(0, len(pilot.tasks), size=n)].reset_index(drop=True)
        rows = tasks.iloc[task_of_rating].reset_index(drop=True)
        eta = np.full(len(rows), pilot.coefficients.get(INTERCEPT, 0.0))
        for column in pilot.fixed:
            values = rows[column].to_numpy()
            for level in np.unique(values):
                name = f"{column}[{level}]"
                coefficient = log_or if name == pilot.term else pilot.coefficients.get(name, 0.0)
                eta = eta + coefficient * (values == level)
        eta = eta + u[reviewer]
        frame = rows.assign(reviewer=reviewer.astype(str))
        fixed, reference, term = list(pilot.fixed), dict(pilot.reference), pilot.term
    frame["y"] = (rng.random(len(eta)) < 1 / (1 + np.exp(-eta))).astype(int)
    if frame["y"].nunique() < 2:
        return 0.0
    try:
        with warnings.catch_warnings():
            # An ill-conditioned step in one simulated study is the fit's business: it reports
            # non-convergence or an undefined p-value, which counts as no rejection below.
            warnings.simplefilter("ignore")
            result = fit_random_intercept_logit(
                frame, "y", fixed, "reviewer", reference=reference, penalty=None if pilot is None else pilot.penalty
            )
        fitted = result.term(term)
    except (AnalysisInputError, KeyError, np.linalg.LinAlgError):
        return 0.0
    if not result.converged or not math.isfinite(fitted.p_value):
        return 0.0
    return float(fitted.p_value < alpha and np.sign(fitted.estimate) == np.sign(log_or))


def _model_text(penalty: str | None) -> str:
    """How each simulated study is fitted (the plan's ``model`` assumption)."""
    chosen = Penalty.parse(penalty)
    if not chosen.active:
        return "random-intercept logit, Laplace ML fit, Wald test"
    return f"random-intercept logit, Laplace fit, {chosen.label}, Wald test"


def _approximate_tasks(
    odds_ratio: float, power: float, baseline: float, share: float, alpha: float, ratings_per_task: float
) -> int:
    """A Wald-test sample size for a two-group logistic comparison (the search's starting point)."""
    p0 = baseline
    odds1 = odds_ratio * p0 / (1 - p0)
    p1 = odds1 / (1 + odds1)
    z = stats.norm.ppf(1 - alpha / 2) + stats.norm.ppf(power)
    per_rating = (1 / (share * p1 * (1 - p1)) + 1 / ((1 - share) * p0 * (1 - p0))) * z**2 / math.log(odds_ratio) ** 2
    return max(10, math.ceil(per_rating / ratings_per_task))


def _probit_fit(points: dict[int, tuple[int, int]]) -> tuple[float, float] | None:
    """Probit regression of rejections on sqrt(n) over every simulated size: (intercept, slope)."""
    ns = np.array(sorted(points), dtype=float)
    k = np.array([points[int(n)][0] for n in ns], dtype=float)
    m = np.array([points[int(n)][1] for n in ns], dtype=float)
    if len(ns) < 2:
        return None
    x = np.sqrt(ns)

    def nll(params: np.ndarray) -> float:
        p = np.clip(stats.norm.cdf(params[0] + params[1] * x), 1e-9, 1 - 1e-9)
        return -float(np.sum(k * np.log(p) + (m - k) * np.log(1 - p)))

    fit = optimize.minimize(nll, np.array([-2.0, 0.1]), method="Nelder-Mead", options={"xatol": 1e-8, "fatol": 1e-10})
    a, b = fit.x
    return (float(a), float(b)) if b > 0 else None


def plan_harm_or(
    odds_ratio: float,
    power: float = 0.8,
    *,
    reviewers: int | None = None,
    icc: float | None = None,
    baseline: float | None = None,
    share: float = 0.5,
    dual_share: float = DEFAULT_DUAL_SHARE,
    raters: int = 2,
    alpha: float = 0.05,
    pilot: HarmPilot | None = None,
    seconds_per_rating: float | None = None,
    simulations: int = 300,
    seed: int = 0,
    workers: int = 1,
    progress: Progress | None = None,
) -> Plan:
    """Tasks needed to detect an adjusted odds ratio of the harm model with the given power.

    Without a pilot the tested term compares two levels of a task-level factor, ``share`` of the
    tasks at the compared level, with ``baseline`` the event rate at the reference level. With a
    ``pilot``, tasks and their covariates are resampled from it and the other coefficients (and,
    unless ``icc`` or ``reviewers`` are given, the reviewer variance and panel size) are the pilot
    fit's. ``simulations`` is the size of the final, confirming batch.
    """
    seed = _check_seed(seed)
    raters = _check_raters(raters)
    if not math.isfinite(odds_ratio) or odds_ratio <= 0 or odds_ratio == 1:
        raise AnalysisInputError(f"the odds ratio must be positive and not 1 (got {odds_ratio!r})")
    if not 0.5 <= power < 1:
        raise AnalysisInputError(f"the power must lie in [0.5, 1) (got {power!r})")
    if not 0 < alpha < 0.5:
        raise AnalysisInputError(f"alpha must lie in (0, 0.5) (got {alpha!r})")
    if not 0 <= dual_share <= 1:
        raise AnalysisInputError(f"the dual share must lie in [0, 1] (got {dual_share!r})")
    if not 0 < share < 1:
        raise AnalysisInputError(f"the share of tasks at the compared level must lie in (0, 1) (got {share!r})")
    if simulations < 50:
        raise AnalysisInputError("a power plan needs at least 50 simulations in its final batch")
    notes: list[str] = []
    if icc is None:
        if pilot is None:
            raise AnalysisInputError("give the reviewer ICC (--icc) or a pilot study to take it from")
        variance = pilot.group_variance
        icc = variance / (variance + LATENT_LOGISTIC_VARIANCE)
        notes.append(f"reviewer ICC {icc:.3f} from the pilot's harm model")
    if not 0 <= icc < 1:
        raise AnalysisInputError(f"the ICC must lie in [0, 1) (got {icc!r})")
    if reviewers is None:
        if pilot is None:
            raise AnalysisInputError("give the number of reviewers (--reviewers) or a pilot study")
        reviewers = pilot.n_reviewers
        notes.append(f"{reviewers} reviewers, as in the pilot")
    if int(reviewers) != reviewers or reviewers < max(2, raters):
        raise AnalysisInputError(f"the panel needs at least {max(2, raters)} reviewers (got {reviewers!r})")
    reviewers = int(reviewers)
    if baseline is None:
        baseline = DEFAULT_HARM_BASELINE
        if pilot is None:
            notes.append(f"baseline event rate {baseline} (the paper's worst-case rate); set --expected to change it")
    if not 0 < baseline < 1:
        raise AnalysisInputError(f"the baseline event rate must lie in (0, 1) (got {baseline!r})")
    if pilot is not None:
        notes.append(
            f"tasks and covariates resampled from the pilot's {len(pilot.tasks)} task(s); term {pilot.term} set to "
            f"log OR {math.log(odds_ratio):.3f}, other coefficients from the pilot fit"
        )
        if pilot.not_estimable:
            notes.append(
                "not estimable in the pilot (separation), simulated with no effect: " + ", ".join(pilot.not_estimable)
            )
    sigma = math.sqrt(icc / (1 - icc) * LATENT_LOGISTIC_VARIANCE)
    ratings_per_task = 1 + dual_share * (raters - 1)
    params = {
        "dual_share": dual_share,
        "raters": raters,
        "reviewers": reviewers,
        "sigma": sigma,
        "beta0": math.log(baseline / (1 - baseline)),
        "log_or": math.log(odds_ratio),
        "share": share,
        "alpha": alpha,
        "pilot": pilot,
    }
    coarse, medium = max(30, simulations // 8), max(60, simulations // 4)
    points: dict[int, tuple[int, int]] = {}

    def evaluate(sim: _Simulator, n: int, count: int) -> float:
        hits = sim.run(_sim_harm, params | {"n": n}, count)
        k, m = points.get(n, (0, 0))
        points[n] = (k + int(hits.sum()), m + count)
        return points[n][0] / points[n][1]

    start = _approximate_tasks(odds_ratio, power, baseline, share if pilot is None else 0.5, alpha, ratings_per_task)
    limit = 20_000  # tasks; beyond this a review study is not realistic and each fit gets slow
    with _Simulator(seed, workers, progress, coarse * 4 + medium * 3 + simulations * 2) as sim:
        # 1. Coarse bracket: few simulations per size, sizes a factor 1.5 apart.
        n = start
        low, high = None, None
        for _ in range(20):
            if evaluate(sim, n, coarse) >= power:
                high = n
                if low is not None:
                    break
                n = max(4, math.floor(n / 1.5))
                if n in points:
                    low = n
                    break
            else:
                low = n
                if high is not None:
                    break
                n = math.ceil(n * 1.5)
                if n > limit:
                    raise AnalysisInputError(
                        f"more than {limit} tasks would be needed for this odds ratio; plan for a larger effect"
                    )
        if high is None:
            raise AnalysisInputError("the search found no size with the requested power; plan for a larger effect")
        low = low if low is not None else max(4, high // 2)
        # 2. Bisection on the log scale with more simulations, to a bracket within 10 %.
        while high / low > 1.1 and high - low > 2:
            middle = round(math.sqrt(low * high))
            if evaluate(sim, middle, medium) >= power:
                high = middle
            else:
                low = middle
        # 3. Refine on the probit curve through every size simulated so far, confirm with a full
        #    batch, and refit with that batch included until the confirmed power is on target.
        chosen = high
        for _ in range(4):
            curve = _probit_fit(points)
            if curve is not None:
                a, b = curve
                estimate = math.ceil(((stats.norm.ppf(power) - a) / b) ** 2)
                chosen = int(min(max(estimate, min(points)), max(points)))
            achieved_power = evaluate(sim, chosen, simulations)
            m = points[chosen][1]
            se = math.sqrt(max(achieved_power * (1 - achieved_power), 1e-12) / m)
            if abs(achieved_power - power) <= 2 * se:
                break
        used = sim.used
    k, m = points[chosen]
    achieved_power = k / m
    if achieved_power < power - 2 * math.sqrt(achieved_power * (1 - achieved_power) / m):
        notes.append("the confirming simulations fell short of the requested power; treat the size as a lower bound")
    return Plan(
        metric="harm-or",
        n_tasks=chosen,
        n_dual=round(dual_share * chosen),
        raters=raters,
        target=float(power),
        achieved=achieved_power,
        achieved_se=math.sqrt(max(achieved_power * (1 - achieved_power), 1e-12) / m),
        simulations=used,
        seed=seed,
        seconds_per_rating=_check_seconds(seconds_per_rating),
        assumptions={
            "odds_ratio": float(odds_ratio),
            "icc": float(icc),
            "reviewers": reviewers,
            "baseline": float(baseline) if pilot is None else None,
            "share": float(share) if pilot is None else None,
            "alpha": float(alpha),
            "dual_share": float(dual_share),
            "term": "x[1]" if pilot is None else pilot.term,
            "model": _model_text(None if pilot is None else pilot.penalty),
        },
        notes=tuple(notes),
    )
