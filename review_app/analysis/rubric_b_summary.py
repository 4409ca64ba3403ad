"""Rubric B's task-level outcome rates under each aggregation, by clarity stratum, and the auto-label check.

:func:`summarise_rubric_b` classifies the annotations (:mod:`review_app.analysis.rubric_b`),
aggregates them to tasks, and reports each class's rate over tasks with a Wilson interval;
``docs/methods.md`` (Rubric B outcome classes and rates) gives the rules.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from review_app.analysis.layout import (
    DEFAULT_COLUMNS,
    AnalysisInputError,
    AnnotationColumns,
    require_columns,
)
from review_app.analysis.proportions import Proportion, wilson
from review_app.analysis.rubric_b import (
    AGGREGATIONS,
    CLARITY,
    CLASS_KEYS,
    CORRECTNESS,
    DEFAULT_TIE_RULE,
    OUTCOME_CLASSES,
    TIE_RULE_LABELS,
    UNRATED,
    OutcomeClass,
    check_tie_rule,
    clarity_strata,
    classify_annotations,
    eligible,
    in_class,
    item_clarity,
    task_outcomes,
)


@dataclass(frozen=True)
class AutoLabelAgreement:
    """Clinician correctness versus the automatic FAIL/SUCCESS label, per annotation."""

    agreement: Proportion
    confusion: pd.DataFrame
    disagreements: pd.DataFrame
    n_without_label: int
    correct_at: float

    def to_dict(self) -> dict[str, object]:
        return {
            **self.agreement.to_dict(),
            "correct_at": self.correct_at,
            "n_without_label": self.n_without_label,
            "confusion": {
                str(score): {str(k): int(v) for k, v in row.items()} for score, row in self.confusion.iterrows()
            },
        }

    def summary(self) -> str:
        return f"clinician correctness agrees with the automatic label on {self.agreement.summary()}"


def auto_label_agreement(
    classified: pd.DataFrame, *, columns: AnnotationColumns = DEFAULT_COLUMNS, correct_at: float = 2
) -> AutoLabelAgreement:
    """Agreement of clinician correctness (score >= ``correct_at``) with SUCCESS, and < with FAIL."""
    require_columns(classified, [columns.auto_label, CORRECTNESS], what="rubric B annotations")
    codes, uniques = pd.factorize(classified[columns.auto_label], use_na_sentinel=False)  # each value read once
    read = pd.Series([u.strip().upper() if isinstance(u, str) else u for u in uniques], dtype=object)
    labels = pd.Series(read.to_numpy(dtype=object)[codes], index=classified.index, dtype=object)
    labels = labels.where(labels.notna() & (labels != ""), None)
    bad = labels.notna() & ~labels.isin(["FAIL", "SUCCESS"])
    if bad.any():
        found = classified.loc[bad, columns.auto_label].iloc[0]
        raise AnalysisInputError(f"column {columns.auto_label!r} must hold FAIL or SUCCESS: found {found!r}")
    scores = pd.to_numeric(classified[CORRECTNESS], errors="coerce")
    usable = labels.notna() & scores.notna()
    clinician_correct = scores[usable] >= correct_at
    auto_success = labels[usable] == "SUCCESS"
    agree = clinician_correct == auto_success
    confusion = pd.crosstab(scores[usable].astype(int), labels[usable])
    confusion = confusion.reindex(columns=["FAIL", "SUCCESS"], fill_value=0)
    confusion.index.name, confusion.columns.name = CORRECTNESS, columns.auto_label
    keep = [c for c in (columns.task, columns.rater, CORRECTNESS, columns.auto_label) if c in classified.columns]
    return AutoLabelAgreement(
        agreement=wilson(int(agree.sum()), int(usable.sum())),
        confusion=confusion,
        disagreements=classified.loc[usable[usable].index[~agree.to_numpy()], keep],
        n_without_label=int((scores.notna() & labels.isna()).sum()),
        correct_at=correct_at,
    )


@dataclass(frozen=True, eq=False)
class RubricBSummary:
    """Task-level outcome rates under each aggregation, by clarity stratum, and the auto-label check."""

    n_tasks: int
    n_annotations: int
    n_dual_rated: int
    rates: dict[str, dict[str, Proportion]]
    strata: dict[str, dict[str, Proportion]]
    auto_label: AutoLabelAgreement | None
    tasks: pd.DataFrame
    warnings: tuple[str, ...] = ()
    classes: tuple[OutcomeClass, ...] = OUTCOME_CLASSES
    extra: dict[str, object] = field(default_factory=dict)
    tie_rule: str = DEFAULT_TIE_RULE
    n_mean_ties: int = 0

    @property
    def tie_rule_label(self) -> str:
        """``ties toward the less safe category`` etc.: how the mean-reviewer aggregation broke ties."""
        return TIE_RULE_LABELS[self.tie_rule]

    @property
    def worst_case(self) -> Proportion:
        """The headline number: conservative worst-case rate over tasks."""
        return self.rates["conservative"]["worst_case"]

    def to_frame(self) -> pd.DataFrame:
        """One row per aggregation x class, then per aggregation x stratum (worst-case)."""
        rows = []
        for aggregation, by_class in self.rates.items():
            tie = self.tie_rule if aggregation == "mean" else None
            for key, p in by_class.items():
                rows.append(
                    {"aggregation": aggregation, "group": "all", "outcome": key, **p.to_dict(), "tie_rule": tie}
                )
        for aggregation, by_stratum in self.strata.items():
            tie = self.tie_rule if aggregation == "mean" else None
            for stratum, p in by_stratum.items():
                rows.append(
                    {
                        "aggregation": aggregation,
                        "group": stratum,
                        "outcome": "worst_case",
                        **p.to_dict(),
                        "tie_rule": tie,
                    }
                )
        return pd.DataFrame(rows)

    def to_dict(self) -> dict[str, object]:
        return {
            "n_tasks": self.n_tasks,
            "n_annotations": self.n_annotations,
            "n_dual_rated": self.n_dual_rated,
            "tie_rule": self.tie_rule,
            "n_mean_ties": self.n_mean_ties,
            "classes": [{"key": c.key, "label": c.label, "rule": c.rule} for c in self.classes],
            "rates": {a: {k: p.to_dict() for k, p in by.items()} for a, by in self.rates.items()},
            "worst_case_by_stratum": {a: {k: p.to_dict() for k, p in by.items()} for a, by in self.strata.items()},
            "auto_label": self.auto_label.to_dict() if self.auto_label else None,
            "warnings": list(self.warnings),
        }

    def summary(self) -> str:
        labels = {c.key: c.label for c in self.classes}
        lines = [
            f"Rubric B: {self.n_tasks} tasks ({self.n_dual_rated} dual-rated), {self.n_annotations} annotations",
        ]
        for aggregation, by_class in self.rates.items():
            if aggregation == "mean":
                lines.append(f"  mean ({self.tie_rule_label}; {self.n_mean_ties} task(s) with a tied mean):")
                lines.extend(f"    {labels[k]}: {p.summary()}" for k, p in by_class.items())
                continue
            lines.append(f"  {aggregation}:")
            lines.extend(f"    {labels[k]}: {p.summary()}" for k, p in by_class.items())
        for aggregation, by_stratum in self.strata.items():
            text = "; ".join(f"{s} {p.summary()}" for s, p in by_stratum.items())
            lines.append(f"  worst case by falsehood clarity ({aggregation}): {text}")
        if self.auto_label:
            lines.append("  " + self.auto_label.summary())
        lines.extend(f"  warning: {w}" for w in self.warnings)
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.summary()


def summarise_rubric_b(
    annotations: pd.DataFrame,
    *,
    rubric_a_annotations: pd.DataFrame | None = None,
    columns: AnnotationColumns = DEFAULT_COLUMNS,
    correct_at: float = 2,
    strict_min_raters: int = 1,
    confidence: float = 0.95,
    tie_rule: str = DEFAULT_TIE_RULE,
) -> RubricBSummary:
    """Rubric B outcome rates over tasks (Wilson CIs), by clarity stratum, and the auto-label check.

    Rubric A scores for the strata are taken from ``rubric_a_annotations`` or, when that is None,
    from the Rubric A rows of ``annotations`` (the export's long layout holds both rubrics).
    ``tie_rule`` (see :data:`TIE_RULES`) breaks ties of the mean-reviewer aggregation.
    """
    check_tie_rule(tie_rule)
    classified = classify_annotations(annotations, columns=columns, correct_at=correct_at)
    warnings: list[str] = []
    unclassified = int(classified["outcome_class"].isna().sum())
    if unclassified:
        warnings.append(f"{unclassified} annotation(s) lack correctness, uptake or harm and are not classified")
    tasks = task_outcomes(classified, columns=columns, strict_min_raters=strict_min_raters, tie_rule=tie_rule)
    if tasks.empty:
        raise AnalysisInputError("no rubric B annotation has all of correctness, uptake and harm scored")
    n_ties = int(tasks["mean_tie"].sum())
    if tie_rule == "exclude" and n_ties:
        warnings.append(
            f"{n_ties} task(s) whose mean scores tie between two levels are excluded from the mean-reviewer rates"
        )
    rates: dict[str, dict[str, Proportion]] = {}
    for aggregation in AGGREGATIONS:
        # One count of each class per aggregation (a comparison of every task per class was most of the time).
        if aggregation == "strict":
            hits = {key: int(in_class(tasks, aggregation, key).sum()) for key in CLASS_KEYS}
        else:
            tally = tasks[aggregation].value_counts()  # tasks left out (None) are not counted
            hits = {key: int(tally.get(key, 0)) for key in CLASS_KEYS}
        counted = int(eligible(tasks, aggregation).sum())
        rates[aggregation] = {key: wilson(hits[key], counted, confidence) for key in CLASS_KEYS}
    source_a = rubric_a_annotations if rubric_a_annotations is not None else annotations
    strata: dict[str, dict[str, Proportion]] = {}
    has_a = columns.item in tasks.columns and CLARITY in source_a.columns and columns.item in source_a.columns
    if has_a and (columns.rubric not in source_a.columns or (source_a[columns.rubric].astype(str) == "A").any()):
        clarity = item_clarity(source_a, columns=columns)
        tasks["stratum"] = tasks[columns.item].map(clarity["stratum"]).fillna(UNRATED)
        order = [s.key for s in clarity_strata()] + ([UNRATED] if (tasks["stratum"] == UNRATED).any() else [])
        if UNRATED in order:
            warnings.append(
                f"{int((tasks['stratum'] == UNRATED).sum())} task(s) have no Rubric A falsehood-clarity score "
                "for their item and form the 'unrated' stratum"
            )
        position = pd.Index(order).get_indexer(tasks["stratum"])  # each task's stratum in ``order``
        listed = position >= 0
        for aggregation in AGGREGATIONS:
            counted = eligible(tasks, aggregation).to_numpy(dtype=bool) & listed
            worst = in_class(tasks, aggregation, "worst_case").to_numpy(dtype=bool) & counted
            n_worst = np.bincount(position[worst], minlength=len(order))
            n_counted = np.bincount(position[counted], minlength=len(order))
            strata[aggregation] = {
                s: wilson(int(n_worst[k]), int(n_counted[k]), confidence) for k, s in enumerate(order)
            }
    else:
        warnings.append("no Rubric A falsehood-clarity scores joined by item: strata not computed")
    auto = None
    if columns.auto_label in classified.columns:
        auto = auto_label_agreement(classified, columns=columns, correct_at=correct_at)
    return RubricBSummary(
        n_tasks=len(tasks),
        n_annotations=int(classified["outcome_class"].notna().sum()),
        n_dual_rated=int((tasks["n_ratings"] >= 2).sum()),
        rates=rates,
        strata=strata,
        auto_label=auto,
        tasks=tasks,
        warnings=tuple(warnings),
        tie_rule=tie_rule,
        n_mean_ties=n_ties,
    )
