"""The standard analyses of one study, computed once for the dashboard, the analysis page and the export.

Every number comes from :func:`review_app.services.annotations.annotations_frame` through the
analysis package, with the same options everywhere (ordinal AC2 with analytic Gwet CIs, AC1 for
Rubric B's worst-case class and correctness, a seeded task-clustered bootstrap for Rubric A means),
so the agreement a lead reads on the dashboard is the agreement the export writes.

The lead's analysis choices (:class:`AnalysisOptions`: harm-model reference levels, the
mean-reviewer tie rule, whether items without a clarity score enter the harm model as a level, and
the opt-in penalised fit) are stored with the study (``Study.settings["analysis"]``), so the
analysis page and the export use the same ones; defaults are the paper's.

Which tasks enter the numbers is the lead's other choice (``pending``): a task is pending while it
has fewer annotations in force than planned raters (:data:`PENDING_RULE`). The export leaves pending
tasks out unless the lead includes them, and the Analysis page offers the same choice with the same
default; both select the tasks with :func:`leave_out_pending` and compute with :func:`analyse`, so
one choice gives one set of numbers on both.

An analysis that the data cannot support yet (no Rubric A scores, no worst-case event, too few
annotations for the harm model) is skipped with a note saying why, never filled with nonsense.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from typing import Any

import numpy as np
import pandas as pd
from sqlalchemy import Engine
from sqlmodel import Session, select

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
from review_app.analysis.rubric_a import COMPOSITE
from review_app.analysis.rubric_b import (
    CLARITY,
    DEFAULT_TIE_RULE,
    HARM_MODEL_FIXED,
    TIE_RULES,
    UNRATED_CHOICES,
    HarmModelSpec,
    StudyHarmModel,
    harm_model_references,
)
from review_app.db.engine import read_session, write_session
from review_app.db.models import ModelResponse, Reviewer, Study, Task
from review_app.rubrics import get_rubric
from review_app.services import audit, compute_workers
from review_app.services.actors import Actor, acting_user, as_actor, require_study_lead
from review_app.services.annotations import annotations_frame, get_study_row
from review_app.services.errors import InvalidInput, PermissionDenied, SessionEnded
from review_app.services.study_cache import CACHE, study_frame, version_in
from review_app.services.study_cache import data_version as data_version  # re-exported (older callers)

AGREEMENT_WEIGHTS = "ordinal"
MIN_RATINGS = 2
DEFAULT_N_BOOT = 2000
# Below this many classified Rubric B annotations a model with model, content type, provenance and
# clarity terms (8+ coefficients) has too few events per parameter to be worth reporting.
MIN_HARM_MODEL_ANNOTATIONS = 20
BINARY_SCORE_NAMES = {"worst_case": "Worst-case outcome class (AC1)", "correct": "Correct final answer (AC1)"}
SETTINGS_KEY = "analysis"
LEAD_ROLES = ("lead", "admin")
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


@dataclass(frozen=True)
class AnalysisOptions:
    """A study's analysis choices; the defaults reproduce the paper's analysis.

    ``references`` holds only the levels the lead chose (factor -> level); every other factor takes
    the paper's reference (cue remapping, neutral, clear, the study's first model). ``tie_rule`` breaks
    mean-reviewer ties (``less_safe``, ``safer`` or ``exclude``). ``unrated``: ``exclude`` leaves
    annotations on items without a clarity score out of the harm model (counted), ``level`` keeps
    them as a clarity level. ``penalty``: ``none`` (maximum likelihood) or a prior such as ``normal``.
    """

    references: dict[str, str] = field(default_factory=dict)
    tie_rule: str = DEFAULT_TIE_RULE
    unrated: str = "exclude"
    penalty: str = "none"

    def __post_init__(self) -> None:
        unknown = sorted(set(self.references) - set(HARM_MODEL_FIXED))
        if unknown:
            raise InvalidInput(
                f"reference level set for {', '.join(unknown)}; the harm model's factors are "
                f"{', '.join(HARM_MODEL_FIXED)}"
            )
        if any(not isinstance(v, str) or not v.strip() for v in self.references.values()):
            raise InvalidInput("a reference level must be a non-empty level name")
        if self.tie_rule not in TIE_RULES:
            raise InvalidInput(f"unknown tie rule {self.tie_rule!r}; choose one of {', '.join(TIE_RULES)}")
        if self.unrated not in UNRATED_CHOICES:
            raise InvalidInput(
                f"unknown handling of unrated items {self.unrated!r}; choose {', '.join(UNRATED_CHOICES)}"
            )
        try:
            canonical = Penalty.parse(self.penalty).key
        except AnalysisInputError as error:
            raise InvalidInput(str(error)) from None
        object.__setattr__(self, "penalty", canonical)
        object.__setattr__(self, "references", {k: v.strip() for k, v in sorted(self.references.items())})

    @classmethod
    def from_settings(cls, settings: dict[str, Any] | None) -> AnalysisOptions:
        """The options stored in a study's settings (defaults when none were saved)."""
        stored = dict((settings or {}).get(SETTINGS_KEY) or {})
        known = {k: stored[k] for k in ("references", "tie_rule", "unrated", "penalty") if k in stored}
        return cls(**known)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def key(self) -> str:
        """A stable text form (cache keys)."""
        return json.dumps(self.to_dict(), sort_keys=True)

    def harm_spec(self, first_model: str | None) -> HarmModelSpec:
        """The harm-model spec these options give a study whose first model is ``first_model``."""
        return HarmModelSpec(dict(self.references), first_model, self.unrated, self.penalty)


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


def first_model(session: Session, study_id: int) -> str | None:
    """The study's first model: the model of the earliest imported response among its tasks.

    It is the harm model's default reference for the model term (the paper lists its models in
    import order and compares against the first), settable by the lead.
    """
    # Responses in id order, each probing its tasks (ix_task_response_id) until one is the study's:
    # a join sorted 1,000,000 tasks' responses (0.37 s on every lead rerun).
    of_study = select(Task.id).where(Task.response_id == ModelResponse.id, Task.study_id == study_id).exists()
    return session.exec(select(ModelResponse.model).where(of_study).order_by(ModelResponse.id).limit(1)).first()


def harm_spec(session: Session, study: Study) -> HarmModelSpec:
    """The harm-model spec of a study: its saved analysis options and its first model."""
    return AnalysisOptions.from_settings(study.settings).harm_spec(first_model(session, study.id))


def analysis_options(engine: Engine, study_name: str) -> AnalysisOptions:
    """The analysis choices saved for a study (the paper's defaults when none were saved)."""
    with read_session(engine) as session:
        return AnalysisOptions.from_settings(get_study_row(session, study_name).settings)


def save_analysis_options(
    engine: Engine,
    study_name: str,
    options: AnalysisOptions,
    *,
    actor: Actor | Reviewer | int | None = None,
    actor_id: int | None = None,
) -> AnalysisOptions:
    """Store a study's analysis choices (a lead of the study, or an admin); audited with the before and after.

    ``actor_id=`` is the older spelling of ``actor=`` (an account id).
    """
    if actor is None and actor_id is None:
        raise TypeError("pass actor= (the signed-in user, or actors.SYSTEM on the command line)")
    acting = as_actor(actor if actor is not None else actor_id)
    with write_session(engine) as session:
        try:
            me = acting_user(session, acting, roles=LEAD_ROLES)
        except SessionEnded:
            raise
        except PermissionDenied:
            raise PermissionDenied("only an active study lead or admin can change the analysis settings") from None
        study = get_study_row(session, study_name)
        require_study_lead(session, me, study)
        before = AnalysisOptions.from_settings(study.settings)
        settings = dict(study.settings)
        settings[SETTINGS_KEY] = options.to_dict()
        study.settings = settings
        session.add(study)
        audit.record(
            session,
            actor_id=me.id if me is not None else None,
            action="study.analysis_options",
            entity="study",
            entity_id=study.id,
            study_id=study.id,
            before=before.to_dict(),
            after=options.to_dict(),
        )
    return options


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


def study_agreement(
    engine: Engine, study_name: str, *, weights: str = AGREEMENT_WEIGHTS, min_ratings: int = MIN_RATINGS
) -> StudyAgreement:
    """Agreement on a study's annotations in force with the given weights and minimum ratings per task."""
    check_agreement_options(weights, min_ratings)
    with read_session(engine) as session:
        rubrics = get_study_row(session, study_name).rubric_keys
    frame = annotations_frame(engine, study_name)
    reports, notes = agreement_reports(frame, rubrics, weights=weights, min_ratings=int(min_ratings))
    return StudyAgreement(study_name, reports, tuple(notes), weights, int(min_ratings))


def _study_facts(
    engine: Engine, study_name: str
) -> tuple[list[str], AnalysisOptions, str | None, tuple[int, ...]]:
    """The study's rubrics, saved analysis options, first model and data version (one short read)."""
    with read_session(engine) as session:
        study = get_study_row(session, study_name)
        options = AnalysisOptions.from_settings(study.settings)
        return study.rubric_keys, options, first_model(session, study.id), version_in(session, study)


def check_agreement_options(weights: str, min_ratings: int) -> None:
    """Refuse weights medrev does not know and a minimum number of ratings that is not a whole number >= 1."""
    if isinstance(min_ratings, bool) or int(min_ratings) != min_ratings or min_ratings < 1:
        raise InvalidInput(f"the minimum number of ratings must be a whole number of at least 1 (got {min_ratings})")
    if weights not in WEIGHT_SCHEMES:
        raise InvalidInput(f"unknown weights {weights!r}; choose one of {', '.join(WEIGHT_SCHEMES)}")


def rubrics_and_version(engine: Engine, study_name: str) -> tuple[list[str], tuple[int, ...]]:
    """The study's rubrics and data version in one short read (the Agreement page's per-rerun read:
    one session and two statements instead of two sessions and ten)."""
    with read_session(engine) as session:
        study = get_study_row(session, study_name)
        return study.rubric_keys, version_in(session, study)


def agreement_of_version(
    engine: Engine, study_name: str, version: tuple[int, ...], rubrics: list[str], weights: str, min_ratings: int
) -> StudyAgreement:
    """Agreement on the study's frame of ``version``, computed once per version in this process.

    Called in the compute worker by the jobs that need it (the Analysis page's, with the default
    weights, and the Agreement page's in :mod:`review_app.services.paper_tables`), so a lead who opens
    Agreement and then Analysis has the agreement computed once. Its own cache key: the app's caller
    holds the lock of its key while the job runs, and with no worker (``MEDREV_COMPUTE_WORKERS=0``) the
    job runs in the app.
    """

    def compute(version: tuple[int, ...]) -> StudyAgreement:
        frame = study_frame(engine, study_name, version=version)
        reports, notes = agreement_reports(frame, rubrics, weights=weights, min_ratings=min_ratings)
        return StudyAgreement(study_name, reports, tuple(notes), weights, min_ratings)

    return CACHE.get(engine, study_name, ("agreement_of_version", weights, min_ratings), compute, version=version)


def cached_analysis(engine: Engine, study_name: str, *, pending: str = "include") -> StudyAnalysis:
    """The study's standard analyses under its saved options, without bootstrap intervals.

    ``pending``: the task choice (:data:`PENDING_CHOICES`); ``exclude`` leaves the pending tasks out as
    the export does by default (same selection, :func:`leave_out_pending`, and same :func:`analyse`).

    Computed once per data version and options (in a compute worker), one copy shared by every
    session (see :mod:`review_app.services.study_cache`). The Rubric A bootstrap is left out (its
    intervals are ``None``): it is the slow part and is computed only where it is shown, by
    :func:`cached_rubric_a_intervals`. Its agreement (default weights) is computed once per version
    in the worker, shared with the Agreement page's (:func:`agreement_of_version`).
    The result's ``annotations`` has the frame's columns but no rows: the page does not show
    them, and the app process must not hold the frame (:func:`study_analysis` gives it whole).
    """
    check_pending(pending)
    rubrics, options, model, version = _study_facts(engine, study_name)

    def compute(version: tuple[int, ...]) -> StudyAnalysis:
        return compute_workers.run(engine, _analysis_job, study_name, version, rubrics, options, model, pending)

    # leaving pending tasks out reads the tasks' planned raters: filed only under the version they were read at
    return CACHE.get(
        engine,
        study_name,
        ("analysis", options.key(), model, pending),
        compute,
        current_version=version,
        reads_database=pending == "exclude",
    )


def _scoped_frame(
    engine: Engine, study_name: str, version: tuple[int, ...], pending: str
) -> tuple[pd.DataFrame, TaskScope]:
    """The shared frame of ``version`` as the task choice ``pending`` selects it (a compute-worker step)."""
    frame = study_frame(engine, study_name, version=version)
    targets = planned_raters(engine, study_name, frame) if pending == "exclude" else None
    return scoped(frame, targets, pending)


def _analysis_job(
    engine: Engine,
    study_name: str,
    version: tuple[int, ...],
    rubrics: list[str],
    options: AnalysisOptions,
    model: str | None,
    pending: str = "include",
) -> StudyAnalysis:
    """:func:`analyse` without bootstrap on the frame of ``version``, returned as the app keeps it.

    The app keeps one copy per data version, shown by the Analysis page: without the frame's rows,
    the Rubric B per-task table and the automatic label's disagreement rows (no page shows them),
    with the Rubric A per-task means reduced to the composite (the task count the page shows) and
    the harm model's input to the factor columns and ``in_model`` (the page's reference pickers and
    its left-out count). Those rows were 15 MB of the app process at 200,000 annotations.
    """
    frame, scope = _scoped_frame(engine, study_name, version, pending)
    agreement = None
    if scope.left_out_annotations == 0:  # the whole frame: its agreement is the Agreement page's default one
        default = agreement_of_version(engine, study_name, version, rubrics, AGREEMENT_WEIGHTS, MIN_RATINGS)
        agreement = (default.reports, list(default.notes))
    analysis = analyse(
        frame, rubrics, study=study_name, n_boot=0, options=options, first_model=model, agreement=agreement
    )
    rubric_a, rubric_b = analysis.rubric_a, analysis.rubric_b
    if rubric_a is not None:
        rubric_a = replace(rubric_a, per_task=rubric_a.per_task[[COMPOSITE]].copy())
    if rubric_b is not None:
        auto = rubric_b.auto_label
        if auto is not None:
            auto = replace(auto, disagreements=auto.disagreements.iloc[:0].copy())
        rubric_b = replace(rubric_b, tasks=rubric_b.tasks.iloc[:0].copy(), auto_label=auto)
    harm_input = analysis.harm_input
    if harm_input is not None:
        harm_input = harm_input[[*HARM_MODEL_FIXED, "in_model"]].copy()
    return replace(
        analysis,
        annotations=frame.iloc[:0].copy(),
        rubric_a=rubric_a,
        rubric_b=rubric_b,
        harm_input=harm_input,
        scope=scope,
    )


def cached_rubric_a_intervals(
    engine: Engine,
    study_name: str,
    *,
    n_boot: int = DEFAULT_N_BOOT,
    seed: int = 0,
    progress: Callable[[float], None] | None = None,
    pending: str = "include",
) -> RubricASummary | None:
    """The Rubric A summary with its task-clustered bootstrap intervals, once per data version.

    Only pages that show the intervals ask for them; ``progress`` is called with the fraction of
    resamples done (the page's progress bar; the resamples run in a compute worker, which reports
    its progress back). None when the study has no Rubric A annotations. ``pending``: the task
    choice, as in :func:`cached_analysis`.
    """
    check_pending(pending)
    rubrics, version = rubrics_and_version(engine, study_name)
    if "A" not in rubrics:
        return None

    def compute(version: tuple[int, ...]) -> RubricASummary | None:
        return compute_workers.run(
            engine, _rubric_a_job, study_name, version, n_boot, seed, progress=progress, pending=pending
        )

    return CACHE.get(
        engine,
        study_name,
        ("rubric_a_bootstrap", n_boot, seed, pending),
        compute,
        current_version=version,
        reads_database=pending == "exclude",
    )


def _rubric_a_job(
    engine: Engine,
    study_name: str,
    version: tuple[int, ...],
    n_boot: int,
    seed: int,
    progress: Callable[[float], None] | None = None,
    pending: str = "include",
) -> RubricASummary | None:
    """The bootstrapped Rubric A summary of the frame of ``version`` (None: no Rubric A annotations)."""
    frame, _scope = _scoped_frame(engine, study_name, version, pending)
    try:
        return summarise_rubric_a(frame, n_boot=n_boot, seed=seed, progress=progress)
    except AnalysisInputError:
        return None
