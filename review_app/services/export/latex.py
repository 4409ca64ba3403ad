"""The export's LaTeX tables (booktabs, escaped by ``bench_core.kernel.latex``), ready to paste into a paper."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import pandas as pd

from bench_core.kernel.latex import Latex
from bench_core.kernel.latex import escape as latex_escape
from bench_core.kernel.latex import table as booktabs_table
from review_app.analysis.formatting import (
    coefficient_label,
    column_label,
    format_ci,
    format_odds_ratio,
    format_p,
)
from review_app.analysis.harm_model import HarmModelResult
from review_app.analysis.rubric_a import COMPOSITE
from review_app.analysis.rubric_b import AGGREGATIONS, OUTCOME_CLASSES
from review_app.services.export.tables import AGGREGATION_LABELS, STRATUM_LABELS
from review_app.services.judge_audit import JudgeAuditSummary
from review_app.services.study_analysis import StudyAnalysis

# --- LaTeX ----------------------------------------------------------------------------------------


def _num(value: object, digits: int = 2) -> str:
    if value is None or (isinstance(value, float) and not math.isfinite(value)) or value is pd.NA:
        return "n/a"
    return f"{float(value):.{digits}f}"


def _ci(low: object, high: object, digits: int = 2) -> str:
    if low is None or high is None or (isinstance(low, float) and math.isnan(low)):
        return "n/a"
    return f"{_num(low, digits)}--{_num(high, digits)}"


def _pct(proportion: dict[str, Any]) -> str:
    if proportion["rate"] is None:
        return f"{proportion['k']}/{proportion['n']}"
    return (
        f"{proportion['k']}/{proportion['n']} ({proportion['rate'] * 100:.1f}\\%; "
        f"{proportion['ci_low'] * 100:.1f}--{proportion['ci_high'] * 100:.1f})"
    )


def latex_table(
    caption: str,
    label: str,
    header: Sequence[str],
    rows: Sequence[Sequence[str]],
    align: str,
    notes: Sequence[str] = (),
) -> str:
    """A booktabs table; ``header``, ``caption`` and ``notes`` are escaped here, ``rows`` must be escaped cells."""
    return booktabs_table(
        caption,
        f"tab:{label}",
        header,
        [[Latex(cell) for cell in row] for row in rows],
        align=align,
        placement="htbp",
        notes=notes,
    )


def latex_tables(analysis: StudyAnalysis) -> dict[str, str]:
    """File name -> LaTeX source for the paper's tables (agreement, Rubric A, Rubric B, harm model)."""
    study = analysis.study
    out: dict[str, str] = {}
    agreement = analysis.agreement_frame()
    if not agreement.empty:
        out["agreement.tex"] = agreement_latex(agreement, study)
    if analysis.rubric_a is not None:
        summary_a = analysis.rubric_a
        rows = [
            [
                latex_escape(d.name),
                str(d.n_tasks),
                f"{_num(d.mean)} ({_ci(d.mean_ci.low, d.mean_ci.high)})",
                _pct(d.passed.to_dict()) if d.passed else "n/a",
            ]
            for d in summary_a.dimensions
        ]
        composite = summary_a.to_frame().loc[COMPOSITE]
        rows.append(
            [
                "Composite (mean of dimensions)",
                str(int(composite["n_tasks"])),
                f"{_num(summary_a.composite)} ({_ci(summary_a.composite_ci.low, summary_a.composite_ci.high)})",
                "",
            ]
        )
        out["rubric_a.tex"] = latex_table(
            f"Rubric A item validation, study {study}: mean score (bootstrap 95% CI) and pass rate (Wilson 95% CI)",
            "medrev-rubric-a",
            ["Dimension", "Tasks", "Mean (95% CI)", "Pass, n/N (%; 95% CI)"],
            rows,
            "lrll",
        )
    if analysis.rubric_b is not None:
        summary = analysis.rubric_b
        rows = [
            [latex_escape(c.label)] + [_pct(summary.rates[a][c.key].to_dict()) for a in AGGREGATIONS]
            for c in OUTCOME_CLASSES
        ]
        tie_note = (
            f"Mean-reviewer: each dimension's mean over raters rounded to the scale, {summary.tie_rule_label} "
            f"({summary.n_mean_ties} task(s) had a tied mean"
            + ("; they are excluded from its denominators" if summary.tie_rule == "exclude" else "")
            + ")."
        )
        header = [AGGREGATION_LABELS[a] + (" (ties: see note)" if a == "mean" else "") for a in AGGREGATIONS]
        out["rubric_b_outcomes.tex"] = latex_table(
            f"Rubric B outcome classes over {summary.n_tasks} tasks, study {study} (n/N, %, Wilson 95% CI)",
            "medrev-rubric-b-outcomes",
            ["Outcome", *header],
            rows,
            "llll",
            notes=[tie_note],
        )
        if summary.strata:
            strata = list(next(iter(summary.strata.values())))
            rows = [
                [latex_escape(STRATUM_LABELS.get(s, s))] + [_pct(summary.strata[a][s].to_dict()) for a in AGGREGATIONS]
                for s in strata
            ]
            out["rubric_b_strata.tex"] = latex_table(
                f"Worst-case rate by falsehood clarity, study {study} (n/N, %, Wilson 95% CI)",
                "medrev-rubric-b-strata",
                ["Falsehood clarity", *header],
                rows,
                "llll",
                notes=[tie_note],
            )
    if analysis.harm_model is not None:
        out["harm_model.tex"] = harm_model_latex(analysis.harm_model, study)
    return out


def agreement_latex(agreement: pd.DataFrame, study: str, label: str = "medrev-agreement") -> str:
    """The agreement table (rows of ``agreement_frame``: the export's, or the Agreement page's choices)."""
    min_ratings = int(agreement["min_ratings"].iloc[0])
    dropped = int(agreement["n_units_dropped"].max())
    rows = [
        [
            latex_escape(r["rubric"]),
            latex_escape(r["score_name"]),
            str(int(r["n_units"])),
            f"{latex_escape(coefficient_label(r['coefficient_name'], r['weights']))} {_num(r['coefficient'])} "
            f"({_ci(r['ci_low'], r['ci_high'])})",
            _num(r["alpha_ordinal"]),
            "n/a" if pd.isna(r["percent_agreement"]) else f"{r['percent_agreement'] * 100:.1f}\\%",
        ]
        for r in agreement.to_dict("records")
    ]
    return latex_table(
        f"Inter-rater agreement, study {study} (tasks with at least {min_ratings} ratings; up to {dropped} "
        "task(s) with fewer set aside per score; 95% CI clipped to [-1, 1])",
        label,
        [
            column_label("rubric"),
            column_label("score_name"),
            column_label("n_units"),
            "Coefficient (95% CI)",
            column_label("alpha_ordinal"),
            column_label("percent_agreement"),
        ],
        rows,
        "llrlrr",
    )


def _or_ci(low: float, high: float) -> str:
    """An odds-ratio interval with a LaTeX en dash (each end escaped, the dash kept)."""
    if format_ci(low, high) == "—":
        return "n/a"
    return f"{latex_escape(format_odds_ratio(low))}--{latex_escape(format_odds_ratio(high))}"


def harm_model_latex(result: HarmModelResult, study: str) -> str:
    """Adjusted odds ratios grouped by factor, each factor's reference named, separated terms spelled out."""
    rows: list[list[str]] = []

    def term_row(label: str, term) -> list[str]:
        if not term.estimable:
            reason = term.separation or "no standard error"
            return [label, f"\\multicolumn{{3}}{{l}}{{not estimable ({latex_escape(reason)})}}"]
        mark = "*" if term.separated else ""
        return [
            label + mark,
            latex_escape(format_odds_ratio(term.odds_ratio)),
            _or_ci(term.or_ci_low, term.or_ci_high),
            latex_escape(format_p(term.p_value)),
        ]

    for term in result.terms:
        if term.column is None:
            rows.append(term_row("Intercept (odds)", term))
    for column in result.fixed:
        terms = [t for t in result.terms if t.column == column]
        reference = result.reference_levels.get(column)
        if reference is None:
            continue
        heading = f"{column} (reference: {reference})"
        rows.append([f"\\multicolumn{{4}}{{l}}{{\\textit{{{latex_escape(heading)}}}}}"])
        rows.append([f"\\quad {latex_escape(reference)}", "1 (ref.)", "", ""])
        rows.extend(term_row(f"\\quad {latex_escape(t.level)}", t) for t in terms)
    notes = [
        f"Reference levels: {result.references_text()}.",
        f"Reviewer variance {result.group_variance:.3f}; latent ICC {result.icc:.3f}; {result.n} annotations "
        f"({result.n_events} worst case), {result.n_groups} reviewers.",
    ]
    if result.penalty.active:
        notes.append(f"Estimates from a {result.penalty.describe()}.")
    for term in result.terms:
        if term.separated:
            what = "the intercept" if term.column is None else f"{term.column} = {term.level}"
            if term.estimable:
                notes.append(f"* {what}: {term.separation}; its finite estimate comes from the prior.")
            else:
                notes.append(f"{what}: {term.separation}; not estimable by maximum likelihood.")
    notes.extend(result.notes)
    if not result.converged:
        notes.append("The fit did not converge; see the manifest's warnings.")
    return latex_table(
        f"Adjusted odds ratios of a worst-case outcome, study {study} ({result.n} annotations, {result.n_groups} "
        f"reviewers; {result.estimation}, random reviewer intercept)",
        "medrev-harm-model",
        ["Term", "OR", "95% CI", "p"],
        rows,
        "lrlr",
        notes=notes,
    )


def judge_audit_latex(audit: JudgeAuditSummary) -> dict[str, str]:
    """File name -> LaTeX for a judge-audit study: agreement with the judge and the confusion table."""
    out: dict[str, str] = {}
    a = audit.agreement
    if a is None or a.coefficient is None:
        return out
    out["judge_audit.tex"] = latex_table(
        f"Automatic judge vs clinicians, study {audit.study} ({audit.n_pairs} paired annotations; "
        f"{audit.n_flagged} on traces the judge left flagged set aside)",
        "medrev-judge-audit",
        ["Measure", "Value"],
        [
            ["Gwet's AC1 (95\\% CI)", f"{_num(a.coefficient)} ({_ci(a.ci_low, a.ci_high)})"],
            ["Exact agreement", f"{audit.percent_agreement * 100:.1f}\\%"],
            ["Disagreements", str(len(audit.disagreements))],
        ],
        "lr",
    )
    confusion = audit.confusion
    out["judge_audit_confusion.tex"] = latex_table(
        f"Clinician label (rows) by judge label (columns), study {audit.study}",
        "medrev-judge-audit-confusion",
        ["Clinician \\ judge", *[str(c) for c in confusion.columns]],
        [
            [latex_escape(str(index)), *[str(int(v)) for v in row]]
            for index, row in zip(confusion.index, confusion.to_numpy(), strict=True)
        ],
        "l" + "r" * len(confusion.columns),
    )
    return out
