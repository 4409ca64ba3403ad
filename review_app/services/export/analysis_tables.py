"""The export's tables of the study's statistics: agreement, Rubric A and Rubric B summaries, harm model, judge audit.

Each is built from the :class:`StudyAnalysis` of the export's snapshot, the same analysis the lead pages
show (their paper tables in ``export.paper`` reuse these builders, so a table downloaded from a page is
the file the export writes). The estimators are described in docs/methods.md.
"""

from __future__ import annotations

from typing import Any

import pandas as pd

from review_app.analysis.layout import DEFAULT_COLUMNS as C
from review_app.analysis.rubric_a import COMPOSITE
from review_app.analysis.rubric_b import (
    OUTCOME_CLASSES,
    TIE_RULE_LABELS,
    UNRATED,
    clarity_strata,
)
from review_app.analysis.study_harm_model import HARM_MODEL_FIXED
from review_app.services.export.tables import CLASS_LABELS, STRATUM_LABELS, Table
from review_app.services.judge_audit import LABELS as JUDGE_LABELS
from review_app.services.judge_audit import JudgeAuditSummary
from review_app.services.study_analysis import StudyAnalysis

AGREEMENT_COLUMNS: dict[str, str] = {
    "rubric": "Rubric key.",
    "score": "Dimension key, or a binary Rubric B outcome (worst_case, correct).",
    "score_name": "Readable name of the score.",
    "coefficient_name": "AC2 (Gwet, weighted) for dimensions; AC1 for binary outcomes.",
    "weights": "Weights of the coefficient: ordinal for dimensions, identity (AC1) for binary outcomes.",
    "min_ratings": "Minimum number of ratings a task needs to enter (2: dual-rated tasks, the protocol's choice).",
    "n_units": "Tasks with at least min_ratings ratings of this score (the N of the coefficient).",
    "n_units_dropped": "Tasks rated on this score but with fewer than min_ratings ratings, set aside.",
    "n_raters": "Raters who rated at least one of those tasks.",
    "n_ratings": "Ratings on those tasks.",
    "coefficient": "Gwet's AC2 (or AC1) with the full category set (irrCAC 0.4.4).",
    "se": "Standard error of the coefficient (Gwet's linearisation variance).",
    "ci_low": "Lower end of the 95% confidence interval (Student t on n_units - 1 degrees of freedom), at least -1.",
    "ci_high": "Upper end of the 95% confidence interval, at most 1.",
    "boot_ci_low": "Lower end of a bootstrap interval (empty: not computed for the export).",
    "boot_ci_high": "Upper end of a bootstrap interval (empty: not computed for the export).",
    "percent_agreement": "Exact pairwise agreement averaged over tasks (fraction 0-1).",
    "alpha_ordinal": "Krippendorff's alpha, ordinal metric (krippendorff package).",
}


def agreement_table(analysis: StudyAnalysis) -> Table:
    return agreement_table_of(analysis.agreement_frame())


def agreement_table_of(frame: pd.DataFrame) -> Table:
    """The agreement table of any agreement frame (the export's, or the Agreement page's weights and N)."""
    columns = dict(AGREEMENT_COLUMNS)
    for column in frame.columns:
        if column.startswith("n_score_"):
            columns[column] = f"Ratings (on the analysed tasks) with score {column.removeprefix('n_score_')}."
    return Table(
        "agreement",
        "Inter-rater agreement per rubric and score on tasks with at least min_ratings (2) ratings, with the tasks "
        "set aside counted (the lead dashboard's default numbers): Gwet's AC2 with ordinal weights over the full "
        "category set, AC1 for Rubric B's binary outcomes, Krippendorff's ordinal alpha and percent agreement; "
        "confidence limits clipped to [-1, 1].",
        frame,
        columns,
    )


def rubric_a_tables(analysis: StudyAnalysis) -> list[Table]:
    summary = analysis.rubric_a
    if summary is None:
        return []
    frame = summary.to_frame().reset_index()
    flags = summary.flags_frame().reset_index()
    return [
        Table(
            "rubric_a_summary",
            "Rubric A per dimension over tasks (dual ratings averaged per task first): mean with a task-clustered "
            "bootstrap 95% CI, and pass rate (per-task mean at or above the threshold) with a Wilson 95% CI; the "
            "last row is the composite (mean of the dimension means per task).",
            frame,
            {
                "dimension": f"Dimension key, or '{COMPOSITE}' for the mean of the five dimensions.",
                "name": "Readable name of the dimension.",
                "n_tasks": "Tasks with a score on the dimension.",
                "mean": "Mean of the per-task mean scores (0-2).",
                "mean_ci_low": "Lower end of the task-clustered bootstrap 95% CI of the mean.",
                "mean_ci_high": "Upper end of the task-clustered bootstrap 95% CI of the mean.",
                "pass_threshold": "A task passes when its mean score is at least this value.",
                "n_pass": "Tasks that pass.",
                "pass_rate": "Share of tasks that pass (fraction 0-1).",
                "pass_ci_low": "Lower end of the Wilson 95% CI of the pass rate.",
                "pass_ci_high": "Upper end of the Wilson 95% CI of the pass rate.",
            },
        ),
        Table(
            "rubric_a_flags",
            "Rubric A disposition flags: how many annotations ticked each flag and on how many tasks any rater did.",
            flags,
            {
                "key": "Flag key.",
                "label": "Readable flag name.",
                "known": "The flag is defined by the rubric (false for keys found only in the data).",
                "n_annotations": "Annotations that ticked the flag.",
                "n_tasks": "Tasks on which at least one rater ticked the flag.",
            },
        ),
    ]


PROPORTION_COLUMNS = {
    "k": "Tasks in the class.",
    "n": "Tasks in the denominator.",
    "rate": "k / n (fraction 0-1).",
    "ci_low": "Lower end of the Wilson 95% CI.",
    "ci_high": "Upper end of the Wilson 95% CI.",
}


def rubric_b_tables(analysis: StudyAnalysis) -> list[Table]:
    summary = analysis.rubric_b
    if summary is None:
        return []

    def tie(aggregation: str) -> str | None:
        return summary.tie_rule if aggregation == "mean" else None

    outcome_rows = [
        {"aggregation": a, "outcome": key, "outcome_label": CLASS_LABELS[key], **p.to_dict(), "tie_rule": tie(a)}
        for a, by_class in summary.rates.items()
        for key, p in by_class.items()
    ]
    strata_rows = [
        {"aggregation": a, "stratum": s, "stratum_label": STRATUM_LABELS.get(s, s), **p.to_dict(), "tie_rule": tie(a)}
        for a, by_stratum in summary.strata.items()
        for s, p in by_stratum.items()
    ]
    aggregation_doc = "How dual ratings are combined: conservative (primary), mean (mean-reviewer) or strict."
    tie_doc = (
        "Mean-reviewer rows: how a mean exactly halfway between two scale levels was resolved (empty for the "
        "other aggregations). This export: " + summary.tie_rule_label + "."
    )
    tie_values = {"tie_rule": dict(TIE_RULE_LABELS)}
    tie_note = (
        f" Mean-reviewer ties: {summary.tie_rule_label} ({summary.n_mean_ties} task(s) had a tied mean"
        + (", excluded from the mean-reviewer denominators" if summary.tie_rule == "exclude" else "")
        + ")."
    )
    tables = [
        Table(
            "rubric_b_outcomes",
            "Rubric B outcome classes over tasks under the three aggregations of dual ratings, with Wilson 95% CIs."
            + tie_note,
            pd.DataFrame(
                outcome_rows, columns=["aggregation", "outcome", "outcome_label", *PROPORTION_COLUMNS, "tie_rule"]
            ),
            {
                "aggregation": aggregation_doc,
                "outcome": "Outcome class key.",
                "outcome_label": "Readable outcome class.",
                **PROPORTION_COLUMNS,
                "tie_rule": tie_doc,
            },
            {"outcome": {c.key: f"{c.label}: {c.rule}" for c in OUTCOME_CLASSES}, **tie_values},
        ),
        Table(
            "rubric_b_strata",
            "Worst-case rate over Rubric B tasks by falsehood-clarity stratum of the item (per-item mean Rubric A "
            "falsehood clarity: clear >= 1.5, soft 0.5 to < 1.5, potentially true < 0.5), per aggregation." + tie_note,
            pd.DataFrame(
                strata_rows, columns=["aggregation", "stratum", "stratum_label", *PROPORTION_COLUMNS, "tie_rule"]
            ),
            {
                "aggregation": aggregation_doc,
                "stratum": "Falsehood-clarity stratum key.",
                "stratum_label": "Readable stratum.",
                **PROPORTION_COLUMNS,
                "tie_rule": tie_doc,
            },
            {"stratum": dict(STRATUM_LABELS), **tie_values},
        ),
    ]
    if summary.auto_label is not None:
        auto = summary.auto_label
        tables.append(
            Table(
                "rubric_b_auto_label",
                "Agreement of clinician final-answer correctness with the automatic FAIL/SUCCESS label, per "
                "annotation (correct = score at least correct_at), with a Wilson 95% CI.",
                pd.DataFrame(
                    [
                        {
                            **auto.agreement.to_dict(),
                            "n_without_label": auto.n_without_label,
                            "correct_at": auto.correct_at,
                        }
                    ]
                ),
                {
                    "k": "Annotations where clinician correctness and the automatic label agree.",
                    "n": "Annotations with both a correctness score and an automatic label.",
                    "rate": "k / n (fraction 0-1).",
                    "ci_low": "Lower end of the Wilson 95% CI.",
                    "ci_high": "Upper end of the Wilson 95% CI.",
                    "n_without_label": "Annotations whose response has no automatic label.",
                    "correct_at": "Correctness score at or above which the clinician counts the answer correct.",
                },
            )
        )
    return tables


def harm_model_table(analysis: StudyAnalysis) -> list[Table]:
    result = analysis.harm_model
    if result is None:
        return []
    rows = [
        {
            "term": t.name,
            "column": t.column,
            "level": t.level,
            "reference": t.reference,
            **{k: v for k, v in t.to_dict().items() if k != "separated"},
            "z": t.z,
            "estimable": t.estimable,
            "separated": t.separated,
            "separation": t.separation,
            "penalty": result.penalty.key,
        }
        for t in result.terms
    ]
    columns = [
        "term",
        "column",
        "level",
        "reference",
        "estimate",
        "se",
        "z",
        "odds_ratio",
        "or_ci_low",
        "or_ci_high",
        "p_value",
        "estimable",
        "separated",
        "separation",
        "penalty",
    ]
    frame = pd.DataFrame(rows, columns=columns)
    frame["estimable"] = frame["estimable"].astype(bool)
    frame["separated"] = frame["separated"].astype(bool)
    return [
        Table(
            "harm_model",
            f"Random-intercept logistic regression ({result.formula}; {result.estimation}); adjusted odds ratios "
            f"with Wald 95% CIs against the reference levels {result.references_text()}. "
            + (f"{result.penalty.describe()}. " if result.penalty.active else "")
            + "Model-level figures (n, reviewer variance, latent ICC, notes, warnings) are in the manifest under "
            "harm_model; the per-annotation input is harm_model_input.",
            frame,
            {
                "term": "Coefficient name: Intercept, or <column>[<level>] against the reference level.",
                "column": "Fixed-effect column of the term (empty for the intercept).",
                "level": "Level of the column the term compares with the reference level.",
                "reference": "Reference level of the term's column (empty for the intercept).",
                "estimate": "Log-odds coefficient (empty when not estimable).",
                "se": "Standard error of the coefficient.",
                "z": "Wald z statistic.",
                "odds_ratio": "exp(estimate): adjusted odds ratio of a worst-case outcome against the reference level.",
                "or_ci_low": "Lower end of the Wald 95% CI of the odds ratio.",
                "or_ci_high": "Upper end of the Wald 95% CI of the odds ratio.",
                "p_value": "Two-sided Wald p-value.",
                "estimable": "False when the term has no estimate: a separated term of a maximum-likelihood fit.",
                "separated": "The term's level has no events or only events (or its estimate diverged): under "
                "maximum likelihood it is not estimable; under a penalised fit its estimate leans on the prior.",
                "separation": "Why the term is separated (e.g. no events in this level); empty otherwise.",
                "penalty": "none (maximum likelihood, as lme4::glmer) or the fixed-effect prior of a penalised fit "
                "(normal: SD 10 intercept, 2.5 others, as blme::bglmer).",
            },
        )
    ]


HARM_INPUT_COLUMNS: dict[str, str] = {
    "annotation_id": "Id of the annotation revision in force (links to raw_annotations).",
    C.task: "Review task id.",
    C.item: "Benchmark item id in the review database.",
    "worst_case": "Outcome: 1 when this annotation's Rubric B scores are worst case (correctness 0, uptake 0, harm 0).",
    "model": "Fixed effect: model whose response was reviewed.",
    "content_type": "Fixed effect: content type of the injected misinformation.",
    "provenance": "Fixed effect: provenance frame of the injected misinformation.",
    "stratum": "Fixed effect: falsehood-clarity stratum of the item (per-item mean Rubric A clarity); empty when the "
    "item has no Rubric A clarity score (or 'unrated' when the lead kept such items as a level).",
    "rater": "Group of the random intercept: the reviewer (pseudonym unless real names were asked for).",
    "in_model": "The annotation entered the fitted model (false: a fixed-effect value is missing, e.g. no clarity "
    "score).",
}


def harm_model_input_table(analysis: StudyAnalysis) -> list[Table]:
    """The harm model's per-annotation input: every classified Rubric B annotation, flagged if fitted."""
    data = analysis.harm_input
    if data is None:
        return []
    frame = data.copy()
    frame["worst_case"] = frame["worst_case"].astype("Int64")
    frame["in_model"] = frame["in_model"].astype(bool)
    for column in ("annotation_id", C.task, C.item):
        if column in frame.columns:
            frame[column] = frame[column].astype("Int64")
    result = analysis.harm_model
    references = result.references_text() if result is not None else "not fitted"
    values = {
        "stratum": {s.key: s.label for s in clarity_strata()} | {UNRATED: STRATUM_LABELS[UNRATED]},
        "worst_case": {"1": "worst case", "0": "any other outcome class"},
    }
    if result is not None:
        for column in HARM_MODEL_FIXED:
            if column in result.reference_levels:
                values.setdefault(column, {})[result.reference_levels[column]] = "reference level"
    return [
        Table(
            "harm_model_input",
            "The harm model's input, one row per classified Rubric B annotation: the outcome, each fixed-effect "
            f"column and the reviewer group; rows with in_model true were fitted. Reference levels: {references}. "
            "The codebook's 'Refitting the harm model' section gives the lme4 call that refits it in R.",
            frame,
            {c: HARM_INPUT_COLUMNS[c] for c in frame.columns},
            values,
        )
    ]


def harm_model_refit(analysis: StudyAnalysis, csv_name: str = "harm_model_input.csv") -> dict[str, Any] | None:
    """The codebook's recipe for refitting the exported harm model: formula, references, R and medrev calls."""
    result = analysis.harm_model
    if result is None:
        return None
    return {
        "formula": result.formula,
        "estimation": result.estimation,
        "reference_levels": dict(result.reference_levels),
        "reference_sources": dict(result.reference_sources),
        "penalty": result.penalty.key,
        "penalty_description": result.penalty.describe(),
        "separated_terms": list(result.separated_terms),
        "notes": list(result.notes),
        "r_code": result.r_code(csv_name, subset="in_model"),
        "medrev_command": result.cli_command(csv_name),
    }


def judge_audit_tables(audit: JudgeAuditSummary) -> list[Table]:
    """A judge-audit study's tables: agreement with the judge, confusion counts, by confidence, disagreements."""
    a = audit.agreement
    label_values = {str(k): v for k, v in JUDGE_LABELS.items()}
    tables = [
        Table(
            "judge_audit_agreement",
            "Automatic judge vs clinicians: each clinician label paired with the judge's label on the same trace; "
            "Gwet's AC1 over recognized / neutral / polluted (95% CI from Gwet's variance), exact agreement, and the "
            "annotations on traces the judge left flagged (set aside).",
            pd.DataFrame(
                [
                    {
                        "n_pairs": audit.n_pairs,
                        "n_flagged": audit.n_flagged,
                        "n_disagreements": len(audit.disagreements),
                        "coefficient": a.coefficient if a else None,
                        "se": a.se if a else None,
                        "ci_low": a.ci_low if a else None,
                        "ci_high": a.ci_high if a else None,
                        "percent_agreement": audit.percent_agreement,
                    }
                ]
            ),
            {
                "n_pairs": "Clinician annotations whose trace has a judge label (the N of the coefficient).",
                "n_flagged": "Clinician annotations of traces the judge left flagged (no judge label; not paired).",
                "n_disagreements": "Paired annotations whose label differs from the judge's.",
                "coefficient": "Gwet's AC1, judge and clinician as the two raters of each pair.",
                "se": "Standard error of AC1 (Gwet's linearisation variance).",
                "ci_low": "Lower end of the 95% confidence interval, at least -1.",
                "ci_high": "Upper end of the 95% confidence interval, at most 1.",
                "percent_agreement": "Share of pairs with the same label (fraction 0-1).",
            },
        ),
        Table(
            "judge_audit_confusion",
            "Paired annotations counted by clinician label (rows) and judge label (columns).",
            audit.confusion.rename_axis("clinician_label").reset_index(),
            {"clinician_label": "The clinician's label on the trace."}
            | {name: f"Pairs where the judge said {name}." for name in audit.confusion.columns},
        ),
    ]
    if not audit.by_confidence.empty:
        tables.append(
            Table(
                "judge_audit_by_confidence",
                "Paired annotations per level of the clinician's confidence (every level of the scale), with the "
                "share agreeing with the judge and its Wilson 95% CI.",
                audit.by_confidence,
                {
                    "confidence": "Confidence score the clinician gave (0-2).",
                    "confidence_label": "Readable confidence level.",
                    "n": "Paired annotations at this confidence.",
                    "k": "Of those, annotations whose label equals the judge's.",
                    "rate": "k / n (fraction 0-1; empty when n = 0).",
                    "ci_low": "Lower end of the Wilson 95% CI.",
                    "ci_high": "Upper end of the Wilson 95% CI.",
                },
            )
        )
    if not audit.disagreements.empty:
        tables.append(
            Table(
                "judge_audit_disagreements",
                "Paired annotations whose label differs from the judge's.",
                audit.disagreements,
                {
                    "task_id": "Review task id.",
                    "record": "Id of the retracted-paper record.",
                    "title": "Title of the retracted paper.",
                    "judge": "The judge's label.",
                    "clinician": "The clinician's label.",
                    "confidence": "The clinician's confidence (0-2).",
                    "rater": "Reviewer (pseudonym).",
                    "comment": "The clinician's comment.",
                },
                {"judge": label_values, "clinician": label_values},
            )
        )
    return tables
