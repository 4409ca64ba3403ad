"""The standard analyses of one study, computed once for the dashboard, the analysis page and the export.

Every number comes from :func:`review_app.services.annotations.annotations_frame` through the
analysis package, with the same options everywhere (ordinal AC2 with analytic Gwet CIs, AC1 for
Rubric B's worst-case class and correctness, a seeded task-clustered bootstrap for Rubric A means),
so the agreement a lead reads on the dashboard is the agreement the export writes.

An analysis that the data cannot support yet (no Rubric A scores, no worst-case event, too few
annotations for the harm model) is skipped with a note saying why, never filled with nonsense.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd
from sqlalchemy import Engine

from review_app.analysis import (
    AgreementReport,
    AnalysisInputError,
    HarmModelResult,
    RubricASummary,
    RubricBSummary,
    agreement_report,
    fit_harm_model,
    rubric_b_agreement,
    summarise_rubric_a,
    summarise_rubric_b,
)
from review_app.analysis.layout import DEFAULT_COLUMNS as C
from review_app.analysis.layout import select_rubric
from review_app.analysis.rubric_b import CLARITY, classify_annotations
from review_app.db.engine import read_session
from review_app.rubrics import get_rubric
from review_app.services.annotations import annotations_frame, get_study_row

AGREEMENT_WEIGHTS = "ordinal"
DEFAULT_N_BOOT = 2000
# Below this many classified Rubric B annotations a model with model, content type, provenance and
# clarity terms (8+ coefficients) has too few events per parameter to be worth reporting.
MIN_HARM_MODEL_ANNOTATIONS = 20
BINARY_SCORE_NAMES = {"worst_case": "Worst-case outcome class (AC1)", "correct": "Correct final answer (AC1)"}


@dataclass(frozen=True, eq=False)
class StudyAnalysis:
    """Agreement per rubric, Rubric A and B summaries and the harm model of one study."""

    study: str
    annotations: pd.DataFrame
    agreement: dict[str, AgreementReport]
    rubric_a: RubricASummary | None
    rubric_b: RubricBSummary | None
    harm_model: HarmModelResult | None
    notes: tuple[str, ...] = ()
    parameters: dict[str, object] = field(default_factory=dict)

    def agreement_frame(self) -> pd.DataFrame:
        """One row per rubric and score: the coefficient, SE, CI, alpha, percent agreement, n."""
        frames = []
        for key, report in self.agreement.items():
            frame = report.to_frame().reset_index()
            if frame.empty:
                continue
            rubric = get_rubric(key)
            names = {d.key: d.name for d in rubric.dimensions} | BINARY_SCORE_NAMES
            frame.insert(0, "rubric", key)
            frame.insert(2, "score_name", frame["score"].map(names))
            frames.append(frame)
        if not frames:
            return pd.DataFrame(columns=["rubric", "score", "score_name"])
        combined = pd.concat(frames, ignore_index=True)
        counts = sorted((c for c in combined.columns if c.startswith("n_score_")), key=_category_order)
        rest = [c for c in combined.columns if not c.startswith("n_score_")]
        combined = combined[rest + counts]
        for column in counts:
            combined[column] = combined[column].astype("Int64")
        return combined

    def warnings(self) -> list[str]:
        """Warnings of every analysis, prefixed with where they come from."""
        out = []
        for key, report in self.agreement.items():
            out += [f"agreement {key}/{r.score}: {w}" for r in report.results for w in r.warnings]
        for name, result in (("rubric A", self.rubric_a), ("rubric B", self.rubric_b), ("harm model", self.harm_model)):
            if result is not None:
                out += [f"{name}: {w}" for w in result.warnings]
        return out


def _category_order(column: str) -> float:
    return float(column.removeprefix("n_score_"))


def analyse(
    annotations: pd.DataFrame,
    rubric_keys: list[str],
    *,
    study: str = "",
    n_boot: int = DEFAULT_N_BOOT,
    seed: int = 0,
) -> StudyAnalysis:
    """Run the standard analyses on a frame in the export layout (pure: no database)."""
    notes: list[str] = []
    agreement: dict[str, AgreementReport] = {}
    for key in rubric_keys:
        rows = select_rubric(annotations, key)
        if rows.empty:
            notes.append(f"agreement for rubric {key} skipped: no annotations yet")
            continue
        if key == "B":
            agreement[key] = rubric_b_agreement(rows, weights=AGREEMENT_WEIGHTS)
        else:
            agreement[key] = agreement_report(rows, key, weights=AGREEMENT_WEIGHTS)
    rubric_a = rubric_b = harm = None
    if "A" in rubric_keys:
        try:
            rubric_a = summarise_rubric_a(annotations, n_boot=n_boot, seed=seed)
        except AnalysisInputError as error:
            notes.append(f"rubric A summary skipped: {error}")
    if "B" in rubric_keys:
        try:
            rubric_b = summarise_rubric_b(annotations)
        except AnalysisInputError as error:
            notes.append(f"rubric B summary skipped: {error}")
        harm, note = _harm_model(annotations)
        if note:
            notes.append(note)
    return StudyAnalysis(
        study=study,
        annotations=annotations,
        agreement=agreement,
        rubric_a=rubric_a,
        rubric_b=rubric_b,
        harm_model=harm,
        notes=tuple(notes),
        parameters={
            "agreement_weights": AGREEMENT_WEIGHTS,
            "agreement_ci": "Gwet linearisation variance, Student-t interval (irrCAC)",
            "min_ratings_for_agreement": 2,
            "bootstrap_n": n_boot,
            "bootstrap_seed": seed,
            "harm_model": "worst_case ~ model + content_type + provenance + stratum + (1 | rater), Laplace ML",
            "min_harm_model_annotations": MIN_HARM_MODEL_ANNOTATIONS,
        },
    )


def _harm_model(annotations: pd.DataFrame) -> tuple[HarmModelResult | None, str | None]:
    rows = select_rubric(annotations, "B")
    if rows.empty:
        return None, "harm model skipped: no rubric B annotations yet"
    data = annotations if CLARITY in annotations.columns else annotations.assign(**{CLARITY: np.nan})
    try:
        classified = classify_annotations(rows)
    except AnalysisInputError as error:
        return None, f"harm model skipped: {error}"
    classified = classified.loc[classified["outcome_class"].notna()]
    if len(classified) < MIN_HARM_MODEL_ANNOTATIONS:
        return None, (
            f"harm model skipped: {len(classified)} classified rubric B annotation(s), "
            f"at least {MIN_HARM_MODEL_ANNOTATIONS} are needed"
        )
    if classified[C.rater].nunique() < 2:
        return None, "harm model skipped: the reviewer random intercept needs annotations from two or more reviewers"
    try:
        return fit_harm_model(data), None
    except (AnalysisInputError, np.linalg.LinAlgError) as error:
        return None, f"harm model skipped: {error}"


def study_analysis(
    engine: Engine, study_name: str, *, pseudonymise: bool = True, n_boot: int = DEFAULT_N_BOOT, seed: int = 0
) -> StudyAnalysis:
    """The standard analyses of a study on its annotations in force (what the dashboard shows)."""
    with read_session(engine) as session:
        rubrics = get_study_row(session, study_name).rubric_keys
    frame = annotations_frame(engine, study_name, pseudonymise=pseudonymise)
    return analyse(frame, rubrics, study=study_name, n_boot=n_boot, seed=seed)


def data_version(engine: Engine, study_name: str) -> tuple[int, ...]:
    """A cheap fingerprint of a study's ratings and decisions (counts and highest ids).

    Annotations and adjudications are append-only, so any new rating, edit or decision changes
    it; pages use it as a cache key so statistics are recomputed exactly when the data changed.
    The set of gold tasks (left out of every analysis) is part of it too.
    """
    from sqlalchemy import func
    from sqlmodel import select

    from review_app.db.models import Adjudication, Annotation, GoldTask, Task

    with read_session(engine) as session:
        study = get_study_row(session, study_name)
        tasks = select(Task.id).where(Task.study_id == study.id)
        annotations = session.exec(
            select(func.count(Annotation.id), func.coalesce(func.max(Annotation.id), 0)).where(
                Annotation.task_id.in_(tasks)
            )
        ).one()
        decisions = session.exec(
            select(func.count(Adjudication.id), func.coalesce(func.max(Adjudication.id), 0)).where(
                Adjudication.task_id.in_(tasks)
            )
        ).one()
        gold = session.exec(
            select(
                func.count(GoldTask.task_id),
                func.coalesce(func.sum(GoldTask.task_id), 0),
                func.coalesce(func.max(GoldTask.task_id), 0),
            ).where(GoldTask.study_id == study.id)
        ).one()
    return (int(annotations[0]), int(annotations[1]), int(decisions[0]), int(decisions[1]), *map(int, gold))
