"""Dual-rated tasks for Gwet's AC2 with a confidence interval of at most a given width."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import pandas as pd
from scipy import optimize, stats

from review_app.analysis.agreement import WEIGHT_SCHEMES, agreement, weight_matrix
from review_app.analysis.layout import AnalysisInputError
from review_app.analysis.sample_size.plan import (
    Plan,
    _check_raters,
    _check_seconds,
    _check_seed,
    _check_width,
)
from review_app.analysis.sample_size.simulation import Progress, _Simulator

MAX_AC2_TASKS = 50_000  # the search gives up above this many dual-rated tasks


def _cutpoints(marginals: np.ndarray) -> np.ndarray:
    return stats.norm.ppf(np.clip(np.cumsum(marginals)[:-1], 1e-12, 1 - 1e-12))


def _pair_probabilities(marginals: np.ndarray, rho: float) -> np.ndarray:
    """P(rater 1 in k, rater 2 in l) for two raters of the latent-normal model with correlation rho."""
    edges = np.concatenate([[-9.0], np.clip(_cutpoints(marginals), -9, 9), [9.0]])
    mvn = stats.multivariate_normal(mean=[0, 0], cov=[[1, rho], [rho, 1]])
    grid = np.array([[mvn.cdf([a, b]) if a > -9 and b > -9 else 0.0 for b in edges] for a in edges])
    grid[-1, :] = [stats.norm.cdf(b) if b > -9 else 0.0 for b in edges]
    grid[:, -1] = [stats.norm.cdf(a) if a > -9 else 0.0 for a in edges]
    grid[-1, -1] = 1.0
    probs = grid[1:, 1:] - grid[:-1, 1:] - grid[1:, :-1] + grid[:-1, :-1]
    return np.clip(probs, 0, None)


def expected_ac2(marginals: Sequence[float], rho: float, weights: str = "ordinal") -> float:
    """Population AC2 of the latent-normal rating model (Gwet's pa and pe at the model's probabilities)."""
    pi = np.asarray(marginals, dtype=float)
    q = len(pi)
    w = weight_matrix(range(q), weights)
    pa = float((w * _pair_probabilities(pi, rho)).sum())
    pe = float(w.sum() * (pi * (1 - pi)).sum() / (q * (q - 1)))
    return (pa - pe) / (1 - pe)


def latent_correlation(expected: float, marginals: Sequence[float], weights: str = "ordinal") -> float:
    """The rater correlation rho in [0, 1) at which the model's AC2 equals ``expected``."""
    low, high = expected_ac2(marginals, 0.0, weights), 1.0
    if not low <= expected < high:
        raise AnalysisInputError(
            f"an expected AC2 of {expected:g} is outside what raters who agree at least by chance can give "
            f"with these category shares ({low:.3f} to just under 1)"
        )
    if expected == low:
        return 0.0
    return float(optimize.brentq(lambda r: expected_ac2(marginals, r, weights) - expected, 0.0, 0.999999, xtol=1e-10))


def _ac2_frame(ratings: np.ndarray) -> pd.DataFrame:
    n, r = ratings.shape
    return pd.DataFrame(
        {
            "task_id": np.repeat(np.arange(n), r),
            "rater": np.tile([f"r{j + 1}" for j in range(r)], n),
            "score": ratings.ravel(),
        }
    )


def _sim_ac2(
    rng: np.random.Generator,
    *,
    n: int,
    raters: int,
    rho: float,
    cuts: np.ndarray | None,
    categories: tuple[int, ...],
    weights: str,
    pilot: tuple[np.ndarray, ...] | None,
) -> float:
    if pilot is not None:
        picked = rng.integers(0, len(pilot), size=n)
        rows = [(task, f"r{j + 1}", score) for task, k in enumerate(picked) for j, score in enumerate(pilot[k])]
        frame = pd.DataFrame(rows, columns=["task_id", "rater", "score"])
    else:
        latent = math.sqrt(rho) * rng.standard_normal((n, 1)) + math.sqrt(1 - rho) * rng.standard_normal((n, raters))
        frame = _ac2_frame(np.asarray(categories)[np.searchsorted(cuts, latent)])
    result = agreement(frame, "score", unit="task_id", rater="rater", weights=weights, categories=categories)
    if result.ci_low is None or result.ci_high is None:
        return float("nan")
    return result.ci_high - result.ci_low


def _pilot_units(pilot: pd.DataFrame, categories: tuple[int, ...]) -> tuple[np.ndarray, ...]:
    """Dual-rated pilot units as arrays of their scores (columns task_id, rater, score)."""
    missing = [c for c in ("task_id", "rater", "score") if c not in pilot.columns]
    if missing:
        raise AnalysisInputError(f"pilot ratings need columns task_id, rater, score (missing {', '.join(missing)})")
    rated = pilot.loc[pilot["score"].notna()]
    outside = ~rated["score"].isin(categories)
    if outside.any():
        raise AnalysisInputError(
            f"pilot score {rated.loc[outside, 'score'].iloc[0]!r} is outside the categories "
            f"{', '.join(map(str, categories))}"
        )
    units = tuple(group.to_numpy(dtype=int) for _, group in rated.groupby("task_id", sort=True)["score"])
    return tuple(u for u in units if len(u) >= 2)


def plan_ac2(
    expected: float | None,
    ci_width: float,
    *,
    categories: int | Sequence[int] = 3,
    raters: int = 2,
    weights: str = "ordinal",
    marginals: Sequence[float] | None = None,
    pilot: pd.DataFrame | None = None,
    tasks: int | None = None,
    seconds_per_rating: float | None = None,
    simulations: int = 200,
    seed: int = 0,
    workers: int = 1,
    progress: Progress | None = None,
) -> Plan:
    """Dual-rated tasks needed for an AC2 95% CI of at most ``ci_width`` (mean over simulated studies).

    ``categories`` is the number of rating categories (0..K-1) or the categories themselves.
    ``pilot`` holds pilot ratings of one dimension (columns ``task_id, rater, score``): with
    ``expected`` given, only its category shares are used; without it, its dual-rated tasks are
    resampled with their ratings. ``tasks`` is the number of tasks the study will have anyway
    (e.g. from a rate plan); the dual share is then the dual-rated tasks over it.
    """
    seed = _check_seed(seed)
    raters = _check_raters(raters)
    if weights not in WEIGHT_SCHEMES:
        raise AnalysisInputError(f"unknown weights {weights!r}; choose one of {', '.join(WEIGHT_SCHEMES)}")
    cats = tuple(range(int(categories))) if isinstance(categories, int | np.integer) else tuple(map(int, categories))
    if len(cats) < 2 or len(set(cats)) != len(cats):
        raise AnalysisInputError(f"AC2 needs at least two distinct rating categories (got {categories!r})")
    cats = tuple(sorted(cats))
    _check_width(ci_width, 2.0)
    if simulations < 20:
        raise AnalysisInputError("an AC2 plan needs at least 20 simulations per check")
    notes: list[str] = []
    units: tuple[np.ndarray, ...] | None = None
    rho = 0.0
    cuts = None
    if pilot is not None:
        pilot_units = _pilot_units(pilot, cats)
        counts = pd.Series(pilot["score"].dropna().astype(int)).value_counts()
        marginals = [float(counts.get(c, 0)) for c in cats]
        if expected is None:
            if len(pilot_units) < 5:
                raise AnalysisInputError(
                    f"the pilot has {len(pilot_units)} dual-rated task(s) for this score; at least 5 are needed to "
                    "resample it (or give --expected to use only its category shares)"
                )
            units = pilot_units
            raters = int(np.median([len(u) for u in units]))
            notes.append(f"resampling the pilot's {len(units)} dual-rated task(s) with their ratings")
        else:
            notes.append("category shares from the pilot's ratings; agreement from the expected AC2")
    if marginals is None:
        marginals = [1.0] * len(cats)
    pi = np.asarray(marginals, dtype=float)
    if len(pi) != len(cats) or (pi < 0).any() or pi.sum() <= 0:
        raise AnalysisInputError(f"category shares must be {len(cats)} non-negative numbers, not all zero")
    pi = np.clip(pi / pi.sum(), 1e-6, None)
    pi = pi / pi.sum()
    if units is None:
        if expected is None:
            raise AnalysisInputError("give the expected AC2 (--expected) or a pilot study to resample")
        if not -1 < expected < 1:
            raise AnalysisInputError(f"the expected AC2 must lie strictly between -1 and 1 (got {expected!r})")
        rho = latent_correlation(expected, pi, weights)
        cuts = _cutpoints(pi)
    if tasks is not None and tasks < 1:
        raise AnalysisInputError(f"--tasks must be at least 1 (got {tasks})")
    params = {"raters": raters, "rho": rho, "cuts": cuts, "categories": cats, "weights": weights, "pilot": units}

    def mean_width(sim: _Simulator, n: int, count: int) -> tuple[float, float]:
        widths = sim.run(_sim_ac2, params | {"n": n}, count)
        widths = widths[np.isfinite(widths)]
        if len(widths) == 0:
            raise AnalysisInputError(
                "no simulated study had a defined AC2 interval (every rating in one category?); "
                "check the expected agreement and category shares"
            )
        return float(widths.mean()), float(widths.std(ddof=1) / math.sqrt(len(widths))) if len(widths) > 1 else 0.0

    pilot_size = max(20, simulations // 5)
    with _Simulator(seed, workers, progress, pilot_size * 2 + simulations * 2) as sim:
        # The width falls like 1/sqrt(n): estimate the constant, jump to the size it implies, repeat.
        n = 100
        for _ in range(6):
            width, _se = mean_width(sim, n, pilot_size)
            guess = max(3, math.ceil(n * (width / ci_width) ** 2))
            if guess > MAX_AC2_TASKS:
                raise AnalysisInputError(
                    f"more than {MAX_AC2_TASKS} dual-rated tasks would be needed for a CI width of {ci_width:g}; "
                    "accept a wider interval"
                )
            if abs(guess - n) <= max(2, 0.02 * n):
                n = guess
                break
            n = guess
        # Confirm with the full batch, nudging up until the mean width meets the target.
        for _ in range(6):
            width, se = mean_width(sim, n, simulations)
            if width <= ci_width:
                break
            n = max(n + 1, math.ceil(n * (width / ci_width) ** 2))
        used = sim.used
    if width > ci_width:
        notes.append("the search stopped before the simulated width met the target; treat the size as a lower bound")
    n_tasks = max(n, int(tasks or 0))
    if tasks is not None and tasks < n:
        notes.append(f"{tasks} tasks are fewer than the {n} dual-rated tasks needed; every task must be dual-rated")
    return Plan(
        metric="ac2",
        n_tasks=n_tasks,
        n_dual=n,
        raters=raters,
        target=float(ci_width),
        achieved=width,
        achieved_se=se,
        simulations=used,
        seed=seed,
        seconds_per_rating=_check_seconds(seconds_per_rating),
        assumptions={
            "expected": None if expected is None else float(expected),
            "categories": list(cats),
            "weights": weights,
            "category_shares": [round(float(v), 4) for v in pi],
            "latent_correlation": round(rho, 6) if units is None else None,
            "interval": "Gwet linearisation variance, Student-t (irrCAC), as the Agreement page",
        },
        notes=tuple(notes),
    )
