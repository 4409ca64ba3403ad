"""The result of a sample-size calculation (:class:`Plan`) and the checks every metric applies to its inputs."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from review_app.analysis.layout import AnalysisInputError

METRICS: tuple[str, ...] = ("rate", "ac2", "harm-or")
DEFAULT_HARM_BASELINE = 0.38  # the paper's conservative worst-case rate (34/89)
DEFAULT_DUAL_SHARE = 0.72  # the paper's protocol: 64 of 89 tasks rated by two or more clinicians


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
        """The keys of ``medrev stats plan --json``: the plan first, then the assumptions and extras."""
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
