"""The lead pages' results tables as a paper prints them, each with its caption and its downloads.

A :class:`PaperTable` is what the Analysis and Agreement pages show for one result: a title, a frame
with human column labels and journal-formatted cells (rates as %, CIs in brackets, p-values as
journals print them; see :mod:`review_app.analysis.formatting`), one caption sentence saying what the
table is and how it was computed (aggregation, weights, tie rule, references, N set aside), and the
two files a lead downloads from it: the export's CSV table (full precision, the codebook's column
names, the export's formula escaping) and the export's LaTeX table. The CSV and LaTeX come from the
export builders (:mod:`review_app.services.export.analysis_tables`, :mod:`review_app.services.export.latex`),
so a table downloaded from a page is the table the study export writes.
"""

from __future__ import annotations

import io
from dataclasses import dataclass
from functools import cached_property

import pandas as pd

from bench_core.medmisbench import taxonomy
from review_app.analysis import OUTCOME_CLASSES
from review_app.analysis.formatting import (
    FACTOR_LABELS,
    coefficient_label,
    column_label,
    format_interval,
    format_number,
    format_odds_ratio,
    format_p,
    format_percent,
    format_proportion,
)
from review_app.analysis.harm_model_result import GIVEN, HarmModelResult
from review_app.analysis.rubric_b import AGGREGATIONS
from review_app.rubrics import get_rubric
from review_app.services.export import analysis_tables as export_tables
from review_app.services.export import latex as export_latex
from review_app.services.export.tables import AGGREGATION_LABELS, STRATUM_LABELS, Table, escape_csv_cell
from review_app.services.judge_audit import JudgeAuditSummary
from review_app.services.study_analysis import StudyAgreement, StudyAnalysis


@dataclass(frozen=True, eq=False)
class PaperTable:
    """One results table: what the page shows and the CSV/LaTeX a lead downloads from it."""

    key: str  # file stem of the downloads, unique on a page
    title: str
    frame: pd.DataFrame  # human labels, formatted cells
    caption: str
    csv: Table | None = None  # the export's table (full precision)
    latex: str | None = None  # the export's LaTeX table

    def csv_bytes(self) -> bytes | None:
        """The CSV file, written as the export writes it (formula-like text escaped)."""
        return self._csv_file

    @cached_property
    def _csv_file(self) -> bytes | None:
        # written once per table: a table built in a compute worker arrives with its file written
        if self.csv is None:
            return None
        buffer = io.StringIO()
        self.csv.frame.map(escape_csv_cell).to_csv(buffer, index=False)
        return buffer.getvalue().encode("utf-8")


def _labelled(frame: pd.DataFrame) -> pd.DataFrame:
    return frame.rename(columns={c: column_label(c) for c in frame.columns})


# --- agreement -------------------------------------------------------------------------------------


def agreement_tables(result: StudyAgreement) -> list[PaperTable]:
    """One agreement table per rubric under the Agreement page's weights and minimum ratings."""
    frame = result.frame()
    if frame.empty:
        return []
    tables = []
    weights = column_weights(result.weights)
    for rubric_key, part in frame.groupby("rubric", sort=True):
        rubric = get_rubric(str(rubric_key))
        n_units = int(part["n_units"].max())
        dropped = int(part["n_units_dropped"].max())
        shown = pd.DataFrame(
            {
                "score_name": part["score_name"],
                "coefficient_name": [
                    coefficient_label(n, w) for n, w in zip(part["coefficient_name"], part["weights"], strict=True)
                ],
                "coefficient": part["coefficient"].map(lambda v: format_number(v, 2)),
                "ci": [format_interval(lo, hi) for lo, hi in zip(part["ci_low"], part["ci_high"], strict=True)],
                "alpha_ordinal": part["alpha_ordinal"].map(lambda v: format_number(v, 2)),
                "percent_agreement": part["percent_agreement"].map(format_percent),
                "n_units": part["n_units"].astype(int),
                "n_units_dropped": part["n_units_dropped"].astype(int),
                "n_ratings": part["n_ratings"].astype(int),
            }
        )
        binary = " (AC1 for the binary outcomes worst case and correct answer)" if rubric_key == "B" else ""
        caption = (
            f"Inter-rater agreement on {rubric.name}: Gwet's {weights} per dimension over the full scale "
            f"of each dimension{binary}, 95% CI from Gwet's variance (Student t, clipped to [-1, 1]); "
            "Krippendorff's ordinal α and exact pairwise agreement alongside. "
            f"N = {n_units} task(s) with at least {result.min_ratings} rating(s); {dropped} task(s) with fewer "
            "set aside."
        )
        csv = export_tables.agreement_table_of(part.reset_index(drop=True))
        latex = export_latex.agreement_latex(part, result.study, label=f"medrev-agreement-{str(rubric_key).lower()}")
        tables.append(
            PaperTable(
                f"agreement_{rubric_key}",
                f"Agreement, {rubric.name}",
                _labelled(shown).reset_index(drop=True),
                caption,
                csv,
                latex,
            )
        )
    return tables


def column_weights(weights: str) -> str:
    """How the coefficient reads in a caption: ``AC2 with ordinal weights`` or ``AC1 (unweighted)``."""
    return "AC1 (unweighted)" if weights == "identity" else f"AC2 with {weights} weights"


# --- Rubric A --------------------------------------------------------------------------------------


def rubric_a_tables(analysis: StudyAnalysis) -> list[PaperTable]:
    """Rubric A item validation: mean score and pass rate per dimension, then the disposition flags."""
    summary = analysis.rubric_a
    if summary is None:
        return []
    exported = {t.name: t for t in export_tables.rubric_a_tables(analysis)}
    latex = export_latex.latex_tables(analysis).get("rubric_a.tex")
    frame = summary.to_frame()
    rows = []
    for r in frame.to_dict("records"):
        passed = (
            ""
            if pd.isna(r.get("pass_rate"))
            else format_proportion(
                int(r["n_pass"]), int(r["n_tasks"]), r["pass_rate"], r["pass_ci_low"], r["pass_ci_high"]
            )
        )
        rows.append(
            {
                "name": r["name"],
                "n_tasks": int(r["n_tasks"]),
                "mean": format_number(r["mean"], 2),
                "mean_ci": format_interval(r["mean_ci_low"], r["mean_ci_high"]),
                "pass_threshold": "" if pd.isna(r.get("pass_threshold")) else f"{r['pass_threshold']:g}",
                "pass_rate": passed,
            }
        )
    boot = summary.composite_ci
    mean = (
        f"mean score with a task-clustered bootstrap 95% CI ({boot.n_boot} resamples, seed {boot.seed})"
        if boot.n_boot
        else "mean score without an interval (the task-clustered bootstrap 95% CI is computed when the "
        "bootstrap is switched on; the export always has it)"
    )
    caption = (
        f"Rubric A item validation over {summary.n_tasks} task(s) ({summary.n_annotations} annotations): ratings "
        f"are averaged per task first; {mean}; a task passes when its mean reaches the threshold, pass "
        "rate with a Wilson 95% CI; the last row is the composite (mean of the dimension means per task)."
    )
    tables = [
        PaperTable(
            "rubric_a_summary",
            "Mean score and pass rate per dimension",
            _labelled(pd.DataFrame(rows)),
            caption,
            exported.get("rubric_a_summary"),
            latex,
        )
    ]
    flags = summary.flags_frame().reset_index()
    used = flags[flags["n_annotations"] > 0]
    if not used.empty:
        shown = pd.DataFrame(
            {
                "label": used["label"],
                "n_annotations": used["n_annotations"].astype(int),
                "n_tasks": used["n_tasks"].astype(int),
            }
        )
        tables.append(
            PaperTable(
                "rubric_a_flags",
                "Disposition flags",
                _labelled(shown).reset_index(drop=True),
                "Disposition flags ticked by the reviewers on Rubric A: annotations that ticked each flag and tasks "
                f"on which any reviewer did (of {summary.n_tasks} task(s)); flags nobody ticked are not listed.",
                exported.get("rubric_a_flags"),
            )
        )
    return tables


# --- Rubric B --------------------------------------------------------------------------------------


def _aggregation_header(key: str) -> str:
    return f"{AGGREGATION_LABELS[key]}, % [95% CI] (k/N)"


def _proportion_cell(p) -> str:
    return format_proportion(p.k, p.n, p.rate, p.ci_low, p.ci_high)


def rubric_b_tables(analysis: StudyAnalysis) -> list[PaperTable]:
    """Rubric B outcome classes and the worst-case rate by falsehood clarity, under the three aggregations."""
    summary = analysis.rubric_b
    if summary is None:
        return []
    exported = {t.name: t for t in export_tables.rubric_b_tables(analysis)}
    latex = export_latex.latex_tables(analysis)
    aggregations = [a for a in AGGREGATIONS if a in summary.rates]
    how = (
        "Aggregation of dual ratings: conservative (primary) takes the most severe class any reviewer gave, strict "
        "counts a class only when every reviewer gives it (its rates need not add to 100%), mean-reviewer rounds "
        "each dimension's mean to the "
        f"scale, a mean halfway between two levels {summary.tie_rule_label} ({summary.n_mean_ties} task(s) "
        "had a tied mean"
        + ("; they leave the mean-reviewer denominators" if summary.tie_rule == "exclude" else "")
        + "). Rates with Wilson 95% CIs."
    )
    outcomes = pd.DataFrame(
        [
            {"outcome": c.label}
            | {_aggregation_header(a): _proportion_cell(summary.rates[a][c.key]) for a in aggregations}
            for c in OUTCOME_CLASSES
        ]
    )
    tables = [
        PaperTable(
            "rubric_b_outcomes",
            "Outcome classes under each aggregation",
            _labelled(outcomes),
            f"Outcome classes over {summary.n_tasks} Rubric B task(s) ({summary.n_dual_rated} dual-rated, "
            f"{summary.n_annotations} annotations). " + how,
            exported.get("rubric_b_outcomes"),
            latex.get("rubric_b_outcomes.tex"),
        )
    ]
    if summary.strata:
        strata = list(next(iter(summary.strata.values())))
        rows = [
            {"stratum": STRATUM_LABELS.get(s, s)}
            | {
                _aggregation_header(a): _proportion_cell(summary.strata[a][s])
                for a in aggregations
                if a in summary.strata
            }
            for s in strata
        ]
        tables.append(
            PaperTable(
                "rubric_b_strata",
                "Worst case by falsehood clarity",
                _labelled(pd.DataFrame(rows)),
                "Worst-case rate by the item's falsehood-clarity stratum (per-item mean Rubric A clarity: clear "
                "≥ 1.5, soft 0.5 to < 1.5, potentially true < 0.5; items without a clarity score apart). " + how,
                exported.get("rubric_b_strata"),
                latex.get("rubric_b_strata.tex"),
            )
        )
    if summary.auto_label is not None:
        auto = summary.auto_label
        p = auto.agreement
        tables.append(
            PaperTable(
                "rubric_b_auto_label",
                "Clinicians vs the automatic label",
                pd.DataFrame(
                    [
                        {
                            "Measure": "Clinician correctness agrees with the automatic FAIL/SUCCESS label",
                            "Agreement, % [95% CI] (k/N)": _proportion_cell(p),
                            "Annotations without a label": auto.n_without_label,
                        }
                    ]
                ),
                f"Per annotation, a correctness score of at least {auto.correct_at:g} counts as correct and is "
                "compared with the automatic label (SUCCESS = correct); Wilson 95% CI; annotations whose response "
                "has no automatic label are counted apart.",
                exported.get("rubric_b_auto_label"),
            )
        )
    return tables


# --- harm model ------------------------------------------------------------------------------------


def level_label(column: str | None, level: str | None) -> str:
    """A factor level as a reader knows it: the taxonomy's display name, the clarity stratum's label."""
    if not level or column is None:
        return level or ""
    try:
        if column == "content_type":
            return taxonomy.content_type(level).display_name
        if column == "provenance":
            return taxonomy.provenance(level).display_name
    except (LookupError, ValueError, StopIteration):  # a level the taxonomy does not know: its own name
        return level
    if column == "stratum":
        return STRATUM_LABELS.get(level, level)
    return level


def references_label(result: HarmModelResult) -> str:
    """Each factor's reference as a reader knows it: ``Content type: Cue Remapping (the paper's reference)``."""
    parts = []
    for column, level in result.reference_levels.items():
        source = result.reference_sources.get(column)
        text = f"{FACTOR_LABELS.get(column, column)}: {level_label(column, level)}"
        parts.append(text + (f" ({source})" if source and source != GIVEN else ""))
    return "; ".join(parts)


def odds_ratio_figure_frame(analysis: StudyAnalysis) -> pd.DataFrame:
    """The harm model's terms for the odds-ratio figure, each labelled "Factor: level vs reference"."""
    result = analysis.harm_model
    frame = result.to_frame().reset_index()
    by_name = {t.name: t for t in result.terms}
    frame["label"] = [
        "Intercept"
        if by_name[name].column is None
        else f"{FACTOR_LABELS.get(by_name[name].column, by_name[name].column)}: "
        f"{level_label(by_name[name].column, by_name[name].level)} vs "
        f"{level_label(by_name[name].column, by_name[name].reference)}"
        for name in frame["term"]
    ]
    return frame


def harm_model_tables(analysis: StudyAnalysis) -> list[PaperTable]:
    """Adjusted odds ratios of a worst-case outcome, grouped by factor with each reference level named."""
    result = analysis.harm_model
    if result is None:
        return []
    rows = []
    for term in result.terms:
        if not term.estimable:
            note = f"not estimable ({term.separation or 'no standard error'})"
        elif term.separated:
            note = f"separated ({term.separation}); finite only through the prior"
        else:
            note = ""
        estimable = term.estimable
        rows.append(
            {
                "factor": "Intercept" if term.column is None else FACTOR_LABELS.get(term.column, term.column),
                "level": "odds at the references" if term.column is None else level_label(term.column, term.level),
                "reference": level_label(term.column, term.reference),
                "odds_ratio": format_odds_ratio(term.odds_ratio) if estimable else "n/e",
                "or_ci": format_interval(term.or_ci_low, term.or_ci_high, format_odds_ratio) if estimable else "n/e",
                "p_value": format_p(term.p_value) if estimable else "n/e",
                "note": note,
            }
        )
    left_out = 0
    if analysis.harm_input is not None:
        left_out = int((~analysis.harm_input["in_model"].astype(bool)).sum())
    status = "converged" if result.converged else "did NOT converge"
    caption = (
        f"Random-intercept logistic regression of a worst-case outcome per annotation ({result.formula}; "
        f"{result.estimation}); adjusted odds ratios with Wald 95% CIs against the references "
        f"({references_label(result)}). N = {result.n} annotation(s) ({result.n_events} worst case) from "
        f"{result.n_groups} reviewer(s); {left_out} classified annotation(s) left out for a missing factor; "
        f"reviewer variance {result.group_variance:.3f}, latent ICC {result.icc:.3f}; the fit {status}."
    )
    exported = export_tables.harm_model_table(analysis)
    return [
        PaperTable(
            "harm_model",
            "Adjusted odds ratios of a worst-case outcome",
            _labelled(pd.DataFrame(rows)),
            caption,
            exported[0] if exported else None,
            export_latex.harm_model_latex(result, analysis.study),
        )
    ]


def analysis_tables(analysis: StudyAnalysis) -> dict[str, list[PaperTable]]:
    """Every table of the Analysis page for a study with Rubric A and/or B, by section."""
    return {
        "rubric_a": rubric_a_tables(analysis),
        "rubric_b": rubric_b_tables(analysis),
        "harm_model": harm_model_tables(analysis),
    }


# --- judge audit -----------------------------------------------------------------------------------


def judge_audit_tables(audit: JudgeAuditSummary) -> list[PaperTable]:
    """A judge-audit study's tables: agreement with the judge, the confusion table, agreement by confidence."""
    exported = {t.name: t for t in export_tables.judge_audit_tables(audit)}
    latex = export_latex.judge_audit_latex(audit)
    a = audit.agreement
    overview = pd.DataFrame(
        [
            {"measure": "Clinician annotations paired with a judge label", "value": str(audit.n_pairs)},
            {
                "measure": "Gwet's AC1, judge vs clinician [95% CI]",
                "value": "—"
                if a is None or a.coefficient is None
                else f"{format_number(a.coefficient, 2)} {format_interval(a.ci_low, a.ci_high)}",
            },
            {"measure": "Exact agreement", "value": format_percent(audit.percent_agreement)},
            {"measure": "Annotations where the judge and the clinician differ", "value": str(len(audit.disagreements))},
            {"measure": "Annotations on traces the judge left flagged (not paired)", "value": str(audit.n_flagged)},
        ]
    )
    tables = [
        PaperTable(
            "judge_agreement",
            "Automatic judge vs clinicians",
            _labelled(overview),
            "Each clinician label is paired with the judge's label on the same trace (judge and clinician are the "
            "two raters of the pair): Gwet's AC1 over recognized / neutral / polluted with a 95% CI from Gwet's "
            f"variance, and exact agreement; N = {audit.n_pairs} pair(s); {audit.n_flagged} annotation(s) on "
            "traces the judge left flagged are set aside, never guessed.",
            exported.get("judge_audit_agreement"),
            latex.get("judge_audit.tex"),
        ),
        PaperTable(
            "judge_confusion",
            "Clinician label by judge label",
            audit.confusion.rename_axis("Clinician \\ judge").reset_index(),
            f"Counts of the {audit.n_pairs} paired annotation(s): rows are the clinicians' labels, columns the "
            "judge's; the diagonal is agreement.",
            exported.get("judge_audit_confusion"),
            latex.get("judge_audit_confusion.tex"),
        ),
    ]
    by_confidence = audit.by_confidence
    if not by_confidence.empty:
        shown = pd.DataFrame(
            {
                "Reviewer confidence": by_confidence["confidence_label"],
                "Annotations": by_confidence["n"].astype(int),
                "Agree with the judge, % [95% CI] (k/N)": [
                    format_proportion(k, n, r, lo, hi)
                    for k, n, r, lo, hi in by_confidence[["k", "n", "rate", "ci_low", "ci_high"]].itertuples(
                        index=False
                    )
                ],
            }
        )
        tables.append(
            PaperTable(
                "judge_by_confidence",
                "Agreement with the judge by reviewer confidence",
                shown,
                "Paired annotations by the confidence the clinician gave (every level of the scale, used or not), "
                "with the share agreeing with the judge and its Wilson 95% CI.",
                exported.get("judge_audit_by_confidence"),
            )
        )
    if not audit.disagreements.empty:
        labels = {"task_id": "Task", "record": "Record", "title": "Retracted paper", "judge": "Judge's label"}
        labels |= {"clinician": "Clinician's verdict", "confidence": "Confidence", "rater": "Reviewer"}
        labels |= {"comment": "Comment"}
        tables.append(
            PaperTable(
                "judge_disagreements",
                "Where the judge and the clinician differ",
                audit.disagreements.rename(columns=labels),
                "Every paired annotation whose label differs from the judge's (the cases to read first), with the "
                "clinician's confidence and comment.",
                exported.get("judge_audit_disagreements"),
            )
        )
    return tables
