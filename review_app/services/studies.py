"""Studies and their review pools.

A review pool is a seeded, stratified draw of review units with quotas on several margins at
once (for example 35/35/25/5 across subsets, 34/33/33 across provenance frames and 33/34/33
across models, as in the MedMisBench clinician review). A unit is a model response when the
study has a response rubric (B, judge audit) and an item otherwise; each unit becomes one task
per rubric, and the tasks of one unit share a ``pool_rank`` so that assignment can give them to
the same reviewers. The draw depends only on the seed and the candidates, so it is reproducible.
"""

from __future__ import annotations

import random
from collections import Counter
from dataclasses import dataclass, field

from sqlalchemy import Engine, func
from sqlmodel import Session, select

from bench_core.medmisbench import taxonomy
from review_app.db.engine import read_session, write_session
from review_app.db.limits import text_problem
from review_app.db.models import Item, ModelResponse, Reviewer, Study, StudyLead, Task
from review_app.db.statistics import refresh_statistics
from review_app.rubrics import get_rubric
from review_app.services import audit
from review_app.services.actors import (
    LEAD_ROLES,
    SYSTEM,
    Actor,
    acting_user,
    as_actor,
    is_study_lead,
    require_study_lead,
)
from review_app.services.actors import get_study as _get_study
from review_app.services.errors import Conflict, InvalidInput, NotFound, PermissionDenied

QUOTA_DIMENSIONS = ("subset", "provenance", "content", "model", "language")
_CANONICAL = {
    "subset": taxonomy.canonical_subset,
    "provenance": taxonomy.canonical_provenance,
    "content": taxonomy.canonical_content_type,
    "model": str.strip,
    "language": lambda v: v.strip().lower(),
}
_ATTEMPTS = 200


@dataclass(frozen=True)
class Quota:
    """Target counts (or weights) for the values of one margin."""

    dimension: str
    targets: dict[str, float]

    def allocate(self, size: int) -> dict[str, int]:
        """Whole-number targets summing to ``size``: as given when they already do, else by largest remainder.

        Ties in the remainder go to the value listed first, so "neutral:1,patient:1,authority:1"
        over 100 gives 34/33/33 in that order.
        """
        total = sum(self.targets.values())
        if total <= 0:
            raise InvalidInput(f"quota on {self.dimension} has no positive target")
        if abs(total - size) < 1e-9 and all(float(v).is_integer() for v in self.targets.values()):
            return {k: int(v) for k, v in self.targets.items()}
        exact = {k: v * size / total for k, v in self.targets.items()}
        counts = {k: int(v) for k, v in exact.items()}
        leftover = size - sum(counts.values())
        order = list(exact)  # ties go to the value listed first
        for key in sorted(order, key=lambda k: (-(exact[k] - counts[k]), order.index(k)))[:leftover]:
            counts[key] += 1
        return counts


def parse_quota(text: str) -> Quota:
    """Parse ``subset=MEDMISQA:35,MEDMISMCQA:35`` (counts or weights) into a ``Quota``."""
    dimension, sep, spec = text.partition("=")
    dimension = dimension.strip().lower()
    if not sep or dimension not in QUOTA_DIMENSIONS:
        raise InvalidInput(
            f"quota {text!r} must look like subset=MEDMISQA:35,MEDMISMCQA:35 with one of "
            f"{', '.join(QUOTA_DIMENSIONS)} before '='"
        )
    targets: dict[str, float] = {}
    for part in spec.split(","):
        value, colon, number = part.rpartition(":")
        if not colon or not value.strip():
            raise InvalidInput(f"quota part {part!r} must be VALUE:COUNT")
        try:
            count = float(number)
        except ValueError:
            raise InvalidInput(f"quota part {part!r}: {number!r} is not a number") from None
        if count < 0:
            raise InvalidInput(f"quota part {part!r}: counts cannot be negative")
        try:
            key = _CANONICAL[dimension](value.strip())
        except taxonomy.UnknownLabelError as exc:
            raise InvalidInput(f"quota {dimension}: {exc}") from None
        targets[key] = targets.get(key, 0) + count
    return Quota(dimension, targets)


@dataclass
class PoolResult:
    """The drawn pool: how many units and tasks, and the achieved count on every quota margin."""

    study: str
    units: int
    tasks: int
    achieved: dict[str, dict[str, int]] = field(default_factory=dict)

    def __str__(self) -> str:
        lines = [f"pool for {self.study}: {self.units} units, {self.tasks} tasks"]
        for dimension, counts in self.achieved.items():
            lines.append(f"  {dimension}: " + ", ".join(f"{k} {v}" for k, v in sorted(counts.items())))
        return "\n".join(lines)


def create_study(
    engine: Engine,
    name: str,
    *,
    rubrics: list[str] | None = None,
    description: str = "",
    actor: Actor,
) -> Study:
    """Create a study with the given rubrics (default A and B); a lead or admin who creates it leads it."""
    name, keys = check_new_study(name, rubrics, description)
    with write_session(engine) as session:
        return create_study_in(session, name, rubrics=keys, description=description, actor=actor)


def check_new_study(name: str, rubrics: list[str] | None, description: str = "") -> tuple[str, list[str]]:
    """The study's cleaned name and rubric keys, or ``InvalidInput`` naming what is wrong (before any write).

    Lengths are checked against the table here, so SQLite and PostgreSQL refuse the same names.
    """
    name = name.strip()
    if not name:
        raise InvalidInput("a study needs a name")
    for column, value in (("name", name), ("description", description)):
        problem = text_problem(Study, column, value)
        if problem is not None:
            raise InvalidInput(f"the study {column} {problem}")
    keys = [k.strip() for k in (rubrics or ["A", "B"]) if k.strip()]
    for key in keys:
        try:
            get_rubric(key)
        except KeyError as exc:
            raise InvalidInput(str(exc.args[0])) from None
    if "judge" in keys and len(keys) > 1:
        raise InvalidInput("a judge-audit study reviews retracted-paper runs only; create it separately from A/B")
    return name, keys


def create_study_in(
    session: Session, name: str, *, rubrics: list[str] | None = None, description: str = "", actor: Actor
) -> Study:
    """``create_study`` inside the caller's write transaction (e.g. an import that also creates its study)."""
    name, keys = check_new_study(name, rubrics, description)
    me = acting_user(session, actor, roles=LEAD_ROLES)
    if session.exec(select(Study).where(Study.name == name)).first() is not None:
        raise Conflict(f"a study named {name!r} already exists")
    study = Study(name=name, rubrics=",".join(dict.fromkeys(keys)), description=description)
    session.add(study)
    session.flush()
    if me is not None:
        session.add(StudyLead(study_id=study.id, reviewer_id=me.id))
    audit.record(
        session,
        actor_id=me.id if me else None,
        action="study.create",
        entity="study",
        entity_id=study.id,
        study_id=study.id,
        after={"name": name, "rubrics": study.rubrics},
    )
    return study


def find_study_in(session: Session, name: str) -> Study | None:
    """The study named ``name`` in the caller's session, or None."""
    return session.exec(select(Study).where(Study.name == name.strip())).first()


def lead_of(session: Session, actor: Actor | int, study: Study) -> Reviewer | None:
    """The acting account re-read in the caller's transaction, if it leads ``study`` or is an admin (None: the system).

    What every service reading one study's data checks (docs/security.md, "Roles and permissions"): a
    lead sees only the studies they lead. Two primary-key reads (the account and its ``study_lead``
    row), cheap enough for the reads a lead page makes on every rerun.
    """
    me = acting_user(session, actor, roles=LEAD_ROLES)
    require_study_lead(session, me, study)
    return me


def check_lead_of(engine: Engine, name: str, *, actor: Actor) -> None:
    """Refuse (``PermissionDenied``, ``SessionEnded``) unless ``actor`` may read the study named ``name``.

    For a service that serves one study's data without a transaction of its own (a cached result):
    it checks before returning anything. Nothing is read for the system actor.
    """
    if as_actor(actor).is_system:
        return
    with read_session(engine) as session:
        lead_of(session, actor, _get_study(session, name))


def get_study(engine: Engine, name: str, *, actor: Actor = SYSTEM) -> Study:
    """The study named ``name``, if ``actor`` leads it or is an admin (``NotFound`` when there is none)."""
    with read_session(engine) as session:
        study = _get_study(session, name)
        lead_of(session, actor, study)
        return study


def study_leads(engine: Engine, name: str, *, actor: Actor = SYSTEM) -> list[str]:
    """Usernames of the study's leads (admins lead every study without being listed)."""
    with read_session(engine) as session:
        study = _get_study(session, name)
        lead_of(session, actor, study)
        return list(
            session.exec(
                select(Reviewer.username)
                .join(StudyLead, StudyLead.reviewer_id == Reviewer.id)
                .where(StudyLead.study_id == study.id)
                .order_by(Reviewer.username)
            )
        )


def leads(engine: Engine, actor: Actor, name: str) -> bool:
    """Whether ``actor`` may change the study (its pool, assignment, enrolment, leads): for the pages' hints."""
    with read_session(engine) as session:
        return is_study_lead(session, acting_user(session, actor), _get_study(session, name).id)


def set_study_lead(engine: Engine, name: str, username: str, *, actor: Actor, lead: bool = True) -> None:
    """Make an active lead or admin account a lead of the study (or, with ``lead=False``, no longer one).

    Allowed to admins and to the study's own leads; the account keeps its role either way.
    """
    with write_session(engine) as session:
        me = acting_user(session, actor, roles=LEAD_ROLES)
        study = _get_study(session, name)
        require_study_lead(session, me, study)
        user = session.exec(select(Reviewer).where(Reviewer.username == username.strip().lower())).first()
        if user is None:
            raise NotFound(f"no user named {username!r}")
        row = session.get(StudyLead, (study.id, user.id))
        if lead:
            if user.role not in LEAD_ROLES or not user.active:
                raise PermissionDenied(
                    f"{user.username} is not an active lead or admin; an admin can change their role"
                )
            if row is not None:
                return
            session.add(StudyLead(study_id=study.id, reviewer_id=user.id))
        else:
            if row is None:
                return
            session.delete(row)
        audit.record(
            session,
            actor_id=me.id if me else None,
            action="study.lead_add" if lead else "study.lead_remove",
            entity="reviewer",
            entity_id=user.id,
            study_id=study.id,
        )


def list_studies(engine: Engine, *, actor: Actor = SYSTEM) -> list[Study]:
    """The studies ``actor`` may open, oldest first: for a lead the studies they lead, for an admin
    and the system every study (a reviewer: none; ``SessionEnded`` for an account that changed)."""
    with read_session(engine) as session:
        me = acting_user(session, actor)
        query = select(Study).order_by(Study.created_at)
        if me is not None and me.role != "admin":
            if me.role not in LEAD_ROLES:
                return []
            query = query.where(Study.id.in_(select(StudyLead.study_id).where(StudyLead.reviewer_id == me.id)))
        return list(session.exec(query))


def _candidates(session, study: Study, condition: str | None, languages: set[str] | None) -> list[dict]:
    by_response = any(get_rubric(k).needs_response for k in study.rubric_keys)
    kind = "retracted" if "judge" in study.rubric_keys else "mcq"
    # A unit is an item for MedMisBench pools (one response per item, as in the paper's review) and a
    # trace for a judge audit (every model's answer to a record is its own case).
    per_trace = kind == "retracted"
    taken = set(session.exec(select(Task.response_id if per_trace else Task.item_id).where(Task.study_id == study.id)))
    columns = (Item.id, Item.subset, Item.provenance, Item.content_type, Item.language, Item.target_label)
    if by_response:
        query = select(*columns, ModelResponse.id, ModelResponse.model).join(
            ModelResponse, ModelResponse.item_id == Item.id
        )
        if condition and kind == "mcq":  # retracted-paper traces have one condition of their own
            query = query.where(ModelResponse.condition == condition)
    else:
        query = select(*columns)
    query = query.where(Item.kind == kind)
    out = []
    for row in session.exec(query):
        item_id, subset, provenance, content, language, target = row[:6]
        unit = row[6] if per_trace else item_id
        if unit in taken or (kind == "mcq" and target is None):
            continue
        if languages and language not in languages:
            continue
        out.append(
            {
                "unit": unit,
                "item_id": item_id,
                "response_id": row[6] if by_response else None,
                "subset": subset,
                "provenance": provenance,
                "content": content,
                "language": language,
                "model": row[7] if by_response else None,
            }
        )
    out.sort(key=lambda c: (c["item_id"], c["response_id"] or 0))
    return out


def _draw(candidates: list[dict], size: int, targets: dict[str, dict[str, int]], seed: int) -> list[dict] | None:
    """Greedy quota-filling draws in seeded random orders; the first complete one wins.

    Each attempt walks the candidates in a shuffled order and takes one whenever every quota'd
    margin still has room for its value (each unit at most once). Attempts are numbered, so the
    result is a pure function of the seed and the candidate list.
    """
    for attempt in range(_ATTEMPTS):
        rng = random.Random(f"{seed}:{attempt}")
        order = candidates[:]
        rng.shuffle(order)
        remaining = {d: dict(t) for d, t in targets.items()}
        chosen: list[dict] = []
        units: set[int] = set()
        for candidate in order:
            if candidate["unit"] in units:
                continue
            if all(remaining[d].get(candidate[d], 0) > 0 for d in remaining):
                chosen.append(candidate)
                units.add(candidate["unit"])
                for d in remaining:
                    remaining[d][candidate[d]] -= 1
                if len(chosen) == size:
                    return chosen
    return None


def draw_pool(
    engine: Engine,
    study_name: str,
    size: int,
    *,
    quotas: list[Quota] | None = None,
    seed: int = 0,
    condition: str | None = "type1",
    languages: set[str] | None = None,
    add: bool = False,
    actor: Actor,
) -> PoolResult:
    """Draw ``size`` review units into the study and create their tasks (one per rubric).

    Refuses (rather than silently deviating) when the quotas cannot all be met by the
    candidates, naming the margins that fall short.
    """
    if size < 1:
        raise InvalidInput("the pool size must be at least 1")
    quotas = quotas or []
    dims = [q.dimension for q in quotas]
    if len(set(dims)) != len(dims):
        raise InvalidInput("give at most one quota per margin")
    with write_session(engine) as session:
        me = acting_user(session, actor, roles=LEAD_ROLES)
        study = _get_study(session, study_name)
        require_study_lead(session, me, study)
        existing = session.exec(select(func.count()).select_from(Task).where(Task.study_id == study.id)).one()
        if existing and not add:
            raise Conflict(f"study {study_name!r} already has {existing} tasks; pass --add to draw more units")
        by_response = any(get_rubric(k).needs_response for k in study.rubric_keys)
        if not by_response and "model" in dims:
            raise InvalidInput("a model quota needs a study with a response rubric (B)")
        candidates = _candidates(session, study, condition if by_response else None, languages)
        per_item = len({c["unit"] for c in candidates})
        if per_item < size:
            what = f"responses ({condition})" if by_response else "items with a usable bundle"
            if "judge" in study.rubric_keys:
                what = "judge-audit traces"
            raise InvalidInput(f"only {per_item} distinct items have {what} available; cannot draw {size}")
        targets = {q.dimension: q.allocate(size) for q in quotas}
        chosen = _draw(candidates, size, targets, seed)
        if chosen is None:
            raise InvalidInput(_shortfall_message(candidates, targets))
        start = session.exec(select(func.coalesce(func.max(Task.pool_rank), 0)).where(Task.study_id == study.id)).one()
        tasks = []
        for rank, unit in enumerate(chosen, start=start + 1):
            for key in study.rubric_keys:
                rubric = get_rubric(key)
                unit_key = f"{key}:r{unit['response_id']}" if rubric.needs_response else f"{key}:i{unit['item_id']}"
                tasks.append(
                    Task(
                        study_id=study.id,
                        rubric=key,
                        item_id=unit["item_id"],
                        response_id=unit["response_id"] if rubric.needs_response else None,
                        unit_key=unit_key,
                        pool_rank=rank,
                    )
                )
        session.add_all(tasks)
        achieved = {
            d: dict(Counter(c[d] for c in chosen))
            for d in ("subset", "provenance", "content", "model")
            if any(c[d] is not None for c in chosen)  # judge-audit records have no taxonomy labels
        }

        settings = dict(study.settings)
        settings.setdefault("pools", []).append(
            {"size": size, "seed": seed, "condition": condition, "quotas": {q.dimension: q.targets for q in quotas}}
        )
        study.settings = settings
        session.add(study)
        audit.record(
            session,
            actor_id=me.id if me else None,
            action="study.pool",
            entity="study",
            entity_id=study.id,
            study_id=study.id,
            after={"size": size, "seed": seed, "tasks": len(tasks), "achieved": achieved},
        )
        result = PoolResult(study_name, len(chosen), len(tasks), achieved)
    refresh_statistics(engine, ["task"])
    return result


def _shortfall_message(candidates: list[dict], targets: dict[str, dict[str, int]]) -> str:
    lines = ["the quotas cannot all be met by the available candidates:"]
    for dimension, wanted in targets.items():
        for value, count in sorted(wanted.items()):
            have = len({c["unit"] for c in candidates if c[dimension] == value})
            if have < count:
                lines.append(f"  {dimension}={value}: quota {count}, only {have} distinct items available")
    if len(lines) == 1:
        lines.append("  each margin alone can be met, but not all together; relax one quota")
    return "\n".join(lines)
