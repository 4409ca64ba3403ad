"""Synthetic Rubric B studies with a known reviewer drift, for the reviewer-quality tests.

Each task has a latent harmfulness ``eta ~ N(model effect, 1)``; a reviewer reads each of the four
Rubric B dimensions as ``eta + s + e`` (``e ~ N(0, 0.6)``) and scores 0 above 0.6, 1 above -0.3,
2 otherwise (2 = safe). ``s`` is the reviewer's severity shift: 0, or after the drifting reviewer
has done half of their tasks, the shift that doubles the odds of a worst-case classification
(wrong answer, injection taken up, serious harm) -- "twice as severe" on the harm model's scale.
Reviewers also differ a little from the start (``N(0, 0.25)`` shifts). Every task is rated by two
distinct reviewers, in task order, one minute apart.
"""

from __future__ import annotations

import functools

import numpy as np
import pandas as pd
from scipy import optimize, stats

CUT_LOW, CUT_HIGH, NOISE = -0.3, 0.6, 0.6
DIMENSIONS = ("final_correctness", "injection_uptake", "clinical_grounding", "harm_potential")


def _scores(latent: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    z = latent[:, None] + rng.normal(0, NOISE, (len(latent), len(DIMENSIONS)))
    return np.where(z > CUT_HIGH, 0, np.where(z > CUT_LOW, 1, 2))


def _worst_case_rate(shift: float) -> float:
    """P(correctness, uptake and harm all scored 0) = E[Phi((eta + shift - cut) / noise)^3], eta ~ N(0, 1)."""
    nodes, weights = np.polynomial.hermite_e.hermegauss(80)
    inside = stats.norm.cdf((nodes + shift - CUT_HIGH) / NOISE) ** 3
    return float(np.sum(weights * inside) / np.sqrt(2 * np.pi))


@functools.cache
def shift_for_odds_ratio(odds_ratio: float) -> float:
    """The severity shift that multiplies the odds of a worst-case classification by ``odds_ratio``."""
    base = _worst_case_rate(0.0)
    target = odds_ratio * base / (1 - base)
    return float(optimize.brentq(lambda s: _worst_case_rate(s) / (1 - _worst_case_rate(s)) - target, 0.0, 3.0))


def synthetic_study(
    seed: int,
    *,
    reviewers: int = 6,
    tasks: int = 600,
    drifting: str | None = None,
    odds_ratio: float = 2.0,
) -> pd.DataFrame:
    """A dual-rated Rubric B study in the export's long layout; ``drifting`` names the reviewer who drifts."""
    rng = np.random.default_rng(seed)
    shift = shift_for_odds_ratio(odds_ratio) if drifting else 0.0
    baseline = rng.normal(0, 0.25, reviewers)  # reviewers differ a little in severity from the start
    names = [f"R{k + 1:02d}" for k in range(reviewers)]
    pairs = np.argsort(rng.random((tasks, reviewers)), axis=1)[:, :2]
    model = np.where(rng.random(tasks) < 0.5, "model-a", "model-b")
    eta = rng.normal(0, 1, tasks) + np.where(model == "model-b", 0.3, 0.0)
    totals = np.bincount(pairs.ravel(), minlength=reviewers)
    done = np.zeros(reviewers, dtype=int)
    raters, latent = [], []
    for t in range(tasks):
        for r in pairs[t]:
            drifted = drifting == names[r] and done[r] >= totals[r] / 2
            raters.append(r)
            latent.append(eta[t] + baseline[r] + (shift if drifted else 0.0))
            done[r] += 1
    scores = _scores(np.asarray(latent), rng)
    task_of = np.repeat(np.arange(tasks), 2)
    start = pd.Timestamp("2026-01-05 09:00", tz="UTC")
    frame = pd.DataFrame(
        {
            "task_id": task_of + 1,
            "item_id": task_of + 1,
            "rubric": "B",
            "rater": np.asarray(names)[raters],
            "slot": np.tile([1, 2], tasks),
            "model": model[task_of],
            "content_type": np.where(task_of % 2 == 0, "cue_remapping", "threshold_corruption"),
            "provenance": np.where(task_of % 3 == 0, "authority", "neutral"),
            "falsehood_clarity": np.nan,
            "submitted_at": start + pd.to_timedelta(np.arange(2 * tasks), unit="min"),
            "seconds_on_task": rng.lognormal(np.log(120), 0.4, 2 * tasks),
            "annotation_id": np.arange(1, 2 * tasks + 1),
        }
    )
    for k, dimension in enumerate(DIMENSIONS):
        frame[dimension] = scores[:, k].astype(float)
    return frame
