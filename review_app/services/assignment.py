"""Dual-rater assignment: who reviews which task.

Rules: k raters per unit for a chosen share of units (the rest single-rated), load
balanced across reviewers, a reviewer only gets items in a language they read, never the same
unit twice (not even after being withdrawn from it), and a leaving reviewer's unfinished slots
go to others while their submitted work stays.

The tasks of one pool unit (its Rubric A and Rubric B tasks share a ``pool_rank``) go to the
same reviewers, as in the MedMisBench review where one screen showed both rubrics. Loads are
counted in units. The fill is greedy but ordered: the most constrained units first (fewest
reviewers who can take them, e.g. Chinese items), each slot to the least-loaded eligible
reviewer with seeded tie-breaks, which keeps loads within one unit whenever the language
constraints allow it.
"""

from __future__ import annotations

import random
from collections import defaultdict
from dataclasses import dataclass, field

from sqlalchemy import Engine, update
from sqlalchemy.orm.attributes import set_committed_value
from sqlmodel import Session, select

from review_app.db.engine import write_session
from review_app.db.models import OPEN_STATUSES, Assignment, Enrollment, Item, Reviewer, Study, Task, utcnow
from review_app.db.statistics import refresh_statistics
from review_app.services import audit
from review_app.services.actors import LEAD_ROLES, Actor, acting_user, require_study_lead
from review_app.services.actors import get_study as _study
from review_app.services.errors import InvalidInput, NotFound, PermissionDenied

_ID_CHUNK = 10_000  # ids per IN list: PostgreSQL takes at most 65,535 parameters in one statement


@dataclass
class Unit:
    rank: int
    language: str
    tasks: list[Task]
    reviewers: set[int] = field(default_factory=set)  # everyone ever assigned (incl. withdrawn)
    live_slots: dict[int, set[int]] = field(default_factory=dict)  # task id -> live slot numbers

    @property
    def target(self) -> int:
        return max(t.target_raters for t in self.tasks)

    def missing_slots(self) -> list[int]:
        """Slot numbers some task of this unit still lacks."""
        wanted = set(range(1, self.target + 1))
        missing: set[int] = set()
        for task in self.tasks:
            missing |= wanted - self.live_slots.get(task.id, set())
        return sorted(missing)


@dataclass
class AssignResult:
    study: str
    units: int
    dual_units: int
    created: int
    loads: dict[str, int]
    unfilled: list[str] = field(default_factory=list)

    def __str__(self) -> str:
        lines = [
            f"{self.study}: {self.created} assignments created over {self.units} units ({self.dual_units} multi-rated)",
            "  load (units) per reviewer: " + ", ".join(f"{u} {n}" for u, n in sorted(self.loads.items())),
        ]
        lines += [f"  unfilled: {reason}" for reason in self.unfilled]
        return "\n".join(lines)


def _led_study(session: Session, actor: Actor, name: str) -> tuple[Reviewer | None, Study]:
    """(acting account, study) after checking the actor leads the study."""
    me = acting_user(session, actor, roles=LEAD_ROLES)
    study = _study(session, name)
    require_study_lead(session, me, study)
    return me, study


def enrol(engine: Engine, study_name: str, usernames: list[str], *, active: bool = True, actor: Actor) -> list[str]:
    """Enrol reviewers in a study (or deactivate their enrolment with ``active=False``).

    Only accounts with the reviewer role can be enrolled: leads and admins review nothing here.
    """
    with write_session(engine) as session:
        return enrol_in(session, study_name, usernames, active=active, actor=actor)


def enrol_in(
    session: Session, study_name: str, usernames: list[str], *, active: bool = True, actor: Actor
) -> list[str]:
    """``enrol`` inside the caller's write transaction (e.g. a roster import that enrols its reviewers)."""
    me, study = _led_study(session, actor, study_name)
    names = list(dict.fromkeys(u.strip().lower() for u in usernames if u.strip()))
    users = {u.username: u for u in session.exec(select(Reviewer).where(Reviewer.username.in_(names)))}
    unknown = [n for n in names if n not in users]
    if unknown:
        raise NotFound(f"no user named {', '.join(unknown)}")
    others = [f"{n} ({users[n].role})" for n in names if users[n].role != "reviewer"]
    if active and others:
        raise PermissionDenied(f"only reviewers can be enrolled in a study, not {', '.join(others)}")
    for name in names:
        user = users[name]
        row = session.exec(
            select(Enrollment).where(Enrollment.study_id == study.id, Enrollment.reviewer_id == user.id)
        ).first()
        if row is None:
            row = Enrollment(study_id=study.id, reviewer_id=user.id, active=active)
        row.active = active
        session.add(row)
        audit.record(
            session,
            actor_id=me.id if me else None,
            action="study.enrol" if active else "study.unenrol",
            entity="reviewer",
            entity_id=user.id,
            study_id=study.id,
        )
    return names


def _eligible(session: Session, study: Study) -> list[Reviewer]:
    enrolled = session.exec(select(Enrollment).where(Enrollment.study_id == study.id)).all()
    if not enrolled:
        reviewers = session.exec(select(Reviewer).where(Reviewer.role == "reviewer", Reviewer.active)).all()
        for reviewer in reviewers:
            session.add(Enrollment(study_id=study.id, reviewer_id=reviewer.id))
        return sorted(reviewers, key=lambda r: r.id)
    active_ids = [e.reviewer_id for e in enrolled if e.active]
    if not active_ids:
        return []
    users = session.exec(select(Reviewer).where(Reviewer.id.in_(active_ids), Reviewer.active)).all()
    return sorted(users, key=lambda r: r.id)


def _units(session: Session, study: Study) -> dict[int, Unit]:
    rows = session.exec(
        select(Task, Item.language).join(Item, Item.id == Task.item_id).where(Task.study_id == study.id)
    ).all()
    units: dict[int, Unit] = {}
    for task, language in rows:
        unit = units.setdefault(task.pool_rank, Unit(task.pool_rank, language, []))
        unit.tasks.append(task)
    task_unit = {t.id: u for u in units.values() for t in u.tasks}
    for assignment in session.exec(select(Assignment).where(Assignment.study_id == study.id)):
        unit = task_unit[assignment.task_id]
        unit.reviewers.add(assignment.reviewer_id)
        if assignment.status != "withdrawn":
            unit.live_slots.setdefault(assignment.task_id, set()).add(assignment.slot)
    return units


def _loads(units: dict[int, Unit], session: Session, study: Study) -> dict[int, int]:
    live = session.exec(
        select(Assignment.reviewer_id, Task.pool_rank)
        .join(Task, Task.id == Assignment.task_id)
        .where(Assignment.study_id == study.id, Assignment.status != "withdrawn")
    ).all()
    per: dict[int, set[int]] = defaultdict(set)
    for reviewer_id, rank in live:
        per[reviewer_id].add(rank)
    return {rid: len(ranks) for rid, ranks in per.items()}


def _fill(
    session: Session,
    study: Study,
    units: list[Unit],
    reviewers: list[Reviewer],
    loads: dict[int, int],
    rng: random.Random,
) -> tuple[int, list[str]]:
    """Give every missing slot of ``units`` to an eligible reviewer; returns (created, unfilled)."""
    tiebreak = {r.id: rng.random() for r in reviewers}
    readers = {r.id: r.language_set for r in reviewers}

    def eligible(unit: Unit) -> list[Reviewer]:
        return [r for r in reviewers if unit.language in readers[r.id] and r.id not in unit.reviewers]

    order = sorted(units, key=lambda u: (len(eligible(u)), rng.random()))
    created = 0
    unfilled: list[str] = []
    now = utcnow()
    for unit in order:
        for slot in unit.missing_slots():
            options = eligible(unit)
            if not options:
                unfilled.append(
                    f"unit {unit.rank} (language {unit.language}) slot {slot}: no further active reviewer "
                    f"reads {unit.language}"
                )
                continue
            chosen = min(options, key=lambda r: (loads.get(r.id, 0), tiebreak[r.id]))
            for task in unit.tasks:
                if slot in unit.live_slots.get(task.id, set()) or slot > task.target_raters:
                    continue
                session.add(
                    Assignment(task_id=task.id, reviewer_id=chosen.id, study_id=study.id, slot=slot, assigned_at=now)
                )
                unit.live_slots.setdefault(task.id, set()).add(slot)
                created += 1
            unit.reviewers.add(chosen.id)
            loads[chosen.id] = loads.get(chosen.id, 0) + 1
    return created, unfilled


def _set_target_raters(session: Session, units: dict, fresh: list, multi: set, raters: int) -> None:
    """Target raters of the new units' tasks: ``raters`` for the multi-rated units, 1 for the rest.

    Written as one UPDATE per value and chunk of ids, not one per task (an ORM flush updates row by
    row): the progress counters follow each statement once (migration 0009), and a study of
    1,000,000 tasks is not a million statements. The loaded tasks get the new value as committed.
    """
    by_value: dict[int, list] = {}
    for rank in fresh:
        value = raters if rank in multi else 1
        by_value.setdefault(value, []).extend(units[rank].tasks)
    for value, tasks in by_value.items():
        changed = [task for task in tasks if task.target_raters != value]
        ids = [task.id for task in changed]
        for start in range(0, len(ids), _ID_CHUNK):
            session.execute(
                update(Task).where(Task.id.in_(ids[start : start + _ID_CHUNK])).values(target_raters=value),
                execution_options={"synchronize_session": False},  # the loaded tasks are set below
            )
        for task in changed:
            set_committed_value(task, "target_raters", value)


def assign(
    engine: Engine,
    study_name: str,
    *,
    raters: int = 2,
    dual_share: float = 1.0,
    seed: int = 0,
    actor: Actor,
) -> AssignResult:
    """Assign reviewers to every unit of the study that has no reviewer yet, and fill gaps.

    ``dual_share`` of the new units (rounded) get ``raters`` reviewers, the rest one. Units that
    already have reviewers keep their rater count; their missing slots are filled.
    """
    if raters < 1:
        raise InvalidInput("--raters must be at least 1")
    if not 0 <= dual_share <= 1:
        raise InvalidInput("--dual-share must be between 0 and 1")
    rng = random.Random(f"assign:{seed}")
    with write_session(engine) as session:
        me, study = _led_study(session, actor, study_name)
        units = _units(session, study)
        if not units:
            raise InvalidInput(f"study {study_name!r} has no tasks; draw a pool first")
        reviewers = _eligible(session, study)
        if not reviewers:
            raise InvalidInput(f"study {study_name!r} has no active enrolled reviewer")
        fresh = sorted(rank for rank, u in units.items() if not u.reviewers)
        n_multi = round(dual_share * len(fresh))
        multi = set(rng.sample(fresh, n_multi)) if raters > 1 else set()
        _set_target_raters(session, units, fresh, multi, raters)
        session.flush()
        loads = _loads(units, session, study)
        created, unfilled = _fill(session, study, list(units.values()), reviewers, loads, rng)
        names = {r.id: r.username for r in reviewers}
        result = AssignResult(
            study=study_name,
            units=len(units),
            dual_units=sum(1 for u in units.values() if u.target > 1),
            created=created,
            loads={names[rid]: n for rid, n in loads.items() if rid in names}
            | {r.username: 0 for r in reviewers if r.id not in loads},
            unfilled=unfilled,
        )
        audit.record(
            session,
            actor_id=me.id if me else None,
            action="study.assign",
            entity="study",
            entity_id=study.id,
            study_id=study.id,
            after={"raters": raters, "dual_share": dual_share, "seed": seed, "created": created},
        )
    refresh_statistics(engine, ["task", "assignment"])
    return result


@dataclass
class ReassignResult:
    study: str
    reviewer: str
    withdrawn: int
    created: int
    kept_submitted: int
    unfilled: list[str] = field(default_factory=list)

    def __str__(self) -> str:
        lines = [
            f"{self.reviewer} left {self.study}: {self.withdrawn} unfinished assignments withdrawn, "
            f"{self.created} reassigned, {self.kept_submitted} submitted kept"
        ]
        lines += [f"  unfilled: {reason}" for reason in self.unfilled]
        return "\n".join(lines)


def reassign(engine: Engine, study_name: str, username: str, *, seed: int = 0, actor: Actor) -> ReassignResult:
    """Withdraw a leaving reviewer's unfinished slots and give them to others; submitted work stays."""
    rng = random.Random(f"reassign:{seed}:{username}")
    with write_session(engine) as session:
        me, study = _led_study(session, actor, study_name)
        user = session.exec(select(Reviewer).where(Reviewer.username == username.strip().lower())).first()
        if user is None:
            raise NotFound(f"no user named {username!r}")
        mine = session.exec(
            select(Assignment).where(Assignment.study_id == study.id, Assignment.reviewer_id == user.id)
        ).all()
        open_ids = [a.id for a in mine if a.status in OPEN_STATUSES]
        kept = sum(1 for a in mine if a.status == "submitted")
        if open_ids:
            session.execute(
                update(Assignment).where(Assignment.id.in_(open_ids)).values(status="withdrawn", withdrawn_at=utcnow())
            )
        enrollment = session.exec(
            select(Enrollment).where(Enrollment.study_id == study.id, Enrollment.reviewer_id == user.id)
        ).first()
        if enrollment is None:
            enrollment = Enrollment(study_id=study.id, reviewer_id=user.id)
        enrollment.active = False
        session.add(enrollment)
        session.flush()
        units = _units(session, study)
        affected = {a.task_id for a in mine if a.id in open_ids}
        todo = [u for u in units.values() if any(t.id in affected for t in u.tasks)]
        reviewers = [r for r in _eligible(session, study) if r.id != user.id]
        created, unfilled = _fill(session, study, todo, reviewers, _loads(units, session, study), rng)
        audit.record(
            session,
            actor_id=me.id if me else None,
            action="study.reassign",
            entity="reviewer",
            entity_id=user.id,
            study_id=study.id,
            after={"withdrawn": len(open_ids), "created": created},
        )
        result = ReassignResult(study_name, user.username, len(open_ids), created, kept, unfilled)
    refresh_statistics(engine, ["assignment"])
    return result
