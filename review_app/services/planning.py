"""Study plans: run a plan (optionally from a pilot study), keep it with the study, check the pool against it.

The statistics live in :mod:`review_app.analysis.sample_size`; this module reads a pilot study's
annotations in force (gold tasks left out, as in every analysis) into what those functions take,
stores plans in the study's settings (one per metric, audited, leads only) and compares the drawn
pool and its dual-rated share with them for the Study set-up page.

**Units.** A plan counts tasks of the one rubric it measures (Rubric B for a rate or the harm model,
the dimension's rubric for AC2). A study's pool is drawn in units: one draw, holding one task of each
of the study's rubrics (a MedMisBench unit is an item's Rubric A task and its response's Rubric B
task), all rated by the same reviewers. So N planned tasks are N units, and N times the number of
rubrics tasks in all; :class:`PlanInUnits` says it once for the Plan and Study set-up pages, with
the reviewer-hours of every task a unit holds.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import pandas as pd
from sqlalchemy import Engine, case, func
from sqlmodel import select

from review_app.analysis.layout import DEFAULT_COLUMNS as C
from review_app.analysis.layout import AnalysisInputError, select_rubric
from review_app.analysis.rubric_b import classify_annotations, task_outcomes
from review_app.analysis.sample_size import (
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
from review_app.db.engine import read_session, write_session
from review_app.db.models import Assignment, FirstSubmission, GoldTask, Study, Task
from review_app.rubrics import get_rubric
from review_app.services import audit
from review_app.services.actors import SYSTEM, Actor, require_study_lead
from review_app.services.analysis_options import harm_spec
from review_app.services.annotations import annotations_frame, get_study_row
from review_app.services.errors import InvalidInput, NotFound
from review_app.services.reviewer_monitoring import require_lead
from review_app.services.studies import check_lead_of, lead_of
from review_app.services.study_analysis import harm_model
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
    actor: Actor = SYSTEM,
) -> Plan:
    """Run the plan ``request`` describes; a pilot study is read from ``engine``, if ``actor`` leads it.

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
        check_lead_of(engine, request.pilot, actor=actor)
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


def saved_plans(engine: Engine, study_name: str, *, actor: Actor = SYSTEM) -> list[Plan]:
    """The plans kept with a study, in metric order (for a lead of the study or an admin)."""
    with read_session(engine) as session:
        study = session.exec(select(Study).where(Study.name == study_name)).first()
        if study is None:
            raise NotFound(f"no study named {study_name!r}")
        lead_of(session, actor, study)
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


def plan_check(engine: Engine, study_name: str, *, actor: Actor = SYSTEM) -> PlanCheck:
    """Does the drawn pool (and, once assigned, its dual-rated share) meet the study's plans?

    ``actor`` is checked with the plans, before the cached pool counts are read.
    """
    plans = tuple(saved_plans(engine, study_name, actor=actor))
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
            pool = max(units, needed_tasks)  # a pool short of the plan is measured at the plan's size
            warnings.append(
                f"{dual} units are multi-rated; the plan needs {needed_dual} "
                f"(a dual share of at least {needed_dual / pool:.2f} of a pool of {pool} units)"
            )
    return PlanCheck(plans, needed_tasks, needed_dual, units, int(assigned), dual, tuple(warnings))


# --- plans in units, reviewer-hours and the set-up form's defaults ---------------------------------


def rubric_label(key: str) -> str:
    """``Rubric A (items)``, ``Rubric B (responses)``: a rubric as the set-up pages name it."""
    rubric = get_rubric(key)
    return f"{rubric.short_name} ({'responses' if rubric.needs_response else 'items'})"


@dataclass(frozen=True)
class PlanInUnits:
    """What a plan (or the plans kept with a study, combined) asks of a study, counted in its units.

    ``units`` units, ``multi_rated`` of them rated by ``raters`` reviewers; each unit holds one task
    of each of ``rubrics`` (the study's), so a planned task of one rubric is one unit.
    """

    units: int
    multi_rated: int
    raters: int
    rubrics: tuple[str, ...]

    @classmethod
    def of(cls, plans: Sequence[Plan], rubrics: Sequence[str]) -> PlanInUnits:
        """The units that satisfy every plan at once (the larger of each count, :func:`combine`)."""
        units, multi = combine(plans)
        raters = max((p.raters for p in plans if p.n_dual), default=max((p.raters for p in plans), default=1))
        return cls(units, multi, raters, tuple(rubrics))

    @property
    def tasks_per_unit(self) -> int:
        return max(len(self.rubrics), 1)

    @property
    def tasks(self) -> int:
        """Tasks over all the study's rubrics."""
        return self.units * self.tasks_per_unit

    @property
    def dual_share(self) -> float:
        return self.multi_rated / self.units if self.units else 0.0

    @property
    def ratings(self) -> int:
        """Ratings over all the study's rubrics: every task of a multi-rated unit is rated ``raters`` times."""
        return (self.units + self.multi_rated * (self.raters - 1)) * self.tasks_per_unit

    def reviewer_hours(self, seconds_per_task: float | None) -> float | None:
        """Reviewer-hours at ``seconds_per_task`` per rating of a task (None without a time)."""
        if seconds_per_task is None or seconds_per_task <= 0:
            return None
        return self.ratings * float(seconds_per_task) / 3600

    def conversion(self) -> str:
        """The sentence that turns the plan's tasks into this study's units (and its tasks in all)."""
        names = [rubric_label(k) for k in self.rubrics]
        if self.tasks_per_unit == 1:
            unit = f"a unit of this study is one task ({names[0] if names else 'one rubric'})"
            total = ""
        else:
            unit = (
                "a unit of this study is one draw holding one task of each rubric ("
                + " and ".join(names)
                + "), rated by the same reviewers"
            )
            total = f", {self.tasks:,} tasks over its {self.tasks_per_unit} rubrics"
        return (
            f"The plan counts tasks of the rubric it measures; {unit}. So {self.units:,} planned tasks = "
            f"{self.units:,} units{total}, and {self.multi_rated:,} dual-rated tasks = {self.multi_rated:,} units "
            f"rated by {self.raters} reviewers each ({self.ratings:,} ratings in all)."
        )


def study_rubrics(engine: Engine, study_name: str, *, actor: Actor = SYSTEM) -> tuple[str, ...]:
    """The study's rubric keys (one task of each per unit)."""
    with read_session(engine) as session:
        study = get_study_row(session, study_name)
        lead_of(session, actor, study)
        return tuple(study.rubric_keys)


def kept_in_units(engine: Engine, study_name: str, *, actor: Actor = SYSTEM) -> PlanInUnits | None:
    """The plans kept with the study, combined and counted in its units; None when none was kept."""
    plans = saved_plans(engine, study_name, actor=actor)
    return PlanInUnits.of(plans, study_rubrics(engine, study_name)) if plans else None


def simulation_summary(plan: Plan) -> str:
    """The plan's simulation report without its reviewer-hours (the pages give those for every rubric
    of a unit, at the time per task the lead sets)."""
    return replace(plan, seconds_per_rating=None).summary()


@dataclass(frozen=True)
class MeasuredTime:
    """The median time on task of a study's first submissions (an edit is not a second unit of work)."""

    seconds: float | None
    submissions: int


def measured_time_per_task(engine: Engine, study_name: str, *, actor: Actor = SYSTEM) -> MeasuredTime:
    """The median ``seconds_on_task`` of the study's first submissions over all its rubrics, as the
    Progress page reads them (``first_submission``); a time of 0 (not recorded) is left out.

    Once per data version: the Plan and Study set-up pages show it on every rerun. ``actor`` (a lead
    of the study or an admin) is checked before the cached value is read.
    """
    check_lead_of(engine, study_name, actor=actor)

    def compute(_version: tuple[int, ...]) -> MeasuredTime:
        with read_session(engine) as session:
            study = get_study_row(session, study_name)
            where = (FirstSubmission.study_id == study.id, FirstSubmission.seconds_on_task > 0)
            n = int(session.exec(select(func.count()).select_from(FirstSubmission).where(*where)).one())
            if not n:
                return MeasuredTime(None, 0)
            middle = session.exec(
                select(FirstSubmission.seconds_on_task)
                .where(*where)
                .order_by(FirstSubmission.seconds_on_task)
                .offset((n - 1) // 2)
                .limit(2 - n % 2)
            ).all()
        return MeasuredTime(float(sum(middle) / len(middle)), n)

    return CACHE.get(engine, study_name, ("median_seconds",), compute, reads_database=True)


def default_time_per_task(
    engine: Engine, study_name: str, plans: Sequence[Plan] = (), *, actor: Actor = SYSTEM
) -> float | None:
    """The time per task the pages start from: the study's measured median when it has submissions,
    else a pilot's median that a plan carries, else none (the lead gives one)."""
    measured = measured_time_per_task(engine, study_name, actor=actor).seconds
    if measured is not None:
        return round(measured, 1)
    return next((round(float(p.seconds_per_rating), 1) for p in plans if p.seconds_per_rating), None)


@dataclass(frozen=True)
class SetupDefaults:
    """The Study set-up forms' starting values: from the kept plans, else the page's own defaults."""

    units_to_draw: int = 100
    add: bool = False
    raters: int = 2
    dual_share: float = DEFAULT_DUAL_SHARE
    from_plan: bool = False


def setup_defaults(check: PlanCheck) -> SetupDefaults:
    """Pre-fill the pool and assignment forms from the kept plans and the pool drawn so far.

    The draw asks for the units the plan needs (the shortfall, added to the pool, when a smaller pool
    exists); the assignment asks for the plans' raters and the share of the units still to assign
    that brings the multi-rated units up to the plan (rounded up to the slider's 0.01).
    """
    if not check.plans:
        return SetupDefaults()
    short = check.needed_tasks - check.units
    add = check.units > 0 and short > 0
    draw = short if add else check.needed_tasks
    units_after = max(check.units, check.needed_tasks)
    to_assign = units_after - check.assigned_units
    still_dual = max(check.needed_dual - (check.dual_units if check.assigned_units else 0), 0)
    # rounded to 9 places first: 0.29 * 100 is 28.999999999999996, which must not ceil to 0.30
    share = min(math.ceil(round(still_dual / to_assign * 100, 9)) / 100, 1.0) if to_assign > 0 else check.needed_share
    raters = max((p.raters for p in check.plans if p.n_dual), default=2)
    return SetupDefaults(max(int(draw), 1), add, int(raters), round(float(share), 2), True)
