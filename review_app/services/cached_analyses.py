"""The lead pages' analyses, computed in a compute worker once per data version and shared by every session.

The Analysis page's standard analyses (:func:`cached_analysis`, without the Rubric A bootstrap), the
bootstrap intervals where they are shown (:func:`cached_rubric_a_intervals`) and agreement under the
Agreement page's weights (:func:`agreement_of_version`, shared by both pages) are jobs for
:mod:`review_app.services.compute_workers`: the frame is read and the numbers computed in the worker,
and the app keeps one reduced copy per data version (:mod:`review_app.services.study_cache`), so a
page rerun costs the app a cache lookup and reviewers in the same process do not wait for statistics.
The numbers are :func:`review_app.services.study_analysis.analyse`'s, the same as the export's.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

import pandas as pd
from sqlalchemy import Engine

from review_app.analysis import AnalysisInputError, RubricASummary, summarise_rubric_a
from review_app.analysis.agreement import WEIGHT_SCHEMES
from review_app.analysis.rubric_a import COMPOSITE
from review_app.analysis.study_harm_model import HARM_MODEL_FIXED
from review_app.db.engine import read_session
from review_app.services import compute_workers
from review_app.services.actors import SYSTEM, Actor
from review_app.services.analysis_options import AnalysisOptions, first_model
from review_app.services.annotations import annotations_frame, get_study_row
from review_app.services.errors import InvalidInput
from review_app.services.studies import check_lead_of, lead_of
from review_app.services.study_analysis import (
    AGREEMENT_WEIGHTS,
    DEFAULT_N_BOOT,
    MIN_RATINGS,
    StudyAgreement,
    StudyAnalysis,
    TaskScope,
    agreement_reports,
    analyse,
    check_pending,
    planned_raters,
    scoped,
)
from review_app.services.study_cache import CACHE, version_in
from review_app.services.study_frames import study_frame


def study_agreement(
    engine: Engine,
    study_name: str,
    *,
    weights: str = AGREEMENT_WEIGHTS,
    min_ratings: int = MIN_RATINGS,
    actor: Actor = SYSTEM,
) -> StudyAgreement:
    """Agreement on a study's annotations in force with the given weights and minimum ratings per task
    (for a lead of the study or an admin: ``actor``)."""
    check_agreement_options(weights, min_ratings)
    with read_session(engine) as session:
        study = get_study_row(session, study_name)
        lead_of(session, actor, study)
        rubrics = study.rubric_keys
    frame = annotations_frame(engine, study_name)
    reports, notes = agreement_reports(frame, rubrics, weights=weights, min_ratings=int(min_ratings))
    return StudyAgreement(study_name, reports, tuple(notes), weights, int(min_ratings))


def _study_facts(
    engine: Engine, study_name: str, actor: Actor
) -> tuple[list[str], AnalysisOptions, str | None, tuple[int, ...]]:
    """The study's rubrics, saved analysis options, first model and data version (one short read),
    once ``actor`` is seen to lead the study."""
    with read_session(engine) as session:
        study = get_study_row(session, study_name)
        lead_of(session, actor, study)
        options = AnalysisOptions.from_settings(study.settings)
        return study.rubric_keys, options, first_model(session, study.id), version_in(session, study)


def check_agreement_options(weights: str, min_ratings: int) -> None:
    """Refuse weights medrev does not know and a minimum number of ratings that is not a whole number >= 1."""
    if isinstance(min_ratings, bool) or int(min_ratings) != min_ratings or min_ratings < 1:
        raise InvalidInput(f"the minimum number of ratings must be a whole number of at least 1 (got {min_ratings})")
    if weights not in WEIGHT_SCHEMES:
        raise InvalidInput(f"unknown weights {weights!r}; choose one of {', '.join(WEIGHT_SCHEMES)}")


def rubrics_and_version(
    engine: Engine, study_name: str, *, actor: Actor = SYSTEM
) -> tuple[list[str], tuple[int, ...]]:
    """The study's rubrics and data version in one short read (the Agreement page's per-rerun read:
    one session and two statements instead of two sessions and ten), for a lead of the study."""
    with read_session(engine) as session:
        study = get_study_row(session, study_name)
        lead_of(session, actor, study)
        return study.rubric_keys, version_in(session, study)


def agreement_of_version(
    engine: Engine,
    study_name: str,
    version: tuple[int, ...],
    rubrics: list[str],
    weights: str,
    min_ratings: int,
    *,
    actor: Actor = SYSTEM,
) -> StudyAgreement:
    """Agreement on the study's frame of ``version``, computed once per version in this process.

    Called in the compute worker by the jobs that need it (the Analysis page's, with the default
    weights, and the Agreement page's in :mod:`review_app.services.export.agreement_page`), so a lead who opens
    Agreement and then Analysis has the agreement computed once. Its own cache key: the app's caller
    holds the lock of its key while the job runs, and with no worker (``MEDREV_COMPUTE_WORKERS=0``) the
    job runs in the app. ``actor`` is checked before the cache is read (the jobs run as the system).
    """
    check_lead_of(engine, study_name, actor=actor)

    def compute(version: tuple[int, ...]) -> StudyAgreement:
        frame = study_frame(engine, study_name, version=version)
        reports, notes = agreement_reports(frame, rubrics, weights=weights, min_ratings=min_ratings)
        return StudyAgreement(study_name, reports, tuple(notes), weights, min_ratings)

    return CACHE.get(engine, study_name, ("agreement_of_version", weights, min_ratings), compute, version=version)


def cached_analysis(
    engine: Engine, study_name: str, *, pending: str = "include", actor: Actor = SYSTEM
) -> StudyAnalysis:
    """The study's standard analyses under its saved options, without bootstrap intervals.

    ``pending``: the task choice (:data:`~study_analysis.PENDING_CHOICES`); ``exclude`` leaves the pending
    tasks out as the export does by default (same selection, :func:`~study_analysis.leave_out_pending`,
    and same :func:`~study_analysis.analyse`).

    Computed once per data version and options (in a compute worker), one copy shared by every
    session (see :mod:`review_app.services.study_cache`). The Rubric A bootstrap is left out (its
    intervals are ``None``): it is the slow part and is computed only where it is shown, by
    :func:`cached_rubric_a_intervals`. Its agreement (default weights) is computed once per version
    in the worker, shared with the Agreement page's (:func:`agreement_of_version`).
    The result's ``annotations`` has the frame's columns but no rows: the page does not show
    them, and the app process must not hold the frame (:func:`~study_analysis.study_analysis` gives it whole).
    Only for a lead of the study or an admin (``actor``), checked before the cache is read.
    """
    check_pending(pending)
    rubrics, options, model, version = _study_facts(engine, study_name, actor)

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
    """:func:`~study_analysis.analyse` without bootstrap on the frame of ``version``, returned as the app keeps it.

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
    actor: Actor = SYSTEM,
) -> RubricASummary | None:
    """The Rubric A summary with its task-clustered bootstrap intervals, once per data version.

    Only pages that show the intervals ask for them; ``progress`` is called with the fraction of
    resamples done (the page's progress bar; the resamples run in a compute worker, which reports
    its progress back). None when the study has no Rubric A annotations. ``pending``: the task
    choice, as in :func:`cached_analysis`; ``actor``: a lead of the study or an admin, checked before
    the cache is read.
    """
    check_pending(pending)
    rubrics, version = rubrics_and_version(engine, study_name, actor=actor)
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
