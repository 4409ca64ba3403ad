"""Rubric A (item validation) summaries: dimension means, pass rates, composite, flag counts.

The unit is the task: dual ratings of a task are averaged first ("dual ratings are averaged for item
summaries", MedMisBench App. B.1), then

* a dimension's **mean** is the mean of the per-task means (with a task-clustered bootstrap CI);
* its **pass rate** is the share of tasks whose per-task mean reaches the dimension's pass threshold
  (``review_app.rubrics``, 1.5 by default), with a Wilson CI;
* the **composite** of a task is the mean of its per-task dimension means (dimensions a task lacks
  are skipped), and the study composite is their mean, with a task-clustered bootstrap CI;
* **flags** are counted per annotation and per task (a task counts when any rater ticked the flag).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from review_app.analysis.bootstrap import BootstrapCI, cluster_mean_ci
from review_app.analysis.layout import (
    DEFAULT_COLUMNS,
    AnalysisInputError,
    AnnotationColumns,
    numeric_scores,
    require_columns,
    select_rubric,
    split_flags,
)
from review_app.analysis.proportions import Proportion, wilson
from review_app.rubrics import RUBRIC_A, Rubric

COMPOSITE = "composite"


@dataclass(frozen=True)
class DimensionSummary:
    """One dimension over tasks: mean of per-task means and the pass rate at its threshold."""

    key: str
    name: str
    n_tasks: int
    n_annotations: int
    mean: float | None
    mean_ci: BootstrapCI
    pass_threshold: float | None
    passed: Proportion | None


@dataclass(frozen=True)
class FlagCount:
    """How often a disposition flag was ticked; ``known`` is False for keys not in the rubric."""

    key: str
    label: str
    known: bool
    n_annotations: int
    n_tasks: int


@dataclass(frozen=True, eq=False)
class RubricASummary:
    """The Rubric A numbers a paper reports, with the per-task table they come from."""

    rubric: str
    n_tasks: int
    n_annotations: int
    dimensions: tuple[DimensionSummary, ...]
    composite: float | None
    composite_ci: BootstrapCI
    flags: tuple[FlagCount, ...]
    per_task: pd.DataFrame
    warnings: tuple[str, ...] = ()
    confidence: float = 0.95
    extra: dict[str, object] = field(default_factory=dict)

    def dimension(self, key: str) -> DimensionSummary:
        for dimension in self.dimensions:
            if dimension.key == key:
                return dimension
        raise KeyError(f"no dimension {key!r}")

    def to_frame(self) -> pd.DataFrame:
        """One row per dimension plus the composite: mean, its CI, pass count, pass rate and CI."""
        rows = []
        for d in self.dimensions:
            rows.append(
                {
                    "dimension": d.key,
                    "name": d.name,
                    "n_tasks": d.n_tasks,
                    "mean": d.mean,
                    "mean_ci_low": d.mean_ci.low,
                    "mean_ci_high": d.mean_ci.high,
                    "pass_threshold": d.pass_threshold,
                    "n_pass": d.passed.k if d.passed else None,
                    "pass_rate": d.passed.rate if d.passed else None,
                    "pass_ci_low": d.passed.ci_low if d.passed else None,
                    "pass_ci_high": d.passed.ci_high if d.passed else None,
                }
            )
        rows.append(
            {
                "dimension": COMPOSITE,
                "name": "Composite (mean of dimensions)",
                "n_tasks": int(self.per_task[COMPOSITE].notna().sum()) if len(self.per_task) else 0,
                "mean": self.composite,
                "mean_ci_low": self.composite_ci.low,
                "mean_ci_high": self.composite_ci.high,
            }
        )
        return pd.DataFrame(rows).set_index("dimension")

    def flags_frame(self) -> pd.DataFrame:
        return pd.DataFrame([f.__dict__ for f in self.flags], columns=list(FlagCount.__dataclass_fields__)).set_index(
            "key"
        )

    def to_dict(self) -> dict[str, object]:
        def ci(value: BootstrapCI) -> list[float | None]:
            return [value.low, value.high]

        return {
            "rubric": self.rubric,
            "n_tasks": self.n_tasks,
            "n_annotations": self.n_annotations,
            "composite": self.composite,
            "composite_ci": ci(self.composite_ci),
            "bootstrap": {"n_boot": self.composite_ci.n_boot, "seed": self.composite_ci.seed},
            "dimensions": {
                d.key: {
                    "n_tasks": d.n_tasks,
                    "mean": d.mean,
                    "mean_ci": ci(d.mean_ci),
                    "pass_threshold": d.pass_threshold,
                    "pass": d.passed.to_dict() if d.passed else None,
                }
                for d in self.dimensions
            },
            "flags": {
                f.key: {"n_annotations": f.n_annotations, "n_tasks": f.n_tasks, "known": f.known} for f in self.flags
            },
            "warnings": list(self.warnings),
        }

    def summary(self) -> str:
        level = round(self.confidence * 100)
        lines = [f"Rubric {self.rubric}: {self.n_tasks} tasks, {self.n_annotations} annotations"]
        if self.composite is not None:
            ci = self.composite_ci
            ci_text = "" if ci.low is None else f" ({level}% bootstrap CI {ci.low:.2f}–{ci.high:.2f})"
            lines.append(f"  composite {self.composite:.2f}{ci_text}")
        for d in self.dimensions:
            mean = "n/a" if d.mean is None else f"{d.mean:.2f}"
            passed = f"; pass (mean >= {d.pass_threshold:g}) {d.passed.summary()}" if d.passed else ""
            lines.append(f"  {d.name}: mean {mean}{passed}")
        used = [f for f in self.flags if f.n_annotations]
        if used:
            lines.append("  flags: " + ", ".join(f"{f.label} {f.n_tasks} task(s)" for f in used))
        lines.extend(f"  warning: {w}" for w in self.warnings)
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.summary()


def task_means(
    annotations: pd.DataFrame, rubric: Rubric = RUBRIC_A, *, columns: AnnotationColumns = DEFAULT_COLUMNS
) -> pd.DataFrame:
    """Per-task mean of each dimension, the composite, and the number of annotations per task.

    The item column is carried along when present (Rubric B strata join on it).
    """
    require_columns(annotations, [columns.task, *rubric.dimension_keys], what=f"rubric {rubric.key} annotations")
    scores = pd.DataFrame(
        {key: numeric_scores(annotations, key, allowed=rubric.dimension(key).values) for key in rubric.dimension_keys}
    )
    scores[columns.task] = annotations[columns.task].to_numpy()
    grouped = scores.groupby(columns.task, sort=True)
    means = grouped[list(rubric.dimension_keys)].mean()
    means[COMPOSITE] = means[list(rubric.dimension_keys)].mean(axis=1, skipna=True)
    means["n_annotations"] = grouped.size()
    if columns.item in annotations.columns:
        items = annotations.groupby(columns.task, sort=True)[columns.item].first()
        means.insert(0, columns.item, items)
    return means


def summarise_rubric_a(
    annotations: pd.DataFrame,
    *,
    rubric: Rubric = RUBRIC_A,
    columns: AnnotationColumns = DEFAULT_COLUMNS,
    pass_thresholds: Mapping[str, float] | float | None = None,
    n_boot: int = 2000,
    seed: int = 0,
    confidence: float = 0.95,
    progress: Callable[[float], None] | None = None,
) -> RubricASummary:
    """Rubric A summary over the tasks in ``annotations`` (rows of other rubrics are ignored).

    ``pass_thresholds`` overrides the rubric's thresholds: one number for every dimension or a
    mapping from dimension key to threshold. ``progress`` follows the bootstrap (fraction done).
    """
    data = select_rubric(annotations, rubric.key, columns)
    warnings: list[str] = []
    if data.empty:
        raise AnalysisInputError(f"no rubric {rubric.key} annotations to summarise")
    per_task = task_means(data, rubric, columns=columns)
    thresholds = _thresholds(rubric, pass_thresholds)
    stats = [*rubric.dimension_keys, COMPOSITE]
    cis = cluster_mean_ci(
        per_task[stats].to_numpy(dtype=float), n_boot=n_boot, seed=seed, confidence=confidence, progress=progress
    )
    dimensions = []
    for index, dimension in enumerate(rubric.dimensions):
        column = per_task[dimension.key]
        rated = column.dropna()
        threshold = thresholds.get(dimension.key)
        passed = wilson(int((rated >= threshold).sum()), len(rated), confidence) if threshold is not None else None
        if rated.empty:
            warnings.append(f"{dimension.name}: no task has a score")
        dimensions.append(
            DimensionSummary(
                key=dimension.key,
                name=dimension.name,
                n_tasks=len(rated),
                n_annotations=int(numeric_scores(data, dimension.key).notna().sum()),
                mean=float(rated.mean()) if len(rated) else None,
                mean_ci=cis[index],
                pass_threshold=threshold,
                passed=passed,
            )
        )
    composite_ci = cis[-1]
    if composite_ci.degenerate and n_boot > 0:
        warnings.append(f"composite CI: {composite_ci.degenerate}")
    composite = per_task[COMPOSITE].dropna()
    return RubricASummary(
        rubric=rubric.key,
        n_tasks=len(per_task),
        n_annotations=len(data),
        dimensions=tuple(dimensions),
        composite=float(composite.mean()) if len(composite) else None,
        composite_ci=composite_ci,
        flags=flag_counts(data, rubric, columns=columns),
        per_task=per_task,
        warnings=tuple(warnings),
        confidence=confidence,
    )


def _thresholds(rubric: Rubric, override: Mapping[str, float] | float | None) -> dict[str, float | None]:
    thresholds = {d.key: d.pass_threshold for d in rubric.dimensions}
    if override is None:
        return thresholds
    if isinstance(override, int | float):
        return dict.fromkeys(thresholds, float(override))
    unknown = sorted(set(override) - set(thresholds))
    if unknown:
        raise AnalysisInputError(f"pass threshold given for unknown dimension(s): {', '.join(unknown)}")
    thresholds.update({k: float(v) for k, v in override.items()})
    return thresholds


def flag_counts(
    annotations: pd.DataFrame, rubric: Rubric = RUBRIC_A, *, columns: AnnotationColumns = DEFAULT_COLUMNS
) -> tuple[FlagCount, ...]:
    """Per flag: annotations that ticked it and tasks where any rater did (rubric order, then others)."""
    labels = {f.key: f.label for f in rubric.flags}
    per_row = (
        annotations[columns.flags].map(split_flags)
        if columns.flags in annotations.columns
        else pd.Series([()] * len(annotations), index=annotations.index)
    )
    seen: dict[str, tuple[int, set[object]]] = {key: (0, set()) for key in labels}
    tasks = annotations[columns.task].to_numpy() if columns.task in annotations.columns else np.arange(len(per_row))
    for task, flags in zip(tasks, per_row, strict=True):
        for key in set(flags):
            count, task_set = seen.setdefault(key, (0, set()))
            task_set.add(task)
            seen[key] = (count + 1, task_set)
    return tuple(
        FlagCount(key=key, label=labels.get(key, key), known=key in labels, n_annotations=count, n_tasks=len(task_set))
        for key, (count, task_set) in seen.items()
    )
