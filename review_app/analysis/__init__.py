"""Review analysis: pure functions from DataFrames (the export's long annotation layout) to result
objects that summarise themselves (``.summary()``, ``.to_frame()``, ``.to_dict()``).

No Streamlit and no database here: pages and exports call these functions.

The names are imported on first use (PEP 562), so importing one submodule does not load them all
(``medrev --help`` starts fast). The function ``agreement`` is not among them: it shares its name with
the submodule, and importing the submodule rebinds the package attribute to the module (import it from
``review_app.analysis.agreement``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from bench_core.kernel.lazy import lazy_exports

if TYPE_CHECKING:
    from review_app.analysis.agreement import agreement_report, binary_agreement
    from review_app.analysis.agreement_result import AgreementReport, AgreementResult
    from review_app.analysis.formatting import format_ci, format_odds_ratio, format_p
    from review_app.analysis.harm_model import fit_random_intercept_logit
    from review_app.analysis.harm_model_result import HarmModelResult, Penalty, Term
    from review_app.analysis.layout import DEFAULT_COLUMNS, AnalysisInputError, AnnotationColumns
    from review_app.analysis.proportions import Proportion, wilson
    from review_app.analysis.rubric_a import RubricASummary, summarise_rubric_a, task_means
    from review_app.analysis.rubric_b import (
        AGGREGATIONS,
        OUTCOME_CLASSES,
        TIE_RULES,
        OutcomeClass,
        clarity_strata,
        classify_annotations,
        rubric_b_agreement,
        task_outcomes,
    )
    from review_app.analysis.rubric_b_summary import RubricBSummary, auto_label_agreement, summarise_rubric_b
    from review_app.analysis.study_harm_model import (
        PAPER_REFERENCES,
        fit_harm_model,
        harm_model_data,
        harm_model_references,
    )

_EXPORTS = {
    "AgreementReport": ("review_app.analysis.agreement_result", "AgreementReport"),
    "AgreementResult": ("review_app.analysis.agreement_result", "AgreementResult"),
    "agreement_report": ("review_app.analysis.agreement", "agreement_report"),
    "binary_agreement": ("review_app.analysis.agreement", "binary_agreement"),
    "format_ci": ("review_app.analysis.formatting", "format_ci"),
    "format_odds_ratio": ("review_app.analysis.formatting", "format_odds_ratio"),
    "format_p": ("review_app.analysis.formatting", "format_p"),
    "HarmModelResult": ("review_app.analysis.harm_model_result", "HarmModelResult"),
    "Penalty": ("review_app.analysis.harm_model_result", "Penalty"),
    "Term": ("review_app.analysis.harm_model_result", "Term"),
    "fit_random_intercept_logit": ("review_app.analysis.harm_model", "fit_random_intercept_logit"),
    "DEFAULT_COLUMNS": ("review_app.analysis.layout", "DEFAULT_COLUMNS"),
    "AnalysisInputError": ("review_app.analysis.layout", "AnalysisInputError"),
    "AnnotationColumns": ("review_app.analysis.layout", "AnnotationColumns"),
    "Proportion": ("review_app.analysis.proportions", "Proportion"),
    "wilson": ("review_app.analysis.proportions", "wilson"),
    "RubricASummary": ("review_app.analysis.rubric_a", "RubricASummary"),
    "summarise_rubric_a": ("review_app.analysis.rubric_a", "summarise_rubric_a"),
    "task_means": ("review_app.analysis.rubric_a", "task_means"),
    "AGGREGATIONS": ("review_app.analysis.rubric_b", "AGGREGATIONS"),
    "OUTCOME_CLASSES": ("review_app.analysis.rubric_b", "OUTCOME_CLASSES"),
    "PAPER_REFERENCES": ("review_app.analysis.study_harm_model", "PAPER_REFERENCES"),
    "TIE_RULES": ("review_app.analysis.rubric_b", "TIE_RULES"),
    "OutcomeClass": ("review_app.analysis.rubric_b", "OutcomeClass"),
    "RubricBSummary": ("review_app.analysis.rubric_b_summary", "RubricBSummary"),
    "auto_label_agreement": ("review_app.analysis.rubric_b_summary", "auto_label_agreement"),
    "clarity_strata": ("review_app.analysis.rubric_b", "clarity_strata"),
    "classify_annotations": ("review_app.analysis.rubric_b", "classify_annotations"),
    "fit_harm_model": ("review_app.analysis.study_harm_model", "fit_harm_model"),
    "harm_model_data": ("review_app.analysis.study_harm_model", "harm_model_data"),
    "harm_model_references": ("review_app.analysis.study_harm_model", "harm_model_references"),
    "rubric_b_agreement": ("review_app.analysis.rubric_b", "rubric_b_agreement"),
    "summarise_rubric_b": ("review_app.analysis.rubric_b_summary", "summarise_rubric_b"),
    "task_outcomes": ("review_app.analysis.rubric_b", "task_outcomes"),
}

__all__ = [
    "AGGREGATIONS",
    "DEFAULT_COLUMNS",
    "OUTCOME_CLASSES",
    "PAPER_REFERENCES",
    "TIE_RULES",
    "AgreementReport",
    "AgreementResult",
    "AnalysisInputError",
    "AnnotationColumns",
    "HarmModelResult",
    "OutcomeClass",
    "Penalty",
    "Proportion",
    "RubricASummary",
    "RubricBSummary",
    "Term",
    "agreement_report",
    "auto_label_agreement",
    "binary_agreement",
    "clarity_strata",
    "classify_annotations",
    "fit_harm_model",
    "fit_random_intercept_logit",
    "format_ci",
    "format_odds_ratio",
    "format_p",
    "harm_model_data",
    "harm_model_references",
    "rubric_b_agreement",
    "summarise_rubric_a",
    "summarise_rubric_b",
    "task_means",
    "task_outcomes",
    "wilson",
]


__getattr__ = lazy_exports(__name__, globals(), _EXPORTS)
