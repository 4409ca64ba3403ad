"""The standard analyses of one study, computed once for the dashboard, the analysis page and the export.

Every number comes from :func:`review_app.services.annotations.annotations_frame` through the
analysis package, with the same options everywhere (ordinal AC2 with analytic Gwet CIs, AC1 for
Rubric B's worst-case class and correctness, a seeded task-clustered bootstrap for Rubric A means),
so the agreement a lead reads on the dashboard is the agreement the export writes.

The lead's analysis choices (:class:`~review_app.services.analysis_options.AnalysisOptions`:
harm-model reference levels, the mean-reviewer tie rule, whether items without a clarity score enter
the harm model as a level, and the opt-in penalised fit) are stored with the study, so the analysis
page and the export use the same ones; defaults are the paper's. The pages read these numbers
through :mod:`review_app.services.cached_analyses` (computed in a compute worker, once per data
version); the export and the command line call :func:`study_analysis` and :func:`analyse` here.

Which tasks enter the numbers is the lead's other choice (``pending``): a task is pending while it
has fewer annotations in force than planned raters (:data:`PENDING_RULE`). The export leaves pending
tasks out unless the lead includes them, and the Analysis page offers the same choice with the same
default; both select the tasks with :func:`leave_out_pending` and compute with :func:`analyse`, so
one choice gives one set of numbers on both.

An analysis that the data cannot support yet (no Rubric A scores, no worst-case event, too few
annotations for the harm model) is skipped with a note saying why, never filled with nonsense.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np
import pandas as pd
from sqlalchemy import Engine
from sqlmodel import select

from review_app.analysis import (
    AgreementReport,
    AnalysisInputError,
    HarmModelResult,
    RubricASummary,
    RubricBSummary,
    agreement_report,
    rubric_b_agreement,
    summarise_rubric_a,
    summarise_rubric_b,
)
from review_app.analysis.agreement import WEIGHT_SCHEMES
from review_app.analysis.harm_model import Penalty
from review_app.analysis.layout import DEFAULT_COLUMNS as C
from review_app.analysis.layout import select_rubric
from review_app.analysis.rubric_b import CLARITY
from review_app.analysis.study_harm_model import (
    HARM_MODEL_FIXED,
    HarmModelSpec,
    StudyHarmModel,
    harm_model_references,
)
from review_app.db.engine import read_session
from review_app.db.models import Task
from review_app.rubrics import get_rubric
from review_app.services.analysis_options import AnalysisOptions, first_model
from review_app.services.annotations import annotations_frame, get_study_row
from review_app.services.errors import InvalidInput
from review_app.services.study_cache import data_version as data_version  # re-exported (older callers)

AGREEMENT_WEIGHTS = "ordinal"
MIN_RATINGS = 2
DEFAULT_N_BOOT = 2000
# Below this many classified Rubric B annotations a model with model, content type, provenance and
# clarity terms (8+ coefficients) has too few events per parameter to be worth reporting.
MIN_HARM_MODEL_ANNOTATIONS = 20
BINARY_SCORE_NAMES = {"worst_case": "Worst-case outcome class (AC1)", "correct": "Correct final answer (AC1)"}
PENDING_CHOICES: tuple[str, ...] = ("include", "exclude")
DEFAULT_PENDING = "exclude"  # the export's default (pending tasks left out unless the lead includes them)
PENDING_RULE = (
    "a task is pending while it has fewer annotations in force than its planned number of raters "
    "(target_raters); excluded pending tasks are absent from every file"
)
TASK_CHOICE_LABELS = {
    "exclude": "complete tasks only (pending tasks left out)",
    "include": "all tasks, with the ratings they have so far",
}
_ID_CHUNK = 10_000  # task ids per IN list


def check_pending(pending: str) -> str:
    """Refuse a task choice other than ``include`` or ``exclude`` (the export's and the Analysis page's)."""
    if pending not in PENDING_CHOICES:
        raise InvalidInput(f"pending must be one of {', '.join(PENDING_CHOICES)} (got {pending!r})")
    return pending


def rated_counts(frame: pd.DataFrame) -> pd.Series:
    """Annotations in force per task id (tasks without any are absent)."""
    return frame[C.task].value_counts() if len(frame) else pd.Series(dtype=np.int64)


def is_pending(ids: np.ndarray, targets: np.ndarray, rated: pd.Series) -> np.ndarray:
    """Per task in ``ids``: fewer annotations in force (``rated``) than planned raters (:data:`PENDING_RULE`)."""
    return rated.reindex(ids, fill_value=0).to_numpy() < targets


def leave_out_pending(frame: pd.DataFrame, targets: np.ndarray, rated: pd.Series | None = None) -> pd.DataFrame:
    """The annotations of ``frame`` without those of pending tasks; ``targets`` holds each row's planned raters.

    The export and the Analysis page both select their tasks here, so "complete tasks only" means the
    same annotations on both. The frame is returned as it is when no task is pending.
    """
    rated = rated_counts(frame) if rated is None else rated
    pending = is_pending(frame[C.task].to_numpy(), np.asarray(targets), rated)
    if not pending.any():
        return frame
    return frame.loc[~pending].reset_index(drop=True)


@dataclass(frozen=True)
class TaskScope:
    """Which tasks an analysis used: the choice, and what it kept and left out (tasks with annotations)."""

    pending: str
    tasks: int
    annotations: int
    left_out_tasks: int = 0
    left_out_annotations: int = 0

    def describe(self) -> str:
        """One sentence for the page: the choice and the counts behind it."""
        used = f"{self.annotations:,} annotation(s) on {self.tasks:,} task(s)"
        if self.pending == "include":
            return f"These numbers use {TASK_CHOICE_LABELS['include']}: {used}."
        if not self.left_out_tasks:
            return f"These numbers use {TASK_CHOICE_LABELS['exclude']}: {used}; no rated task is pending."
        return (
            f"These numbers use {TASK_CHOICE_LABELS['exclude']}: {used}; the {self.left_out_annotations:,} "
            f"annotation(s) that {self.left_out_tasks:,} of the pending tasks have so far are left out."
        )


def scoped(frame: pd.DataFrame, targets: np.ndarray | None, pending: str) -> tuple[pd.DataFrame, TaskScope]:
    """``frame`` as the task choice ``pending`` selects it (``targets``: each row's planned raters, needed
    only to leave pending tasks out), and the :class:`TaskScope` that says so."""
    check_pending(pending)
    kept = frame if pending == "include" or targets is None else leave_out_pending(frame, targets)
    scope = TaskScope(
        pending,
        tasks=int(kept[C.task].nunique()),
        annotations=len(kept),
        left_out_tasks=int(frame[C.task].nunique()) - int(kept[C.task].nunique()),
        left_out_annotations=len(frame) - len(kept),
    )
    return kept, scope


def planned_raters(engine: Engine, study_name: str, frame: pd.DataFrame) -> np.ndarray:
    """Each row's task's planned raters (``target_raters``), read for the frame's tasks by id.

    Only a task planning two or more raters can have annotations and still be pending, so only those
    are returned (the rest count as one). Read by id in chunks: the cost follows the rated tasks, not
    the pool (a panel-scale pool has 1,000,000 tasks, of which 160,000 rated).
    """
    ids = sorted(int(t) for t in pd.unique(frame[C.task])) if len(frame) else []
    planned: dict[int, int] = {}
    with read_session(engine) as session:
        study = get_study_row(session, study_name)
        for start in range(0, len(ids), _ID_CHUNK):
            rows = session.exec(
                select(Task.id, Task.target_raters).where(
                    Task.id.in_(ids[start : start + _ID_CHUNK]), Task.study_id == study.id, Task.target_raters > 1
                )
            ).all()
            planned.update((int(task), int(target)) for task, target in rows)
    if not planned:
        return np.ones(len(frame), dtype=np.int64)
    return pd.Series(planned, dtype=np.int64).reindex(frame[C.task].to_numpy(), fill_value=1).to_numpy()


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
    options: AnalysisOptions = field(default_factory=AnalysisOptions)
    harm_input: pd.DataFrame | None = None  # harm_model_data: one row per classified Rubric B annotation
    first_model: str | None = None
    scope: TaskScope | None = None  # which tasks the numbers use (the pages say it; not part of the export)

    def agreement_frame(self) -> pd.DataFrame:
        """One row per rubric and score: the coefficient, SE, CI, alpha, percent agreement, n."""
        return agreement_frame(self.agreement)

    def agreement_result(self) -> StudyAgreement:
        """The agreement of these numbers as the Agreement page's result type (default weights and minimum
        ratings: the export's agreement table), for pages that show it beside the other analyses."""
        skipped = tuple(n for n in self.notes if n.startswith("agreement "))
        return StudyAgreement(self.study, self.agreement, skipped, AGREEMENT_WEIGHTS, MIN_RATINGS)

    def factor_levels(self) -> dict[str, list[str]]:
        """Levels of each harm-model factor among the annotations that enter the model (for pickers)."""
        if self.harm_input is None:
            return {}
        used = self.harm_input.loc[self.harm_input["in_model"].astype(bool)]
        return {c: sorted(used[c].dropna().astype(str).unique()) for c in HARM_MODEL_FIXED}

    def default_references(self) -> dict[str, str]:
        """The reference each factor takes when the lead sets none: the paper's, and the study's first model."""
        if self.harm_input is None:
            return {}
        used = self.harm_input.loc[self.harm_input["in_model"].astype(bool)]
        return harm_model_references(used, first_model=self.first_model)[0]

    def warnings(self) -> list[str]:
        """Warnings of every analysis, prefixed with where they come from."""
        out = []
        for key, report in self.agreement.items():
            out += [f"agreement {key}/{r.score}: {w}" for r in report.results for w in r.warnings]
        for name, result in (("rubric A", self.rubric_a), ("rubric B", self.rubric_b), ("harm model", self.harm_model)):
            if result is not None:
                out += [f"{name}: {w}" for w in result.warnings]
        return out


def agreement_frame(reports: dict[str, AgreementReport]) -> pd.DataFrame:
    """One row per rubric and score of ``reports`` (the dashboard's and the export's agreement table)."""
    frames = []
    for key, report in reports.items():
        frame = report.to_frame().reset_index()
        if frame.empty:
            continue
        rubric = get_rubric(key)
        names = {d.key: d.reported_name for d in rubric.dimensions} | BINARY_SCORE_NAMES
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


def _category_order(column: str) -> float:
    return float(column.removeprefix("n_score_"))


def agreement_reports(
    annotations: pd.DataFrame,
    rubric_keys: list[str],
    *,
    weights: str = AGREEMENT_WEIGHTS,
    min_ratings: int = MIN_RATINGS,
) -> tuple[dict[str, AgreementReport], list[str]]:
    """Agreement per rubric (AC1 on Rubric B's binary outcomes whatever ``weights``), and skip notes."""
    if weights not in WEIGHT_SCHEMES:
        raise InvalidInput(f"unknown weights {weights!r}; choose one of {', '.join(WEIGHT_SCHEMES)}")
    notes: list[str] = []
    reports: dict[str, AgreementReport] = {}
    for key in rubric_keys:
        rows = select_rubric(annotations, key)
        if rows.empty:
            notes.append(f"agreement for rubric {key} skipped: no annotations yet")
            continue
        if key == "B":
            reports[key] = rubric_b_agreement(rows, weights=weights, min_ratings=min_ratings)
        else:
            reports[key] = agreement_report(rows, key, weights=weights, min_ratings=min_ratings)
    return reports, notes


def analyse(
    annotations: pd.DataFrame,
    rubric_keys: list[str],
    *,
    study: str = "",
    n_boot: int = DEFAULT_N_BOOT,
    seed: int = 0,
    options: AnalysisOptions | None = None,
    first_model: str | None = None,
    agreement: tuple[dict[str, AgreementReport], list[str]] | None = None,
) -> StudyAnalysis:
    """Run the standard analyses on a frame in the export layout (pure: no database).

    ``agreement`` is :func:`agreement_reports` of the same frame under the defaults when the caller
    has it already (the Agreement page's cached default view), so it is not computed twice.
    """
    options = options or AnalysisOptions()
    agreement, notes = agreement if agreement is not None else agreement_reports(annotations, rubric_keys)
    notes = list(notes)
    rubric_a = rubric_b = harm = harm_input = None
    if "A" in rubric_keys:
        try:
            rubric_a = summarise_rubric_a(annotations, n_boot=n_boot, seed=seed)
        except AnalysisInputError as error:
            notes.append(f"rubric A summary skipped: {error}")
    if "B" in rubric_keys:
        try:
            rubric_b = summarise_rubric_b(annotations, tie_rule=options.tie_rule)
        except AnalysisInputError as error:
            notes.append(f"rubric B summary skipped: {error}")
        fitted = harm_model(annotations, options.harm_spec(first_model))
        harm, harm_input = fitted.result, fitted.data
        if fitted.note:
            notes.append(fitted.note)
    penalty = Penalty.parse(options.penalty)
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
            "agreement_ci": "Gwet linearisation variance, Student-t interval (irrCAC), clipped to [-1, 1]",
            "min_ratings_for_agreement": MIN_RATINGS,
            "bootstrap_n": n_boot,
            "bootstrap_seed": seed,
            "mean_reviewer_tie_rule": options.tie_rule,
            "harm_model": "worst_case ~ model + content_type + provenance + stratum + (1 | rater), Laplace, "
            + penalty.label,
            "harm_model_penalty": penalty.key,
            "harm_model_reference_choices": dict(options.references),
            "harm_model_unrated_items": options.unrated,
            "min_harm_model_annotations": MIN_HARM_MODEL_ANNOTATIONS,
        },
        options=options,
        harm_input=harm_input,
        first_model=first_model,
    )


def harm_model(annotations: pd.DataFrame, spec: HarmModelSpec) -> StudyHarmModel:
    """A study's harm model on its annotations in force, as the Analysis page fits it (pure: no database).

    Skipped, with the reason in ``note``, when the data cannot support it: no Rubric B annotations,
    fewer than :data:`MIN_HARM_MODEL_ANNOTATIONS` that can enter the model, a single reviewer, or a
    fit that fails. Reviewer severity and a pilot's power plan take the model from here, so they
    use the Analysis page's model and options.
    """
    rows = select_rubric(annotations, "B")
    if rows.empty:
        return StudyHarmModel(spec, note="harm model skipped: no rubric B annotations yet")
    data = annotations if CLARITY in annotations.columns else annotations.assign(**{CLARITY: np.nan})
    try:
        table = spec.data(data)
    except AnalysisInputError as error:
        return StudyHarmModel(spec, note=f"harm model skipped: {error}")
    used = table.loc[table["in_model"]]
    if len(used) < MIN_HARM_MODEL_ANNOTATIONS:
        return StudyHarmModel(
            spec,
            table,
            note=(
                f"harm model skipped: {len(used)} classified rubric B annotation(s) can enter the model, "
                f"at least {MIN_HARM_MODEL_ANNOTATIONS} are needed"
            ),
        )
    if used[C.rater].nunique() < 2:
        return StudyHarmModel(
            spec,
            table,
            note="harm model skipped: the reviewer random intercept needs annotations from two or more reviewers",
        )
    try:
        result = spec.fit(table)
    except (AnalysisInputError, np.linalg.LinAlgError) as error:
        return StudyHarmModel(spec, table, note=f"harm model skipped: {error}")
    return StudyHarmModel(spec, table, result)


def study_analysis(
    engine: Engine,
    study_name: str,
    *,
    pseudonymise: bool = True,
    n_boot: int = DEFAULT_N_BOOT,
    seed: int = 0,
    options: AnalysisOptions | None = None,
    pending: str = "include",
) -> StudyAnalysis:
    """The standard analyses of a study on its annotations in force (what the dashboard shows).

    ``options`` default to the ones saved with the study. ``pending="exclude"`` leaves the pending
    tasks out (:data:`PENDING_RULE`), as the export does by default.
    """
    check_pending(pending)
    with read_session(engine) as session:
        study = get_study_row(session, study_name)
        rubrics = study.rubric_keys
        saved = AnalysisOptions.from_settings(study.settings)
        model = first_model(session, study.id)
    frame = annotations_frame(engine, study_name, pseudonymise=pseudonymise)
    targets = planned_raters(engine, study_name, frame) if pending == "exclude" else None
    frame, scope = scoped(frame, targets, pending)
    analysis = analyse(
        frame, rubrics, study=study_name, n_boot=n_boot, seed=seed, options=options or saved, first_model=model
    )
    return replace(analysis, scope=scope)


@dataclass(frozen=True, eq=False)
class StudyAgreement:
    """Agreement of a study under chosen weights and minimum ratings (the Agreement page's options)."""

    study: str
    reports: dict[str, AgreementReport]
    notes: tuple[str, ...]
    weights: str
    min_ratings: int
    _frame: pd.DataFrame | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        # Built where the reports are computed (a compute worker), so the Agreement page's reruns in the
        # app do not rebuild it: the app's Python time is what reviewers in the same process wait for.
        if self._frame is None:
            object.__setattr__(self, "_frame", agreement_frame(self.reports))

    def frame(self) -> pd.DataFrame:
        """:func:`agreement_frame` of the reports (a copy: the result is shared by every session)."""
        return self._frame.copy()
