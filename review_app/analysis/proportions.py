"""Binomial proportions with Wilson score intervals: the kernel's ``Proportion``, one class for benchmark
and review rates (``bench_core.kernel.stats``; see there why Wilson).

``wilson`` is the analysis entry point: it reports bad counts as ``AnalysisInputError``, like every
other analysis input problem.
"""

from __future__ import annotations

from bench_core.kernel.stats import Proportion
from review_app.analysis.layout import AnalysisInputError

__all__ = ["Proportion", "wilson"]


def wilson(k: int, n: int, confidence: float = 0.95) -> Proportion:
    """Rate ``k/n`` with its Wilson score interval; ``n == 0`` gives an undefined (None) rate."""
    try:
        return Proportion(k, n, confidence=confidence)
    except ValueError as exc:
        raise AnalysisInputError(str(exc)) from None
