"""Proportions with Wilson 95% intervals, the one interval used for every rate in medrev.

Wilson (via statsmodels) rather than the normal approximation because benchmark strata are often
small and rates near 0 or 1, where the Wald interval collapses or leaves [0, 1].
"""

from __future__ import annotations

from dataclasses import dataclass

from statsmodels.stats.proportion import proportion_confint


def wilson_interval(successes: int, n: int, alpha: float = 0.05) -> tuple[float, float] | None:
    """The Wilson score interval for ``successes`` out of ``n``; None when ``n`` is 0."""
    if n <= 0:
        return None
    if not 0 <= successes <= n:
        raise ValueError(f"successes must lie in [0, n]; got {successes} of {n}")
    low, high = proportion_confint(successes, n, alpha=alpha, method="wilson")
    return max(0.0, float(low)), min(1.0, float(high))


@dataclass(frozen=True)
class Proportion:
    """``k`` of ``n`` with its rate (None when n is 0) and Wilson 95% CI."""

    k: int
    n: int

    @property
    def rate(self) -> float | None:
        return self.k / self.n if self.n else None

    @property
    def ci(self) -> list[float] | None:
        interval = wilson_interval(self.k, self.n)
        return list(interval) if interval is not None else None
