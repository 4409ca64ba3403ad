"""The task-clustered bootstrap draws distinct task rows, not every task: same distribution, same draws if all differ"""

import numpy as np
import pytest

from review_app.analysis.bootstrap import cluster_mean_ci


def per_cluster_reference(values: np.ndarray, n_boot: int, seed: int) -> list[tuple[float, float]]:
    """The former implementation: one multinomial over every cluster (uniform), then percentile intervals."""
    rng = np.random.default_rng(seed)
    n, k = values.shape
    present = ~np.isnan(values)
    filled = np.where(present, values, 0.0)
    multiplicity = rng.multinomial(n, np.full(n, 1 / n), size=n_boot).astype(float)
    with np.errstate(invalid="ignore", divide="ignore"):
        means = (multiplicity @ filled) / (multiplicity @ present)
    return [tuple(float(x) for x in np.nanquantile(means[:, j], [0.025, 0.975])) for j in range(k)]


def test_distinct_clusters_give_the_per_cluster_draws():
    values = np.random.default_rng(1).normal(size=(300, 3))
    values[::7, 1] = np.nan
    got = [(ci.low, ci.high) for ci in cluster_mean_ci(values, n_boot=500, seed=3)]
    assert np.allclose(got, per_cluster_reference(values, 500, 3), rtol=1e-12, atol=0)


def test_repeated_clusters_give_the_same_intervals_within_monte_carlo_error():
    # per-task means of 0-2 scores: a handful of distinct rows repeated over many tasks
    rng = np.random.default_rng(5)
    values = rng.choice([0.0, 0.5, 1.0, 1.5, 2.0, np.nan], size=(400, 2), p=[0.1, 0.1, 0.2, 0.2, 0.3, 0.1])
    got = np.array([(ci.low, ci.high) for ci in cluster_mean_ci(values, n_boot=20_000, seed=0)])
    want = np.array(per_cluster_reference(values, 20_000, 1))
    assert got.shape == want.shape
    # the 2.5% and 97.5% quantiles of 20,000 resampled means agree to a small part of the interval's width
    assert np.abs(got - want).max() < 0.03 * (want[:, 1] - want[:, 0]).min() + 1e-3
    assert not np.array_equal(got, want)  # different draws (fewer categories), same distribution


def test_same_seed_same_intervals_and_order_of_tasks_does_not_matter_for_the_distinct_rows():
    values = np.repeat(np.array([[0.0, 1.0], [2.0, np.nan], [1.5, 0.5]]), [50, 30, 20], axis=0)
    first = cluster_mean_ci(values, n_boot=2_000, seed=9)
    again = cluster_mean_ci(values, n_boot=2_000, seed=9)
    assert [(c.low, c.high) for c in first] == [(c.low, c.high) for c in again]
    assert first[0].low == pytest.approx(np.mean(values[:, 0]), abs=0.3)
