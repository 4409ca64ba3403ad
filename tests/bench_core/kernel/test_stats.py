"""Proportions, and difference intervals against published reference values (R package contingencytables)."""

from __future__ import annotations

import pytest

from bench_core.kernel.stats import (
    PairedCounts,
    Proportion,
    mcnemar_exact_p,
    newcombe_difference,
    newcombe_paired_difference,
)


def test_paired_newcombe_matches_the_reference():
    # Cavo et al. 2012, complete response before/after consolidation: estimate -0.0621 (95% CI -0.1186 to -0.0046)
    counts = PairedCounts(both=59, first_only=6, second_only=16, neither=80)
    low, high = newcombe_paired_difference(counts)
    assert (counts.first - counts.second) / counts.n == pytest.approx(-0.0621, abs=5e-5)
    assert (low, high) == (pytest.approx(-0.1186, abs=5e-5), pytest.approx(-0.0046, abs=5e-5))


def test_unpaired_newcombe_matches_the_reference():
    # Perondi et al. 2004, 7/34 vs 1/34: estimate 0.1765 (95% CI 0.0189 to 0.3404)
    low, high = newcombe_difference(7, 34, 1, 34)
    assert (low, high) == (pytest.approx(0.0189, abs=5e-5), pytest.approx(0.3404, abs=5e-5))


def test_edge_cases_stay_inside_minus_one_to_one():
    assert newcombe_paired_difference(PairedCounts(0, 0, 0, 0)) is None
    low, high = newcombe_paired_difference(PairedCounts(0, 5, 0, 0))  # all flipped one way
    assert high == 1.0 and 0 < low < 1
    low, high = newcombe_paired_difference(PairedCounts(5, 0, 0, 0))  # identical outcomes
    assert low == pytest.approx(-high) and low < 0
    assert newcombe_difference(0, 0, 1, 2) is None
    assert newcombe_difference(0, 6, 6, 6)[0] == -1.0


def test_mcnemar_exact():
    assert mcnemar_exact_p(PairedCounts(3, 6, 0, 1)) == pytest.approx(2 * 0.5**6)
    assert mcnemar_exact_p(PairedCounts(3, 1, 1, 1)) == 1.0
    assert mcnemar_exact_p(PairedCounts(3, 0, 0, 1)) is None


def test_one_proportion_class_serves_benchmark_reports_and_review_analysis():
    p = Proportion(34, 89)
    assert (p.k, p.n, p.rate) == (34, 89, 34 / 89)
    assert p.ci == [p.ci_low, p.ci_high] and p.summary() == "34/89 = 38.2% (95% CI 28.8–48.6)"
    assert p.to_dict() == {"k": 34, "n": 89, "rate": 34 / 89, "ci_low": p.ci_low, "ci_high": p.ci_high}
    assert Proportion(0, 0).ci is None and Proportion(0, 0).rate is None
    # the bounds at 0 and n are exactly 0 and 1 (no rounding noise from the closed form)
    assert Proportion(0, 7).ci_low == 0.0 and Proportion(7, 7).ci_high == 1.0
    assert Proportion(3.0, 9.0) == Proportion(3, 9) and isinstance(Proportion(3.0, 9.0).k, int)
    for k, n in [(5, 4), (-1, 4), (1.5, 4), (True, 4)]:
        with pytest.raises(ValueError):
            Proportion(k, n)


def test_wilson_bounds_are_statsmodels_floats_exactly():
    """The Wilson interval is computed without importing statsmodels; its bounds must be the very same floats."""
    from scipy.stats import norm
    from statsmodels.stats.proportion import proportion_confint

    from bench_core.kernel.stats import NORMAL_QUANTILES, Proportion, wilson_interval

    for alpha, z in NORMAL_QUANTILES.items():
        assert z == float(norm.isf(alpha / 2))
    assert 1 - Proportion(1, 2).confidence in NORMAL_QUANTILES  # the alpha every rate uses takes the fast path
    for alpha in (0.05, 1 - 0.95, 0.1, 0.01):
        for n in range(1, 80):
            for k in range(n + 1):
                low, high = proportion_confint(k, n, alpha=alpha, method="wilson")
                low = 0.0 if k == 0 else min(max(float(low), 0.0), 1.0)
                high = 1.0 if k == n else min(max(float(high), 0.0), 1.0)
                assert wilson_interval(k, n, alpha=alpha) == (low, high), (k, n, alpha)
