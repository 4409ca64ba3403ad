"""Cluster (task-level) bootstrap of means.

Dual ratings of one task are not independent, so a CI for a mean over tasks resamples whole tasks:
each task contributes its per-task mean (dual ratings averaged first), tasks are drawn with
replacement, and the percentile interval of the resampled means is reported. Seeded, so a report
is reproducible to the last digit.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class BootstrapCI:
    """Percentile interval of a mean over clusters; ``degenerate`` names why it has zero width."""

    low: float | None
    high: float | None
    n_boot: int
    seed: int
    confidence: float
    degenerate: str | None = None


def cluster_mean_ci(
    cluster_values: np.ndarray,
    *,
    n_boot: int = 2000,
    seed: int = 0,
    confidence: float = 0.95,
    progress: Callable[[float], None] | None = None,
) -> list[BootstrapCI]:
    """Percentile CIs for the column means of a clusters x statistics array (NaN cells skipped).

    All columns share the same resampled clusters, so the intervals are jointly consistent (the
    composite and its components come from the same resamples). ``progress`` is called with the
    fraction of resamples done after each chunk (a page's progress bar; it does not change the draws).
    """
    values = np.asarray(cluster_values, dtype=float)
    if values.ndim == 1:
        values = values[:, None]
    n, k = values.shape
    out: list[BootstrapCI] = []
    if n_boot <= 0 or n == 0:
        return [BootstrapCI(None, None, 0, seed, confidence, "no bootstrap requested" if n else "no tasks")] * k
    rng = np.random.default_rng(seed)
    present = ~np.isnan(values)
    filled = np.where(present, values, 0.0)
    distinct, distinct_present, shares = _distinct_rows(filled, present)
    sums = np.empty((n_boot, k))
    counts = np.empty((n_boot, k))
    chunk = max(1, min(n_boot, 4_000_000 // len(shares)))
    done = 0
    while done < n_boot:
        size = min(chunk, n_boot - done)
        multiplicity = rng.multinomial(n, shares, size=size).astype(float)
        sums[done : done + size] = multiplicity @ distinct
        counts[done : done + size] = multiplicity @ distinct_present
        done += size
        if progress is not None:
            progress(done / n_boot)
    with np.errstate(invalid="ignore", divide="ignore"):
        means = sums / counts
    tail = (1 - confidence) / 2
    for j in range(k):
        column = values[present[:, j], j]
        if column.size == 0:
            out.append(BootstrapCI(None, None, n_boot, seed, confidence, "no values"))
            continue
        low, high = np.nanquantile(means[:, j], [tail, 1 - tail])
        reason = None
        if column.size == 1:
            reason = "a single task: the interval has zero width"
        elif np.all(column == column[0]):
            reason = "every task has the same value: the interval has zero width"
        out.append(BootstrapCI(float(low), float(high), n_boot, seed, confidence, reason))
    return out


def _distinct_rows(filled: np.ndarray, present: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The distinct clusters (value and presence rows), in order of first appearance, and their shares.

    Drawing ``n`` clusters with replacement and counting how often each *distinct* row was drawn is
    a multinomial over the distinct rows with probabilities their shares of the clusters: the same
    distribution of resampled means as a multinomial over every cluster, at a cost that grows with
    the distinct rows (a few hundred: per-task means of 0-2 scores) instead of the clusters (2,000
    resamples of 100,000 tasks would draw 200 million of them). When every row is distinct the
    shares are ``1/n`` in the clusters' order, so the draws are exactly those of one multinomial per
    cluster with the same seed.
    """
    key = np.ascontiguousarray(np.hstack([filled, present.astype(float)]))
    rows = key.view(np.dtype((np.void, key.dtype.itemsize * key.shape[1]))).ravel()
    _, first, sizes = np.unique(rows, return_index=True, return_counts=True)
    order = np.argsort(first, kind="stable")
    picked = first[order]
    return filled[picked], present[picked], sizes[order] / len(rows)
