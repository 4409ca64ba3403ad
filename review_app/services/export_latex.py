"""The export's LaTeX tables (booktabs, escaped by ``bench_core.kernel.latex``), ready to paste into a paper."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import pandas as pd

from bench_core.kernel.latex import Latex
from bench_core.kernel.latex import escape as latex_escape
from bench_core.kernel.latex import table as booktabs_table
from review_app.analysis.rubric_a import COMPOSITE
from review_app.analysis.rubric_b import AGGREGATIONS, OUTCOME_CLASSES
from review_app.services.export_tables import AGGREGATION_LABELS, STRATUM_LABELS, estimable
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


def latex_table(caption: str, label: str, header: Sequence[str], rows: Sequence[Sequence[str]], align: str) -> str:
    """A booktabs table; ``header`` and ``caption`` are escaped here, ``rows`` must be escaped cells."""
    return booktabs_table(
        caption, f"tab:{label}", header, [[Latex(cell) for cell in row] for row in rows], align=align, placement="htbp"
    )


def latex_tables(analysis: StudyAnalysis) -> dict[str, str]:
    """File name -> LaTeX source for the paper's tables (agreement, Rubric A, Rubric B, harm model)."""
    study = analysis.study
    out: dict[str, str] = {}
    agreement = analysis.agreement_frame()
    if not agreement.empty:
        rows = [
            [
                latex_escape(r["rubric"]),
                latex_escape(r["score_name"]),
                str(int(r["n_units"])),
                f"{latex_escape(r['coefficient_name'])} {_num(r['coefficient'])} ({_ci(r['ci_low'], r['ci_high'])})",
                _num(r["alpha_ordinal"]),
                "n/a" if pd.isna(r["percent_agreement"]) else f"{r['percent_agreement'] * 100:.1f}\\%",
            ]
            for r in agreement.to_dict("records")
        ]
        out["agreement.tex"] = latex_table(
            f"Inter-rater agreement, study {study} (tasks with two or more ratings; 95% CI)",
            "medrev-agreement",
            ["Rubric", "Score", "Tasks", "Coefficient (95% CI)", "Ordinal alpha", "Agreement"],
            rows,
            "llrlrr",
        )
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
        out["rubric_b_outcomes.tex"] = latex_table(
            f"Rubric B outcome classes over {summary.n_tasks} tasks, study {study} (n/N, %, Wilson 95% CI)",
            "medrev-rubric-b-outcomes",
            ["Outcome", *(AGGREGATION_LABELS[a] for a in AGGREGATIONS)],
            rows,
            "llll",
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
                ["Falsehood clarity", *(AGGREGATION_LABELS[a] for a in AGGREGATIONS)],
                rows,
                "llll",
            )
    if analysis.harm_model is not None:
        result = analysis.harm_model
        rows = []
        for t in result.terms:
            if not estimable(t):
                rows.append([latex_escape(t.name), "n/e", "n/e", "n/e"])
                continue
            p_value = r"\textless{}0.001" if t.p_value < 0.001 else _num(t.p_value, 3)
            rows.append([latex_escape(t.name), _num(t.odds_ratio), _ci(t.or_ci_low, t.or_ci_high), p_value])
        footer = f"Reviewer variance {result.group_variance:.3f}; latent ICC {result.icc:.3f}"
        if not all(estimable(t) for t in result.terms):
            footer += "; n/e: not estimable (separation), see the manifest's warnings"
        if not result.converged:
            footer += "; the fit did not converge"
        rows.append([f"\\multicolumn{{4}}{{l}}{{\\footnotesize {latex_escape(footer)}}}"])
        out["harm_model.tex"] = latex_table(
            f"Adjusted odds ratios of a worst-case outcome, study {study} ({result.n} annotations, "
            f"{result.n_groups} reviewers; maximum likelihood, random reviewer intercept)",
            "medrev-harm-model",
            ["Term", "OR", "95% CI", "p"],
            rows,
            "lrlr",
        )
    return out
