"""Review analysis: pure functions from DataFrames (the export's long annotation layout) to result
objects that summarise themselves (``.summary()``, ``.to_frame()``, ``.to_dict()``).

No Streamlit and no database here: pages and exports call these functions.
"""

from review_app.analysis.agreement import (
    AgreementReport,
    AgreementResult,
    agreement,
    agreement_report,
    binary_agreement,
)
from review_app.analysis.formatting import format_ci, format_odds_ratio, format_p
from review_app.analysis.harm_model import HarmModelResult, Penalty, Term, fit_random_intercept_logit
from review_app.analysis.layout import DEFAULT_COLUMNS, AnalysisInputError, AnnotationColumns
from review_app.analysis.proportions import Proportion, wilson
from review_app.analysis.rubric_a import RubricASummary, summarise_rubric_a, task_means
from review_app.analysis.rubric_b import (
    AGGREGATIONS,
    OUTCOME_CLASSES,
    PAPER_REFERENCES,
    TIE_RULES,
    OutcomeClass,
    RubricBSummary,
    auto_label_agreement,
    clarity_strata,
    classify_annotations,
    fit_harm_model,
    harm_model_data,
    harm_model_references,
    rubric_b_agreement,
    summarise_rubric_b,
    task_outcomes,
)

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
    "agreement",
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
