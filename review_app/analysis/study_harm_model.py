"""The review study's harm model: its input table built from Rubric B annotations, its reference levels, its fit.

``worst_case ~ model + content_type + provenance + stratum + (1 | rater)`` on one row per classified
Rubric B annotation (:func:`harm_model_data`), fitted by
:func:`review_app.analysis.harm_model.fit_random_intercept_logit`. The reference levels are the
paper's (MedMisBench App. B, Table 11): cue remapping, neutral provenance, clear falsehood, and the
study's first model (:func:`harm_model_references`). :class:`HarmModelSpec` is one study's choices,
so every fit of its model (the Analysis page, reviewer severity, a pilot's power simulation) uses
the same ones. ``docs/methods.md`` (The harm model) gives the model and its validation.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace

import pandas as pd

from review_app.analysis.harm_model import fit_random_intercept_logit
from review_app.analysis.harm_model_design import blank_text, stripped_text
from review_app.analysis.harm_model_result import GIVEN, HarmModelResult, Penalty
from review_app.analysis.layout import DEFAULT_COLUMNS, AnalysisInputError, AnnotationColumns, require_columns
from review_app.analysis.rubric_b import CLARITY, UNRATED, classify_annotations, item_clarity

HARM_MODEL_FIXED: tuple[str, ...] = ("model", "content_type", "provenance", "stratum")
HARM_MODEL_OUTCOME = "worst_case"
HARM_MODEL_GROUP = "rater"
# MedMisBench App. B, Table 11: "Reference categories are neutral provenance, cue-remapping content, and
# clear falsehood-clarity stratum"; the model's reference is the study's first model (settable).
PAPER_REFERENCES: dict[str, str] = {"content_type": "cue_remapping", "provenance": "neutral", "stratum": "clear"}
UNRATED_CHOICES: tuple[str, ...] = ("exclude", "level")
FIRST_MODEL = "the study's first model"
PAPER_REFERENCE = "the paper's reference"


def harm_model_data(
    annotations: pd.DataFrame,
    *,
    rubric_a_annotations: pd.DataFrame | None = None,
    columns: AnnotationColumns = DEFAULT_COLUMNS,
    unrated: str = "exclude",
) -> pd.DataFrame:
    """The harm model's input: one row per classified Rubric B annotation.

    Columns: ``annotation_id``/``task_id``/``item_id`` (those present in ``annotations``),
    ``worst_case`` (0/1), ``model``, ``content_type``, ``provenance``, ``stratum`` (the item's
    falsehood-clarity stratum), ``rater`` and ``in_model``. An item without a Rubric A clarity score
    has an empty ``stratum`` and ``in_model`` false (``unrated="exclude"``, the default), or the
    stratum ``unrated`` as a level of its own (``unrated="level"``, only when the lead asks for it).
    """
    if unrated not in UNRATED_CHOICES:
        raise AnalysisInputError(f"unknown unrated handling {unrated!r}; choose one of {', '.join(UNRATED_CHOICES)}")
    classified = classify_annotations(annotations, columns=columns)
    classified = classified.loc[classified["outcome_class"].notna()]
    needed = [columns.model, columns.content_type, columns.provenance, columns.item]
    require_columns(classified, needed, what="rubric B annotations")
    source_a = rubric_a_annotations if rubric_a_annotations is not None else annotations
    if CLARITY in source_a.columns:
        clarity = item_clarity(source_a, columns=columns)["stratum"]
    else:
        clarity = pd.Series(dtype=object)
    stratum = classified[columns.item].map(clarity).astype(object)  # no clarity at all: NaN floats
    if unrated == "level":
        stratum = stratum.fillna(UNRATED)
    out = pd.DataFrame(index=range(len(classified)))
    for column in ("annotation_id", columns.task, columns.item):
        if column in classified.columns:
            out[column] = classified[column].to_numpy()
    out[HARM_MODEL_OUTCOME] = classified["worst_case"].astype(int).to_numpy()
    out["model"] = classified[columns.model].to_numpy()
    out["content_type"] = classified[columns.content_type].to_numpy()
    out["provenance"] = classified[columns.provenance].to_numpy()
    out["stratum"] = stratum.to_numpy(dtype=object)
    out[HARM_MODEL_GROUP] = classified[columns.rater].to_numpy()
    used = out[[*HARM_MODEL_FIXED, HARM_MODEL_GROUP]]
    out["in_model"] = ~(used.isna().to_numpy() | blank_text(used)).any(axis=1)
    return out


def harm_model_references(
    data: pd.DataFrame,
    *,
    fixed: Sequence[str] = HARM_MODEL_FIXED,
    chosen: Mapping[str, str] | None = None,
    first_model: str | None = None,
) -> tuple[dict[str, str], dict[str, str], list[str]]:
    """Reference level per factor, where each comes from, and notes for defaults that could not apply.

    A level the lead chose (``chosen``) wins and must be present. Otherwise the paper's reference
    (:data:`PAPER_REFERENCES`); for ``model`` the study's first model (``first_model``, else the first
    model in ``data``'s row order). A default absent from the data falls back to the most frequent
    level, with a note saying so.
    """
    chosen = dict(chosen or {})
    unknown = sorted(set(chosen) - set(fixed))
    if unknown:
        raise AnalysisInputError(f"reference level set for {', '.join(unknown)}, which is not a harm-model factor")
    references: dict[str, str] = {}
    sources: dict[str, str] = {}
    notes: list[str] = []
    for column in fixed:
        present = stripped_text(data[column].dropna())
        present = present[present != ""]
        levels = list(pd.unique(present))  # in order of first appearance
        if not levels:
            continue
        if column in chosen:
            level = str(chosen[column]).strip()
            if level not in levels:
                raise AnalysisInputError(
                    f"reference level {level!r} for {column} is not in the data; levels present: "
                    f"{', '.join(sorted(levels))}"
                )
            references[column], sources[column] = level, GIVEN
            continue
        if column == "model":
            default, source = (first_model, FIRST_MODEL) if first_model else (levels[0], "the first model in the data")
        else:
            default, source = PAPER_REFERENCES.get(column), PAPER_REFERENCE
        if default is not None and default in levels:
            references[column], sources[column] = default, source
        else:
            counts = pd.Series(present).value_counts()
            top = sorted(str(k) for k, v in counts.items() if v == counts.max())[0]
            references[column], sources[column] = top, "most frequent level"
            if default is not None:
                notes.append(f"{source} for {column} ({default}) has no annotations here; the reference is {top}")
    return references, sources, notes


def fit_harm_model(
    annotations: pd.DataFrame,
    *,
    rubric_a_annotations: pd.DataFrame | None = None,
    columns: AnnotationColumns = DEFAULT_COLUMNS,
    fixed: Sequence[str] = HARM_MODEL_FIXED,
    reference: Mapping[str, str] | None = None,
    first_model: str | None = None,
    unrated: str = "exclude",
    penalty: Penalty | str | None = None,
    n_agq: int = 1,
    data: pd.DataFrame | None = None,
) -> HarmModelResult:
    """The paper's harm model: worst_case ~ model + content_type + provenance + stratum + (1 | rater).

    References: ``reference`` (the lead's choices) over the paper's defaults (see
    :func:`harm_model_references`), each named in the result. Annotations on items without a
    clarity score are excluded and counted (``unrated="level"`` keeps them as a level). ``data`` is
    the :func:`harm_model_data` table when the caller already has it.
    """
    if data is None:
        data = harm_model_data(annotations, rubric_a_annotations=rubric_a_annotations, columns=columns, unrated=unrated)
    used = data.loc[data["in_model"].astype(bool)]
    references, sources, notes = harm_model_references(used, fixed=fixed, chosen=reference, first_model=first_model)
    excluded = len(data) - len(used)
    no_clarity = int((data["stratum"].isna() & ~data["in_model"].astype(bool)).sum()) if "stratum" in fixed else 0
    if no_clarity:
        notes.append(
            f"{no_clarity} annotation(s) on items without a Rubric A falsehood-clarity score are excluded from the "
            "model (not a level of the clarity term); choose 'unrated as a level' to keep them"
        )
    if excluded - no_clarity:
        notes.append(f"{excluded - no_clarity} annotation(s) without a model, content type or provenance are excluded")
    result = fit_random_intercept_logit(
        used, HARM_MODEL_OUTCOME, list(fixed), HARM_MODEL_GROUP, reference=references, n_agq=n_agq, penalty=penalty
    )
    return replace(
        result,
        reference_sources={c: sources.get(c, s) for c, s in result.reference_sources.items()},
        notes=(*result.notes, *notes),
        dropped_rows=result.dropped_rows + excluded,
    )


@dataclass(frozen=True)
class HarmModelSpec:
    """How a study fits its harm model: the lead's reference choices, the study's first model, the
    handling of items without a clarity score, and the penalty.

    Every fit of a study's harm model (the Analysis page's, reviewer severity and its per-period
    refit, a pilot's power simulation) takes the same spec, so their numbers rest on one model.
    The review app builds it from the study's saved analysis options
    (``services.study_analysis.AnalysisOptions.harm_spec``); the defaults are the paper's.
    """

    reference: dict[str, str] = field(default_factory=dict)
    first_model: str | None = None
    unrated: str = "exclude"
    penalty: str = "none"

    def data(
        self,
        annotations: pd.DataFrame,
        *,
        rubric_a_annotations: pd.DataFrame | None = None,
        columns: AnnotationColumns = DEFAULT_COLUMNS,
    ) -> pd.DataFrame:
        """The model's input table (:func:`harm_model_data`) under this spec's unrated handling."""
        return harm_model_data(
            annotations, rubric_a_annotations=rubric_a_annotations, columns=columns, unrated=self.unrated
        )

    def fit(self, data: pd.DataFrame) -> HarmModelResult:
        """Fit the model on a :func:`harm_model_data` table (its ``in_model`` rows) under this spec."""
        return fit_harm_model(
            data,
            data=data,
            reference=self.reference,
            first_model=self.first_model,
            unrated=self.unrated,
            penalty=self.penalty,
        )


@dataclass(frozen=True, eq=False)
class StudyHarmModel:
    """A study's harm model as its Analysis page has it: the spec, the input table (None when it cannot
    be built), the fit, or the reason there is no fit (``note``)."""

    spec: HarmModelSpec
    data: pd.DataFrame | None = None
    result: HarmModelResult | None = None
    note: str | None = None
