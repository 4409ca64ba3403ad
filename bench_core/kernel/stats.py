"""Proportions with Wilson 95% intervals, and differences between two proportions: the one place for both.

Wilson (statsmodels' arithmetic, without importing it) rather than the normal approximation because
benchmark strata and review counts are small and rates sit near 0 or 1 (0/3, 155/158), where the Wald
interval collapses or leaves [0, 1]. ``Proportion`` is the one class for every rate in medrev: benchmark
metrics read ``rate``/``ci``, the review analysis reads ``ci_low``/``ci_high``, ``to_dict`` and ``summary``.

Differences, which interval when (used by the with-tools vs without-tools comparison):

* **Paired** (the same items scored twice, e.g. accuracy with and without search on identical
  items): Newcombe's square-and-add interval for paired proportions (Newcombe 1998, Stat Med
  17:2635, method 10). It combines the two Wilson intervals of the marginal rates (the interval
  used for every single rate in medrev) and corrects for their correlation with the phi estimate
  of the 2x2 table, so it stays inside [-1, 1], behaves at 0 and 1, and is narrower than an
  unpaired interval when outcomes agree within items, which is the point of pairing.
* **Unpaired** (rates over different denominators, e.g. each run's ASR over its own clean-correct
  items, the definition the paper reports): Newcombe's hybrid score interval for independent
  proportions (Newcombe 1998, Stat Med 17:873, method 10), through statsmodels. Treating the two
  ASR populations as independent ignores their overlap; since outcomes on the same item are
  positively correlated, this errs on the wide (conservative) side.

With the paired interval goes McNemar's exact test on the discordant pairs (two-sided binomial).
Reference values in the tests come from R's ``contingencytables`` package.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field

# ``scipy.stats.norm.isf(alpha / 2)`` for the alphas medrev uses, as scipy computes them: 0.05 as written and
# 1 - 0.95 as ``Proportion`` computes it (a different float, a different last digit). With them the Wilson
# interval below is bit-identical to statsmodels' ``proportion_confint(method="wilson")`` (tested), and a
# report need not import statsmodels, scipy and pandas (seconds) for its rates.
NORMAL_QUANTILES = {0.05: 1.9599639845400545, 1 - 0.95: 1.959963984540054}


def _normal_quantile(alpha: float) -> float:
    """``z`` with P(|Z| > z) = alpha, as scipy computes it."""
    if alpha in NORMAL_QUANTILES:
        return NORMAL_QUANTILES[alpha]
    from scipy.stats import norm

    return float(norm.isf(alpha / 2.0))


def wilson_interval(successes: int, n: int, alpha: float = 0.05) -> tuple[float, float] | None:
    """The Wilson score interval for ``successes`` out of ``n``; None when ``n`` is 0.

    The arithmetic is statsmodels' (``proportion_confint(method="wilson")``), step for step, so the bounds are
    the same floats.
    """
    if n <= 0:
        return None
    if not 0 <= successes <= n:
        raise ValueError(f"successes must lie in [0, n]; got {successes} of {n}")
    crit = _normal_quantile(alpha)
    q = successes / n
    crit2 = crit**2
    denom = 1 + crit2 / n
    center = (q + crit2 / (2 * n)) / denom
    dist = crit * math.sqrt(q * (1.0 - q) / n + crit2 / (4.0 * n**2))
    dist /= denom
    low, high = center - dist, center + dist
    # Wilson's bounds at k = 0 and k = n are exactly 0 and 1; the closed form leaves rounding noise.
    low = 0.0 if successes == 0 else low
    high = 1.0 if successes == n else high
    return float(min(max(low, 0.0), 1.0)), float(min(max(high, 0.0), 1.0))


@dataclass(frozen=True)
class Proportion:
    """``k`` successes of ``n`` with a Wilson interval; rates are fractions in [0, 1], None if n = 0.

    Counts must be whole, non-negative numbers with k <= n (``ValueError`` otherwise).
    """

    k: int
    n: int
    rate: float | None = field(init=False)
    ci_low: float | None = field(init=False)
    ci_high: float | None = field(init=False)
    confidence: float = 0.95

    def __post_init__(self) -> None:
        k, n = self.k, self.n
        if isinstance(k, bool) or isinstance(n, bool) or int(k) != k or int(n) != n:
            raise ValueError(f"successes and n must be whole numbers (got k={k!r}, n={n!r})")
        k, n = int(k), int(n)
        if n < 0 or k < 0:
            raise ValueError(f"successes and n must not be negative (got k={k}, n={n})")
        if k > n:
            raise ValueError(f"successes k={k} exceed the number of trials n={n}")
        if not 0 < self.confidence < 1:
            raise ValueError(f"confidence must lie strictly between 0 and 1 (got {self.confidence})")
        interval = wilson_interval(k, n, alpha=1 - self.confidence)
        for name, value in (
            ("k", k),
            ("n", n),
            ("rate", k / n if n else None),
            ("ci_low", interval[0] if interval else None),
            ("ci_high", interval[1] if interval else None),
        ):
            object.__setattr__(self, name, value)

    @property
    def ci(self) -> list[float] | None:
        """``[ci_low, ci_high]``, the form of the ``*_ci`` keys in benchmark reports; None when n is 0."""
        return None if self.ci_low is None or self.ci_high is None else [self.ci_low, self.ci_high]

    def to_dict(self) -> dict[str, float | int | None]:
        """The report keys: k, n, rate, ci_low, ci_high (held stable by ``tests/test_cli_contract.py``)."""
        data = asdict(self)
        data.pop("confidence")
        return data

    def summary(self, digits: int = 1) -> str:
        """``34/89 = 38.2% (95% CI 28.8–48.6)``: the form a paper prints."""
        if self.rate is None or self.ci_low is None or self.ci_high is None:
            return f"{self.k}/{self.n} (undefined)"
        level = round(self.confidence * 100)
        return (
            f"{self.k}/{self.n} = {self.rate * 100:.{digits}f}% "
            f"({level}% CI {self.ci_low * 100:.{digits}f}–{self.ci_high * 100:.{digits}f})"
        )

    def __str__(self) -> str:
        return self.summary()


# -- differences ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class PairedCounts:
    """A paired 2x2 table: outcome 1 under A and B, only under A, only under B, under neither."""

    both: int
    first_only: int
    second_only: int
    neither: int

    @property
    def n(self) -> int:
        return self.both + self.first_only + self.second_only + self.neither

    @property
    def first(self) -> int:
        return self.both + self.first_only

    @property
    def second(self) -> int:
        return self.both + self.second_only


def newcombe_paired_difference(counts: PairedCounts, alpha: float = 0.05) -> tuple[float, float] | None:
    """CI of (rate under A) - (rate under B) for paired binary outcomes; None for an empty table."""
    n = counts.n
    if n == 0:
        return None
    p1, p2 = counts.first / n, counts.second / n
    l1, u1 = wilson_interval(counts.first, n, alpha)  # type: ignore[misc]
    l2, u2 = wilson_interval(counts.second, n, alpha)  # type: ignore[misc]
    row0, row1 = counts.first, counts.second_only + counts.neither
    col0, col1 = counts.second, counts.first_only + counts.neither
    phi = 0.0
    if min(row0, row1, col0, col1) > 0:
        a = counts.both * counts.neither - counts.first_only * counts.second_only
        if a > n / 2:
            a -= n / 2  # Newcombe's continuity correction of the phi numerator
        elif a >= 0:
            a = 0.0
        phi = a / math.sqrt(row0 * row1 * col0 * col1)
    d = p1 - p2
    low = d - math.sqrt(max(0.0, (p1 - l1) ** 2 - 2 * phi * (p1 - l1) * (u2 - p2) + (u2 - p2) ** 2))
    high = d + math.sqrt(max(0.0, (p2 - l2) ** 2 - 2 * phi * (p2 - l2) * (u1 - p1) + (u1 - p1) ** 2))
    return max(-1.0, low), min(1.0, high)


def mcnemar_exact_p(counts: PairedCounts) -> float | None:
    """Two-sided exact McNemar p-value from the discordant pairs; None when there are none."""
    if counts.first_only + counts.second_only == 0:
        return None
    table = [[counts.both, counts.first_only], [counts.second_only, counts.neither]]
    from statsmodels.stats.contingency_tables import mcnemar

    return float(mcnemar(table, exact=True).pvalue)


def newcombe_difference(k1: int, n1: int, k2: int, n2: int, alpha: float = 0.05) -> tuple[float, float] | None:
    """CI of k1/n1 - k2/n2 for independent proportions (Newcombe hybrid score); None if either n is 0."""
    if n1 <= 0 or n2 <= 0:
        return None
    from statsmodels.stats.proportion import confint_proportions_2indep

    low, high = confint_proportions_2indep(k1, n1, k2, n2, method="newcomb", compare="diff", alpha=alpha)
    return max(-1.0, float(low)), min(1.0, float(high))
