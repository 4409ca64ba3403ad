"""Study planning: how many tasks, how many of them dual-rated, and how many reviewer-hours.

A lead states what the study must deliver and gets the sample size that delivers it:

* **rate** (``plan_rate``): a task-level rate such as the conservative worst-case rate, reported
  with a Wilson 95% CI of at most a given width. The size is the closed-form solution of the
  Wilson width at the expected rate (see :func:`wilson_sample_size`); a seeded simulation of
  binomial outcomes at that size reports the CI width actually achieved (the width varies with
  the observed rate).
* **AC2** (``plan_ac2``): Gwet's AC2 on one rubric dimension with a CI of at most a given width.
  Agreement is computed on dual-rated tasks only, so this sets the number of dual-rated tasks.
  Ratings are simulated from a latent-normal (ordinal probit) model: a task's true value
  ``T ~ N(0, 1)``, each rater reads ``sqrt(rho) T + sqrt(1 - rho) E``, and cut points give the
  category marginals (uniform unless a pilot supplies them). ``rho`` is solved exactly (bivariate
  normal rectangle probabilities) so that the expected AC2 equals the stated value, and every
  simulated study is scored by :func:`review_app.analysis.agreement.agreement`, the same call (and
  the same Gwet/irrCAC interval) as the Agreement page.
* **harm-model odds ratio** (``plan_harm_or``): power to detect an adjusted odds ratio of the harm
  model. Annotations are simulated from the random-intercept logit ``logit P(y) = b0 + b1 x + u_r``
  with ``u_r ~ N(0, s^2)`` and ``s^2 = ICC / (1 - ICC) * pi^2 / 3`` over the planned number of
  reviewers; each simulated study is fitted with
  :func:`review_app.analysis.harm_model.fit_random_intercept_logit` (Laplace ML, as the Analysis page
  does) and counts as a rejection when the Wald test of ``b1`` rejects at ``alpha`` in the stated
  direction. The number of tasks is found by a geometric search over a coarse grid with few
  simulations, then refined on a probit curve of power against sqrt(n) fitted to every simulation
  run so far, and confirmed by a final batch at the chosen size.

With a **pilot** (any metric), its data replace the assumptions: the observed task outcomes are
resampled (rate), its dual-rated tasks are resampled with their ratings (AC2; with an expected
value given, only its category marginals are used), or its tasks' covariates are resampled and
outcomes drawn from its fitted harm model with the tested term set to the planned odds ratio
(harm-OR). Reviewer-hours use the pilot's median time on task.

Every simulation draws from its own ``numpy.random.SeedSequence(seed, spawn_key=(i,))``, where
``i`` counts simulations in the order the plan asks for them; results therefore do not depend on
how many worker processes ran them, and the same seed gives the same plan.
"""

from __future__ import annotations

import math
import multiprocessing
import os
import sys
import threading
import types
import warnings
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Executor, ProcessPoolExecutor, as_completed
from concurrent.futures.process import BrokenProcessPool
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd
from scipy import optimize, stats

from review_app.analysis.agreement import WEIGHT_SCHEMES, agreement, weight_matrix
from review_app.analysis.harm_model import (
    HUGE_ESTIMATE,
    HUGE_SE,
    INTERCEPT,
    LATENT_LOGISTIC_VARIANCE,
    HarmModelResult,
    Penalty,
    fit_random_intercept_logit,
)
from review_app.analysis.layout import AnalysisInputError
from review_app.analysis.proportions import wilson

METRICS: tuple[str, ...] = ("rate", "ac2", "harm-or")
DEFAULT_HARM_BASELINE = 0.38  # the paper's conservative worst-case rate (34/89)
DEFAULT_DUAL_SHARE = 0.72
MAX_AC2_TASKS = 50_000  # the paper's protocol: 64 of 89 tasks rated by two or more clinicians
Progress = Callable[[int, int], None]


# --- the result ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Plan:
    """What a study needs for one target, and what the simulation says it achieves.

    ``n_tasks`` tasks of one rubric, ``n_dual`` of them rated by ``raters`` reviewers (the rest
    once); ``n_ratings`` annotations in all, ``reviewer_hours`` at ``seconds_per_rating`` each.
    """

    metric: str
    n_tasks: int
    n_dual: int
    raters: int
    target: float
    achieved: float
    simulations: int
    seed: int
    seconds_per_rating: float | None = None
    assumptions: dict[str, Any] = field(default_factory=dict)
    notes: tuple[str, ...] = ()
    closed_form_n: int | None = None
    achieved_se: float | None = None

    @property
    def dual_share(self) -> float:
        return self.n_dual / self.n_tasks if self.n_tasks else 0.0

    @property
    def n_ratings(self) -> int:
        return self.n_tasks + self.n_dual * (self.raters - 1)

    @property
    def reviewer_hours(self) -> float | None:
        if self.seconds_per_rating is None:
            return None
        return self.n_ratings * self.seconds_per_rating / 3600

    @property
    def target_name(self) -> str:
        return "power" if self.metric == "harm-or" else "ci_width"

    def to_dict(self) -> dict[str, Any]:
        """The SPEC keys of ``medrev stats plan --json`` first, then the assumptions and extras."""
        achieved_key = "achieved_power" if self.metric == "harm-or" else "achieved_ci_width"
        return {
            "n_tasks": self.n_tasks,
            "n_dual": self.n_dual,
            "dual_share": self.dual_share,
            achieved_key: self.achieved,
            "simulations": self.simulations,
            "seed": self.seed,
            "metric": self.metric,
            f"target_{self.target_name}": self.target,
            "achieved_se": self.achieved_se,
            "raters": self.raters,
            "n_ratings": self.n_ratings,
            "seconds_per_rating": self.seconds_per_rating,
            "reviewer_hours": self.reviewer_hours,
            "closed_form_n": self.closed_form_n,
            "assumptions": dict(self.assumptions),
            "notes": list(self.notes),
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Plan:
        """The inverse of :meth:`to_dict` (a plan saved with a study is read back with this)."""
        metric = data["metric"]
        target_key = "target_power" if metric == "harm-or" else "target_ci_width"
        achieved_key = "achieved_power" if metric == "harm-or" else "achieved_ci_width"
        return cls(
            metric=metric,
            n_tasks=int(data["n_tasks"]),
            n_dual=int(data["n_dual"]),
            raters=int(data.get("raters", 2)),
            target=float(data[target_key]),
            achieved=float(data[achieved_key]),
            simulations=int(data["simulations"]),
            seed=int(data["seed"]),
            seconds_per_rating=data.get("seconds_per_rating"),
            assumptions=dict(data.get("assumptions", {})),
            notes=tuple(data.get("notes", ())),
            closed_form_n=data.get("closed_form_n"),
            achieved_se=data.get("achieved_se"),
        )

    def summary(self) -> str:
        lines = [f"Plan ({self.metric}): {self.n_tasks} tasks, {self.n_dual} rated by {self.raters} reviewers"]
        lines[0] += f" (dual share {self.dual_share:.2f}), {self.n_ratings} ratings"
        if self.reviewer_hours is not None:
            lines.append(
                f"  reviewer-hours: {self.reviewer_hours:.1f} (median {self.seconds_per_rating:.0f} s per rating)"
            )
        if self.metric == "harm-or":
            lines.append(
                f"  power: target {self.target:.2f}, simulated {self.achieved:.3f} (SE {self.achieved_se:.3f})"
            )
        else:
            lines.append(f"  95% CI width: target {self.target:.3f}, simulated mean {self.achieved:.3f}")
        if self.closed_form_n is not None:
            lines.append(f"  closed-form Wilson sample size: {self.closed_form_n}")
        lines.append(f"  {self.simulations} simulations, seed {self.seed}")
        assumptions = ", ".join(f"{k}={_show(v)}" for k, v in self.assumptions.items())
        lines.append(f"  assumptions: {assumptions}")
        lines.extend(f"  note: {n}" for n in self.notes)
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.summary()


def _show(value: object) -> str:
    if isinstance(value, float):
        return f"{value:.4g}"
    if isinstance(value, list | tuple):
        return "[" + ", ".join(_show(v) for v in value) + "]"
    return str(value)


def combine(plans: Sequence[Plan]) -> tuple[int, int]:
    """(tasks, dual-rated tasks) that satisfy every plan at once: the largest of each."""
    if not plans:
        return 0, 0
    n_tasks = max(max(p.n_tasks, p.n_dual) for p in plans)
    return n_tasks, max(p.n_dual for p in plans)


# --- simulation machinery ----------------------------------------------------------------------


def _rng(seed: int, index: int) -> np.random.Generator:
    return np.random.default_rng(np.random.SeedSequence(seed, spawn_key=(index,)))


def _run_chunk(function: Callable[..., float], params: dict[str, Any], seed: int, indices: list[int]) -> list[float]:
    """One worker job: simulations ``indices`` of a plan (module-level, so it pickles by name)."""
    return [function(_rng(seed, i), **params) for i in indices]


def default_workers() -> int:
    """Worker processes for simulations: one per core the process may use."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # pragma: no cover - not Linux
        return max(1, os.cpu_count() or 1)


_MAIN_SWAP = threading.Lock()


@contextmanager
def _without_main_script() -> Iterator[None]:
    """Start processes without making them re-run this process's ``__main__`` script.

    A forkserver child normally re-imports the parent's main script first; under Streamlit that is
    the app page (with no signed-in session), under a plain script its unguarded top level. The
    workers need only this module, so ``__main__`` is hidden for the moment the processes start.
    """
    with _MAIN_SWAP:
        real = sys.modules.get("__main__")
        sys.modules["__main__"] = types.ModuleType("__main__")
        try:
            yield
        finally:
            if real is not None:
                sys.modules["__main__"] = real


def _worker_start(barrier: Any) -> None:
    # Hold every worker until all have started, so each warm-up job below starts its own process.
    with suppress(threading.BrokenBarrierError):
        barrier.wait(timeout=60)


def _executor(workers: int) -> Executor | None:
    if workers <= 1:
        return None
    # forkserver, not fork: Streamlit and the CLI progress bar run threads, and forking a process
    # with threads can deadlock the child. The server preloads this module once, so each worker
    # starts without re-importing numpy/scipy/pandas.
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload([__name__])
    barrier = context.Barrier(workers)
    pool = ProcessPoolExecutor(max_workers=workers, mp_context=context, initializer=_worker_start, initargs=(barrier,))
    with _without_main_script():
        warm_up = [pool.submit(os.getpid) for _ in range(workers)]
    try:
        for future in warm_up:
            future.result(timeout=120)
    except (BrokenProcessPool, TimeoutError):
        pool.shutdown(wait=False, cancel_futures=True)
        return None
    return pool


class _Simulator:
    """Runs batches of seeded simulations, in worker processes when ``workers > 1``, and counts them."""

    def __init__(self, seed: int, workers: int, progress: Progress | None, budget: int) -> None:
        self.seed, self.workers, self.progress, self.budget = int(seed), int(workers), progress, int(budget)
        self.used = 0
        self._pool: Executor | None = None

    def __enter__(self) -> _Simulator:
        self._pool = _executor(self.workers)
        return self

    def __exit__(self, *exc: object) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)

    def run(self, function: Callable[..., float], params: dict[str, Any], n: int) -> np.ndarray:
        """``n`` simulations of ``function(rng, **params)``; results in simulation order."""
        indices = list(range(self.used, self.used + n))
        self.used += n
        self.budget = max(self.budget, self.used)
        if self._pool is not None:
            try:
                return self._run_in_pool(function, params, indices)
            except BrokenProcessPool:
                # Workers could not start (e.g. an unguarded __main__ script re-run by the forkserver):
                # run in this process instead. Every simulation has its own seed, so the results are
                # the same, only slower.
                self._pool.shutdown(wait=False, cancel_futures=True)
                self._pool = None
        out = []
        for k, index in enumerate(indices):
            out.append(function(_rng(self.seed, index), **params))
            if self.progress and (k % 10 == 9 or k == n - 1):
                self.progress(self.used - n + k + 1, self.budget)
        return np.asarray(out, dtype=float)

    def _run_in_pool(self, function: Callable[..., float], params: dict[str, Any], indices: list[int]) -> np.ndarray:
        n = len(indices)
        size = max(1, min(25, math.ceil(n / (4 * self.workers))))
        chunks = [indices[i : i + size] for i in range(0, n, size)]
        futures = {self._pool.submit(_run_chunk, function, params, self.seed, c): k for k, c in enumerate(chunks)}
        results: dict[int, list[float]] = {}
        done = self.used - n
        for future in as_completed(futures):
            results[futures[future]] = future.result()
            done += len(results[futures[future]])
            if self.progress:
                self.progress(done, self.budget)
        return np.asarray([v for k in range(len(chunks)) for v in results[k]], dtype=float)


def _check_seed(seed: int) -> int:
    if isinstance(seed, bool) or int(seed) != seed or seed < 0:
        raise AnalysisInputError(f"the seed must be a whole number >= 0 (got {seed!r})")
    return int(seed)


def _check_raters(raters: int) -> int:
    if isinstance(raters, bool) or int(raters) != raters or raters < 2:
        raise AnalysisInputError(f"raters per dual-rated task must be a whole number >= 2 (got {raters!r})")
    return int(raters)


def _check_seconds(seconds: float | None) -> float | None:
    if seconds is None:
        return None
    if not math.isfinite(seconds) or seconds <= 0:
        raise AnalysisInputError(f"seconds per rating must be positive (got {seconds!r})")
    return float(seconds)


def _check_width(width: float, upper: float) -> float:
    if not math.isfinite(width) or not 0 < width < upper:
        raise AnalysisInputError(f"the target CI width must lie strictly between 0 and {upper:g} (got {width!r})")
    return float(width)


# --- rate (Wilson) ------------------------------------------------------------------------------


def wilson_width(p: float, n: float, confidence: float = 0.95) -> float:
    """Width of the Wilson interval when the observed rate is exactly ``p`` out of ``n``."""
    z = stats.norm.ppf(0.5 + confidence / 2)
    return 2 * z * math.sqrt(p * (1 - p) / n + z**2 / (4 * n**2)) / (1 + z**2 / n)


def wilson_sample_size(p: float, width: float, confidence: float = 0.95) -> int:
    """Smallest n whose Wilson interval at observed rate ``p`` is at most ``width`` wide.

    Setting the width formula equal to ``W = 2h`` and squaring gives a quadratic in n whose larger
    root is ``n = z^2 [(pq - 2h^2) + sqrt(p^2 q^2 + h^2 (1 - 4pq))] / (2 h^2)``; the answer is its
    ceiling (nudged by one if rounding left the width a hair above the target).
    """
    if not 0 <= p <= 1:
        raise AnalysisInputError(f"the expected rate must lie in [0, 1] (got {p!r})")
    _check_width(width, 1.0)
    z = stats.norm.ppf(0.5 + confidence / 2)
    h = width / 2
    pq = p * (1 - p)
    root = z**2 * ((pq - 2 * h**2) + math.sqrt(pq**2 + h**2 * (1 - 4 * pq))) / (2 * h**2)
    n = max(1, math.ceil(root - 1e-9))
    while wilson_width(p, n, confidence) > width:
        n += 1
    return n


def _sim_rate(rng: np.random.Generator, *, n: int, p: float, outcomes: np.ndarray | None) -> float:
    k = int(rng.choice(outcomes, size=n, replace=True).sum()) if outcomes is not None else int(rng.binomial(n, p))
    result = wilson(k, n)
    return result.ci_high - result.ci_low


def plan_rate(
    expected: float | None,
    ci_width: float,
    *,
    pilot_outcomes: Sequence[int] | np.ndarray | None = None,
    dual_share: float = 0.0,
    raters: int = 2,
    seconds_per_rating: float | None = None,
    simulations: int = 2000,
    seed: int = 0,
    workers: int = 1,
    progress: Progress | None = None,
) -> Plan:
    """Tasks needed for a Wilson 95% CI of at most ``ci_width`` around a rate near ``expected``.

    ``pilot_outcomes`` (0/1 per pilot task) supply the expected rate when ``expected`` is None and
    are resampled in the check. The rate needs no double rating; ``dual_share`` only adds the
    dual-rated tasks the lead wants anyway to the count of ratings and hours.
    """
    seed = _check_seed(seed)
    raters = _check_raters(raters)
    outcomes = None
    notes: list[str] = []
    if pilot_outcomes is not None:
        outcomes = np.asarray(pilot_outcomes, dtype=int)
        if outcomes.size == 0 or not np.isin(outcomes, (0, 1)).all():
            raise AnalysisInputError("the pilot needs at least one task outcome, each 0 or 1")
    if expected is None:
        if outcomes is None:
            raise AnalysisInputError("give the expected rate (--expected) or a pilot study to take it from")
        expected = float(outcomes.mean())
        notes.append(f"expected rate {expected:.3f} from {outcomes.size} pilot task(s), whose outcomes are resampled")
    elif outcomes is not None:
        notes.append("the expected rate was given, so the pilot's outcomes are not used for the rate")
        outcomes = None
    if not 0 <= expected <= 1:
        raise AnalysisInputError(f"the expected rate must lie in [0, 1] (got {expected!r})")
    if not 0 <= dual_share <= 1:
        raise AnalysisInputError(f"the dual share must lie in [0, 1] (got {dual_share!r})")
    if simulations < 1:
        raise AnalysisInputError("at least one simulation is needed")
    n = wilson_sample_size(expected, ci_width)
    # A binomial draw and a Wilson interval take microseconds: worker processes would only add start-up time.
    with _Simulator(seed, 1, progress, simulations) as sim:
        widths = sim.run(_sim_rate, {"n": n, "p": expected, "outcomes": outcomes}, simulations)
        used = sim.used
    return Plan(
        metric="rate",
        n_tasks=n,
        n_dual=round(dual_share * n),
        raters=raters,
        target=float(ci_width),
        achieved=float(widths.mean()),
        achieved_se=float(widths.std(ddof=1) / math.sqrt(len(widths))) if len(widths) > 1 else None,
        simulations=used,
        seed=seed,
        seconds_per_rating=_check_seconds(seconds_per_rating),
        closed_form_n=n,
        assumptions={"expected": float(expected), "confidence": 0.95, "interval": "Wilson"},
        notes=tuple(notes),
    )


# --- AC2 ----------------------------------------------------------------------------------------


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


# --- harm-model odds ratio -----------------------------------------------------------------------


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
