"""Study plans: run a plan (optionally from a pilot study), keep it with the study, check the pool against it.

The statistics live in :mod:`review_app.analysis.planning`; this module reads a pilot study's
annotations in force (gold tasks left out, as in every analysis) into what those functions take,
stores plans in the study's settings (one per metric, audited, leads only) and compares the drawn
pool and its dual-rated share with them for the Study set-up page.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd
from sqlalchemy import Engine, case, func
from sqlmodel import select

from review_app.analysis.layout import DEFAULT_COLUMNS as C
from review_app.analysis.layout import AnalysisInputError, select_rubric
from review_app.analysis.planning import (
    DEFAULT_DUAL_SHARE,
    METRICS,
    HarmPilot,
    Plan,
    combine,
    default_workers,
    plan_ac2,
    plan_harm_or,
    plan_rate,
)
from review_app.analysis.rubric_b import classify_annotations, task_outcomes
from review_app.db.engine import read_session, write_session
from review_app.db.models import Assignment, GoldTask, Study, Task
from review_app.rubrics import get_rubric
from review_app.services import audit
from review_app.services.actors import Actor, require_study_lead
from review_app.services.annotations import annotations_frame, get_study_row
from review_app.services.errors import InvalidInput, NotFound
from review_app.services.quality import require_lead
from review_app.services.study_analysis import harm_model, harm_spec
from review_app.services.study_cache import CACHE

SETTINGS_KEY = "plans"
DEFAULT_AC2_SCORE = "harm_potential"


@dataclass(frozen=True)
class PlanRequest:
    """Everything ``medrev stats plan`` and the Plan page ask for (see the analysis functions)."""

    metric: str
    expected: float | None = None
    ci_width: float | None = None
    categories: int = 3
    raters: int = 2
    odds_ratio: float | None = None
    power: float = 0.8
    reviewers: int | None = None
    icc: float | None = None
    pilot: str | None = None
    score: str | None = None
    term: str | None = None
    tasks: int | None = None
    dual_share: float | None = None
    share: float = 0.5
    alpha: float = 0.05
    seconds_per_rating: float | None = None
    simulations: int | None = None
    seed: int = 0
    workers: int | None = None


def _pilot_frame(engine: Engine, study: str) -> pd.DataFrame:
    frame = annotations_frame(engine, study)
    if frame.empty:
        raise InvalidInput(f"pilot study {study!r} has no submitted annotations yet")
    return frame


def _median_seconds(frame: pd.DataFrame, rubric: str) -> float | None:
    seconds = select_rubric(frame, rubric)["seconds_on_task"]
    seconds = seconds[seconds > 0]
    return float(seconds.median()) if len(seconds) else None


def pilot_outcomes(frame: pd.DataFrame) -> np.ndarray:
    """Conservative worst-case outcome (0/1) per Rubric B task of a pilot (the paper's primary rate)."""
    classified = classify_annotations(frame)
    tasks = task_outcomes(classified)
    if tasks.empty:
        raise InvalidInput("the pilot has no Rubric B task with correctness, uptake and harm scored")
    return tasks["worst_case_conservative"].astype(int).to_numpy()


def pilot_ratings(frame: pd.DataFrame, score: str) -> tuple[pd.DataFrame, tuple[int, ...], str]:
    """(task_id, rater, score) rows of one dimension of a pilot, its categories and its rubric key."""
    for key in dict.fromkeys(frame[C.rubric].astype(str)):
        rubric = get_rubric(key)
        if score in rubric.dimension_keys:
            rows = select_rubric(frame, key)
            ratings = pd.DataFrame(
                {"task_id": rows[C.task].to_numpy(), "rater": rows[C.rater].to_numpy(), "score": rows[score].to_numpy()}
            ).dropna()
            return ratings, rubric.dimension(score).values, key
    dims = sorted({d for key in frame[C.rubric].astype(str).unique() for d in get_rubric(key).dimension_keys})
    raise InvalidInput(f"the pilot has no dimension {score!r}; its dimensions: {', '.join(dims)}")


def harm_pilot(engine: Engine, study: str, frame: pd.DataFrame, term: str | None) -> HarmPilot:
    """The pilot's harm model as its Analysis page fits it (saved options, first model), ready for a simulation.

    ``frame`` is the pilot's annotations in force. Refused, with the Analysis page's reason, when the
    pilot has no harm model.
    """
    with read_session(engine) as session:
        spec = harm_spec(session, get_study_row(session, study))
    fitted = harm_model(frame, spec)
    if fitted.result is None or fitted.data is None:
        reason = (fitted.note or "it cannot be fitted").removeprefix("harm model skipped: ")
        raise InvalidInput(f"the pilot {study!r} has no harm model to plan from: {reason}")
    return HarmPilot.from_fit(fitted.data, fitted.result, task=C.task, term=term)


def make_plan(
    engine: Engine | None,
    request: PlanRequest,
    *,
    progress: Callable[[int, int], None] | None = None,
) -> Plan:
    """Run the plan ``request`` describes; a pilot study is read from ``engine``.

    Raises ``InvalidInput`` (a ServiceError) for anything the lead must change, so the CLI prints
    one line and the page one message.
    """
    if request.metric not in METRICS:
        raise InvalidInput(f"unknown metric {request.metric!r}; choose one of {', '.join(METRICS)}")
    workers = request.workers or default_workers()
    frame = None
    if request.pilot:
        if engine is None:
            raise InvalidInput("a pilot study needs the review database")
        frame = _pilot_frame(engine, request.pilot)
    seconds = request.seconds_per_rating
    common: dict[str, Any] = {"seed": request.seed, "workers": workers, "progress": progress}
    try:
        if request.metric == "rate":
            if request.ci_width is None:
                raise InvalidInput("a rate plan needs the target CI width (--ci-width)")
            outcomes = pilot_outcomes(frame) if frame is not None else None
            if frame is not None and seconds is None:
                seconds = _median_seconds(frame, "B")
            return plan_rate(
                request.expected,
                request.ci_width,
                pilot_outcomes=outcomes,
                dual_share=request.dual_share or 0.0,
                raters=request.raters,
                seconds_per_rating=seconds,
                simulations=request.simulations or 2000,
                **common,
            )
        if request.metric == "ac2":
            if request.ci_width is None:
                raise InvalidInput("an AC2 plan needs the target CI width (--ci-width)")
            ratings, categories = None, request.categories
            if frame is not None:
                ratings, categories, rubric = pilot_ratings(frame, request.score or DEFAULT_AC2_SCORE)
                if seconds is None:
                    seconds = _median_seconds(frame, rubric)
            return plan_ac2(
                request.expected,
                request.ci_width,
                categories=categories,
                raters=request.raters,
                pilot=ratings,
                tasks=request.tasks,
                seconds_per_rating=seconds,
                simulations=request.simulations or 200,
                **common,
            )
        if request.odds_ratio is None:
            raise InvalidInput("a harm-model plan needs the odds ratio to detect (--odds-ratio)")
        pilot = harm_pilot(engine, request.pilot, frame, request.term) if frame is not None else None
        if frame is not None and seconds is None:
            seconds = _median_seconds(frame, "B")
        return plan_harm_or(
            request.odds_ratio,
            request.power,
            reviewers=request.reviewers,
            icc=request.icc,
            baseline=request.expected,
            share=request.share,
            dual_share=DEFAULT_DUAL_SHARE if request.dual_share is None else request.dual_share,
            raters=request.raters,
            alpha=request.alpha,
            pilot=pilot,
            seconds_per_rating=seconds,
            simulations=request.simulations or 300,
            **common,
        )
    except AnalysisInputError as error:
        raise InvalidInput(str(error)) from None


# --- plans kept with a study --------------------------------------------------------------------


def save_plan(engine: Engine, actor: Actor, study_name: str, plan: Plan, *, pilot: str | None = None) -> None:
    """Keep ``plan`` as the study's plan for its metric (replacing an earlier one; audited)."""
    with write_session(engine) as session:
        lead = require_lead(session, actor, "plan a study")
        study = session.exec(select(Study).where(Study.name == study_name).with_for_update()).first()
        if study is None:
            raise NotFound(f"no study named {study_name!r}")
        require_study_lead(session, lead, study)
        settings = dict(study.settings)
        plans = dict(settings.get(SETTINGS_KEY, {}))
        before = plans.get(plan.metric)
        plans[plan.metric] = plan.to_dict() | {"pilot": pilot}
        settings[SETTINGS_KEY] = plans
        study.settings = settings
        session.add(study)
        audit.record(
            session,
            actor_id=None if lead is None else lead.id,
            action="study.plan",
            entity="study",
            entity_id=study.id,
            study_id=study.id,
            before=before,
            after=plans[plan.metric],
        )


def saved_plans(engine: Engine, study_name: str) -> list[Plan]:
    """The plans kept with a study, in metric order."""
    with read_session(engine) as session:
        study = session.exec(select(Study).where(Study.name == study_name)).first()
        if study is None:
            raise NotFound(f"no study named {study_name!r}")
        stored = dict(study.settings.get(SETTINGS_KEY, {}))
    return [Plan.from_dict(stored[m]) for m in METRICS if m in stored]


@dataclass(frozen=True)
class PlanCheck:
    """The study's pool and assignment measured against its plans."""

    plans: tuple[Plan, ...]
    needed_tasks: int
    needed_dual: int
    units: int  # pool units (one per pool rank), gold tasks not counted
    assigned_units: int
    dual_units: int
    warnings: tuple[str, ...] = field(default_factory=tuple)

    @property
    def needed_share(self) -> float:
        return self.needed_dual / self.needed_tasks if self.needed_tasks else 0.0


def _pool_units(engine: Engine, study_name: str) -> tuple[int, int, int]:
    """(pool units, multi-rated units, units with an assignment); gold tasks not counted."""
    with read_session(engine) as session:
        study = session.exec(select(Study).where(Study.name == study_name)).first()
        gold = select(GoldTask.task_id).where(GoldTask.study_id == study.id)
        # One pass over the study's tasks, counted in the database: a panel-scale pool has 250,000
        # units, which used to come back as rows (and a join with every assignment) on each rerun.
        has_assignment = select(Assignment.id).where(Assignment.task_id == Task.id).exists()
        per_unit = (
            select(
                Task.pool_rank,
                func.max(Task.target_raters).label("raters"),
                func.max(case((has_assignment, 1), else_=0)).label("assigned"),
            )
            .where(Task.study_id == study.id, Task.id.not_in(gold))
            .group_by(Task.pool_rank)
            .subquery()
        )
        units, dual, assigned = session.exec(
            select(
                func.count(),
                func.coalesce(func.sum(case((per_unit.c.raters >= 2, 1), else_=0)), 0),
                func.coalesce(func.sum(per_unit.c.assigned), 0),
            ).select_from(per_unit)
        ).one()
    return int(units), int(dual), int(assigned)


def plan_check(engine: Engine, study_name: str) -> PlanCheck:
    """Does the drawn pool (and, once assigned, its dual-rated share) meet the study's plans?"""
    plans = tuple(saved_plans(engine, study_name))
    # One pass over the study's tasks (1.5 s at 1,000,000 tasks), so once per data version: the
    # Set-up and Plan pages rerun on every click.
    units, dual, assigned = CACHE.get(
        engine, study_name, ("plan_units",), lambda _v: _pool_units(engine, study_name), reads_database=True
    )
    units, dual = int(units), int(dual)
    needed_tasks, needed_dual = combine(plans)
    warnings = []
    if plans:
        if units < needed_tasks:
            warnings.append(
                f"the pool has {units} units; the plan needs {needed_tasks}: draw {needed_tasks - units} more"
            )
        if assigned and dual < needed_dual:
            warnings.append(
                f"{dual} units are multi-rated; the plan needs {needed_dual} "
                f"(a dual share of at least {needed_dual / max(units, 1):.2f} of this pool)"
            )
    return PlanCheck(plans, needed_tasks, needed_dual, units, int(assigned), dual, tuple(warnings))
