"""Tasks for a task-level rate reported with a Wilson interval of at most a given width."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
from scipy import stats

from review_app.analysis.layout import AnalysisInputError
from review_app.analysis.proportions import wilson
from review_app.analysis.sample_size.plan import (
    Plan,
    _check_raters,
    _check_seconds,
    _check_seed,
    _check_width,
)
from review_app.analysis.sample_size.simulation import Progress, _Simulator


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
