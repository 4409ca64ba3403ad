"""Gold tasks of a study: tasks whose expected scores are known, for checking reviewers against.

Expected scores come from a final decision (unanimous or adjudicated) on the same unit (rubric,
item, response) in another study, or from a consensus the lead enters. Nothing on the review path
reads ``gold_task``, so a reviewer is served a gold task exactly like any other; their annotations
on it are left out of the study's agreement, analyses, adjudication queue and exports
(``annotations.load_annotations``) and feed only the quality report
(:func:`review_app.services.reviewer_monitoring.quality_report`). A task can be made gold (or
ordinary again) only while nobody has submitted a rating on it, so no rating ever moves in or out
of the analysis after it was seen.

Every function takes the acting user and refuses anyone who is not an active lead or admin
(:func:`review_app.services.reviewer_monitoring.require_lead`): reviewers never see any of this. A
lead works only on the studies they lead, and takes expected scores only from decisions in studies
they lead too (an admin: any study), so no other panel's decisions reach them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from pydantic import ValidationError
from sqlalchemy import Engine, and_, func
from sqlalchemy.orm import aliased
from sqlmodel import Session, select

from review_app.db.engine import read_session, write_session
from review_app.db.models import Adjudication, Annotation, GoldTask, Reviewer, Study, StudyLead, Task
from review_app.rubrics import ScoreSheet, get_rubric
from review_app.services import audit
from review_app.services.actors import Actor, require_study_lead
from review_app.services.errors import Conflict, InvalidInput, NotFound
from review_app.services.reviewer_monitoring import account_id, require_lead, study_row

FINAL_STATUSES = ("unanimous", "adjudicated")


@dataclass(frozen=True)
class _ExpectedScores:
    """A task of the study and the scores a gold task expects of its raters."""

    task_id: int
    unit_key: str
    rubric: str
    expected_scores: dict[str, int]


@dataclass(frozen=True)
class GoldInfo(_ExpectedScores):
    """A gold task of the study as the lead sees it."""

    source: str
    source_task_id: int | None
    ratings: int


@dataclass(frozen=True)
class GoldCandidate(_ExpectedScores):
    """A task of this study whose unit has a final decision in another study (its scores, expected if made gold)."""

    source_study: str
    source_task_id: int
    status: str


_IN_CHUNK = 10_000  # ids per IN list: PostgreSQL takes at most 65,535 parameters in one statement


def _submitted(session: Session, task_ids: list[int]) -> dict[int, int]:
    """Task id -> assignments with an annotation, asked in chunks (a study can have 100,000s of tasks)."""
    out: dict[int, int] = {}
    for start in range(0, len(task_ids), _IN_CHUNK):
        rows = session.exec(
            select(Annotation.task_id, func.count(func.distinct(Annotation.assignment_id)))
            .where(Annotation.task_id.in_(task_ids[start : start + _IN_CHUNK]))
            .group_by(Annotation.task_id)
        ).all()
        out.update({int(t): int(n) for t, n in rows})
    return out


def gold_tasks(engine: Engine, actor: Actor, study_name: str) -> list[GoldInfo]:
    """The study's gold tasks with their expected scores and how many ratings each has."""
    with read_session(engine) as session:
        lead = require_lead(session, actor)
        study = study_row(session, study_name)
        require_study_lead(session, lead, study)
        rows = session.exec(
            select(GoldTask, Task.unit_key, Task.rubric)
            .join(Task, Task.id == GoldTask.task_id)
            .where(GoldTask.study_id == study.id)
            .order_by(Task.pool_rank, Task.id)
        ).all()
        counts = _submitted(session, [g.task_id for g, _u, _r in rows])
    return [
        GoldInfo(g.task_id, unit, rubric, dict(g.expected_scores), g.source, g.source_task_id, counts.get(g.task_id, 0))
        for g, unit, rubric in rows
    ]


def _led_by(lead: Reviewer | None, study_id) -> tuple:
    """The conditions keeping a decided task's ``study_id`` to the studies ``lead`` leads (none: any study)."""
    if lead is None or lead.role == "admin":
        return ()
    return (study_id.in_(select(StudyLead.study_id).where(StudyLead.reviewer_id == lead.id)),)


def _final_decisions(
    session: Session, exclude_study: int, lead: Reviewer | None
) -> dict[tuple[str, int, int | None], tuple]:
    """(rubric, item, response) -> (scores, status, study name, task id) of the newest final decision elsewhere,
    in a study ``lead`` leads."""
    newest = (
        select(Adjudication.task_id, func.max(Adjudication.version).label("version"))
        .group_by(Adjudication.task_id)
        .subquery()
    )
    rows = session.exec(
        select(Adjudication, Task.rubric, Task.item_id, Task.response_id, Study.name)
        .join(newest, and_(newest.c.task_id == Adjudication.task_id, newest.c.version == Adjudication.version))
        .join(Task, Task.id == Adjudication.task_id)
        .join(Study, Study.id == Task.study_id)
        .where(Task.study_id != exclude_study, Adjudication.status.in_(FINAL_STATUSES))
        .where(*_led_by(lead, Task.study_id))
        .order_by(Adjudication.created_at)
    ).all()
    out: dict[tuple[str, int, int | None], tuple] = {}
    for decision, rubric, item_id, response_id, study in rows:
        if set(decision.final_scores) == set(get_rubric(rubric).dimension_keys):
            out[(rubric, item_id, response_id)] = (
                dict(decision.final_scores),
                decision.status,
                study,
                decision.task_id,
            )
    return out


def gold_candidates(engine: Engine, actor: Actor, study_name: str) -> list[GoldCandidate]:
    """Unrated, non-gold tasks of the study whose unit was finally decided in another study the lead leads.

    The database narrows the study's tasks to unrated, non-gold ones on an item decided elsewhere
    (indexed semi-joins), so a page rerun reads a handful of rows, not every task of a panel-scale
    study; the unit match (rubric, item, response) and the complete-scores check are made here.
    """
    with read_session(engine) as session:
        lead = require_lead(session, actor)
        study = study_row(session, study_name)
        require_study_lead(session, lead, study)
        decisions = _final_decisions(session, study.id, lead)
        if not decisions:
            return []
        other = aliased(Task)
        decided_items = (
            select(other.item_id)
            .join(Adjudication, Adjudication.task_id == other.id)
            .where(other.study_id != study.id, Adjudication.status.in_(FINAL_STATUSES))
            .where(*_led_by(lead, other.study_id))
        )
        rated = select(Annotation.id).where(Annotation.task_id == Task.id).exists()
        gold = select(GoldTask.task_id).where(GoldTask.study_id == study.id)
        rows = session.exec(
            select(Task.id, Task.unit_key, Task.rubric, Task.item_id, Task.response_id)
            .where(
                Task.study_id == study.id,
                Task.item_id.in_(decided_items),
                Task.id.not_in(gold),
                ~rated,
            )
            .order_by(Task.pool_rank, Task.id)
        ).all()
    out = []
    for task_id, unit_key, rubric, item_id, response_id in rows:
        found = decisions.get((rubric, item_id, response_id))
        if found is None:
            continue
        scores, status, source_study, source_task = found
        out.append(GoldCandidate(int(task_id), unit_key, rubric, scores, source_study, source_task, status))
    return out


def unrated_tasks(
    engine: Engine, actor: Actor, study_name: str, *, limit: int | None = None
) -> list[tuple[int, str, str]]:
    """(task id, unit key, rubric) of the study's ordinary tasks nobody has rated yet (gold-able), in pool order.

    ``limit``: the first so many only. A panel-scale study has 100,000s of unrated tasks; a page
    offers the first few hundred in pool order (the next to be served, so the ones worth making
    gold) instead of reading and listing every one on each rerun.
    """
    with read_session(engine) as session:
        lead = require_lead(session, actor)
        study = study_row(session, study_name)
        require_study_lead(session, lead, study)
        rated = select(Annotation.id).where(Annotation.task_id == Task.id).exists()
        gold = select(GoldTask.task_id).where(GoldTask.study_id == study.id)
        query = (
            select(Task.id, Task.unit_key, Task.rubric)
            .where(Task.study_id == study.id, ~rated, Task.id.not_in(gold))
            .order_by(Task.pool_rank, Task.id)
        )
        if limit is not None:
            query = query.limit(limit)
        rows = session.exec(query).all()
    return [(int(t), unit, rubric) for t, unit, rubric in rows]


def _check_scores(rubric: str, scores: Mapping[str, int]) -> dict[str, int]:
    try:
        return dict(ScoreSheet(rubric=rubric, scores=dict(scores)).scores)
    except ValidationError as error:
        problems = "; ".join(str(e.get("msg", "")).removeprefix("Value error, ") for e in error.errors())
        raise InvalidInput(f"expected scores: {problems}") from None


def mark_gold(
    engine: Engine,
    actor: Actor,
    study_name: str,
    task_id: int,
    *,
    expected_scores: Mapping[str, int] | None = None,
) -> GoldInfo:
    """Make a task of the study gold.

    Without ``expected_scores`` they are taken from the newest final decision on the same unit in
    another study the lead leads (source "adjudication"); with them, they are the lead's consensus scores
    (validated against the rubric; source "consensus"). Refused once the task has a submitted rating.
    """
    with write_session(engine) as session:
        lead = require_lead(session, actor, "mark gold tasks")
        study = study_row(session, study_name, lock=True)
        require_study_lead(session, lead, study)
        task = session.exec(select(Task).where(Task.id == task_id, Task.study_id == study.id).with_for_update()).first()
        if task is None:
            raise NotFound(f"study {study_name!r} has no task {task_id}")
        if session.get(GoldTask, task.id) is not None:
            raise Conflict(f"task {task.id} ({task.unit_key}) is already a gold task")
        rated = _submitted(session, [task.id]).get(task.id, 0)
        if rated:
            raise Conflict(
                f"task {task.id} ({task.unit_key}) already has {rated} submitted rating(s); gold tasks are chosen "
                "before anyone rates them, so no rating moves out of the analysis after it was seen"
            )
        source_task_id = None
        if expected_scores is None:
            found = _final_decisions(session, study.id, lead).get((task.rubric, task.item_id, task.response_id))
            if found is None:
                raise InvalidInput(
                    f"no other study you lead has a final (unanimous or adjudicated) decision on task {task.id}'s "
                    "unit; enter the consensus scores instead"
                )
            scores, source, source_task_id = found[0], "adjudication", found[3]
        else:
            scores, source = _check_scores(task.rubric, expected_scores), "consensus"
        row = GoldTask(
            task_id=task.id,
            study_id=study.id,
            expected_scores=scores,
            source=source,
            source_task_id=source_task_id,
            created_by=account_id(lead),
        )
        session.add(row)
        audit.record(
            session,
            actor_id=account_id(lead),
            action="gold.mark",
            entity="task",
            entity_id=task.id,
            study_id=study.id,
            after={"expected_scores": scores, "source": source, "source_task_id": source_task_id},
        )
        return GoldInfo(task.id, task.unit_key, task.rubric, scores, source, source_task_id, 0)


def unmark_gold(engine: Engine, actor: Actor, study_name: str, task_id: int) -> None:
    """Make a gold task ordinary again (only while nobody has rated it)."""
    with write_session(engine) as session:
        lead = require_lead(session, actor, "change gold tasks")
        study = study_row(session, study_name, lock=True)
        require_study_lead(session, lead, study)
        row = session.exec(
            select(GoldTask).where(GoldTask.task_id == task_id, GoldTask.study_id == study.id).with_for_update()
        ).first()
        if row is None:
            raise NotFound(f"task {task_id} is not a gold task of study {study_name!r}")
        rated = _submitted(session, [task_id]).get(task_id, 0)
        if rated:
            raise Conflict(
                f"task {task_id} already has {rated} submitted rating(s) as a gold task; it stays gold so that no "
                "rating moves into the analysis after it was seen"
            )
        before = {"expected_scores": dict(row.expected_scores), "source": row.source}
        session.delete(row)
        audit.record(
            session,
            actor_id=account_id(lead),
            action="gold.unmark",
            entity="task",
            entity_id=task_id,
            study_id=study.id,
            before=before,
        )
