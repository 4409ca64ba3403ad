"""Study progress by rubric, subset and reviewer, computed in the database (fast on large studies).

Besides the counts, what a lead acts on (issue 18): the reviewers' throughput (submitted ratings
per active day, and in the last 7 days) and median time on task (first submissions only, so an
edit does not count twice), the dual-rated tasks still waiting for one of their raters, the
reviewers' flags by status, and a warning for each reviewer far behind the panel (see
:data:`BEHIND_RATIO`).
"""

from __future__ import annotations

import statistics
from dataclasses import asdict, dataclass, field
from datetime import timedelta

from sqlalchemy import Engine, and_, case, func
from sqlmodel import select

from review_app.db.engine import read_session
from review_app.db.models import FLAG_STATUSES, Annotation, Assignment, Item, Reviewer, Study, Task, TaskFlag, utcnow
from review_app.services.errors import NotFound

BEHIND_RATIO = 0.5
"""A reviewer is far behind when their share of assigned work done is below this fraction of the
panel's median share, and they still have open work (only when the panel median is above 10%)."""


@dataclass
class Progress:
    """Counts of one study. A task is complete when all its target rater slots are submitted."""

    study: str
    tasks: int
    complete_tasks: int
    assignments: dict[str, int]
    by_rubric: list[dict] = field(default_factory=list)
    by_subset: list[dict] = field(default_factory=list)
    by_reviewer: list[dict] = field(default_factory=list)
    flags: dict[str, int] = field(default_factory=dict)
    pairs: dict[str, int] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)

    def to_dict(self) -> dict:
        return asdict(self)


def study_progress(engine: Engine, study_name: str) -> Progress:
    """Counts by rubric, subset and reviewer, pairs, throughput and flags, aggregated in the database."""
    with read_session(engine) as session:
        study = session.exec(select(Study).where(Study.name == study_name)).first()
        if study is None:
            raise NotFound(f"no study named {study_name!r}")
        done = (
            select(Assignment.task_id, func.count().label("done"))
            .where(Assignment.study_id == study.id, Assignment.status == "submitted")
            .group_by(Assignment.task_id)
            .subquery()
        )
        complete = case((func.coalesce(done.c.done, 0) >= Task.target_raters, 1), else_=0)
        multi = Task.target_raters >= 2
        started = func.coalesce(done.c.done, 0) > 0
        cells = session.exec(
            select(
                Task.rubric,
                Item.subset,
                func.count(),
                func.sum(complete),
                # dual-rated tasks in the same pass: planned, complete, not started
                func.sum(case((multi, 1), else_=0)),
                func.sum(case((multi, complete), else_=0)),
                func.sum(case((and_(multi, ~started), 1), else_=0)),
            )
            .join(Item, Item.id == Task.item_id)
            .outerjoin(done, done.c.task_id == Task.id)
            .where(Task.study_id == study.id)
            .group_by(Task.rubric, Item.subset)
        ).all()
        status_counts = dict(
            session.exec(
                select(Assignment.status, func.count())
                .where(Assignment.study_id == study.id)
                .group_by(Assignment.status)
            ).all()
        )
        per_reviewer = (
            select(
                Assignment.reviewer_id,
                func.sum(case((Assignment.status != "withdrawn", 1), else_=0)).label("assigned"),
                func.sum(case((Assignment.status == "submitted", 1), else_=0)).label("submitted"),
                func.sum(case((Assignment.status.in_(("assigned", "in_progress")), 1), else_=0)).label("open"),
                func.sum(case((Assignment.status == "skipped", 1), else_=0)).label("skipped"),
                func.sum(case((Assignment.flagged, 1), else_=0)).label("flagged"),
            )
            .where(Assignment.study_id == study.id)
            .group_by(Assignment.reviewer_id)
            .subquery()
        )
        reviewer_rows = session.exec(
            select(Reviewer.id, Reviewer.username, Reviewer.display_name, per_reviewer)
            .join(per_reviewer, per_reviewer.c.reviewer_id == Reviewer.id)
            .order_by(Reviewer.username)
        ).all()
        # First submissions only (an edit is not a second unit of work); everything aggregated in the
        # database, so the page stays fast on large studies.
        first = (
            select(Annotation.reviewer_id, Annotation.seconds_on_task, Annotation.created_at)
            .join(Assignment, Assignment.id == Annotation.assignment_id)
            .where(Assignment.study_id == study.id, Annotation.revision == 1)
            .subquery()
        )
        # The median in SQL on both databases (SQLite has no percentile function): the mean of the
        # middle row (odd count) or the two middle rows (even count) of each reviewer's ordering.
        ranked = select(
            first,
            func.row_number().over(partition_by=first.c.reviewer_id, order_by=first.c.seconds_on_task).label("rn"),
            func.count().over(partition_by=first.c.reviewer_id).label("n"),
        ).subquery()
        middle = ranked.c.rn.in_(((ranked.c.n + 1) // 2, (ranked.c.n + 2) // 2))
        week_ago = utcnow() - timedelta(days=7)
        throughput = {
            r[0]: (int(r[1]), int(r[2]), int(r[3] or 0), r[4])
            for r in session.exec(
                select(
                    ranked.c.reviewer_id,
                    func.count(),
                    func.count(func.distinct(func.date(ranked.c.created_at))),
                    func.sum(case((ranked.c.created_at >= week_ago, 1), else_=0)),
                    func.avg(case((middle, ranked.c.seconds_on_task), else_=None)),
                ).group_by(ranked.c.reviewer_id)
            ).all()
        }
        flag_rows = session.exec(
            select(TaskFlag.status, func.count()).where(TaskFlag.study_id == study.id).group_by(TaskFlag.status)
        ).all()
    by_rubric: dict[str, dict] = {}
    by_subset: dict[str, dict] = {}
    planned_pairs = complete_pairs = unstarted_pairs = 0
    for rubric, subset, tasks, completed, planned, paired, unstarted in cells:
        planned_pairs += int(planned or 0)
        complete_pairs += int(paired or 0)
        unstarted_pairs += int(unstarted or 0)
        for table, key, name in ((by_rubric, rubric, "rubric"), (by_subset, subset, "subset")):
            row = table.setdefault(key, {name: key, "tasks": 0, "complete": 0})
            row["tasks"] += int(tasks)
            row["complete"] += int(completed or 0)
    by_reviewer = []
    for r in reviewer_rows:
        row = {
            "username": r.username,
            "display_name": r.display_name,
            **{k: int(getattr(r, k) or 0) for k in ("assigned", "submitted", "open", "skipped", "flagged")},
        }
        n_first, n_days, recent, median = throughput.get(r.id, (0, 0, 0, None))
        row["median_seconds"] = round(float(median), 1) if median is not None else None
        row["per_active_day"] = round(n_first / n_days, 1) if n_days else 0.0
        row["last_7_days"] = recent
        row["done_share"] = row["submitted"] / row["assigned"] if row["assigned"] else 0.0
        by_reviewer.append(row)
    pairs = {
        "planned": planned_pairs,
        "complete": complete_pairs,
        "waiting_for_a_rater": planned_pairs - complete_pairs - unstarted_pairs,
        "not_started": unstarted_pairs,
    }
    flags = dict.fromkeys(FLAG_STATUSES, 0) | {status: int(n) for status, n in flag_rows}
    return Progress(
        study=study_name,
        tasks=sum(r["tasks"] for r in by_rubric.values()),
        complete_tasks=sum(r["complete"] for r in by_rubric.values()),
        assignments={k: int(v) for k, v in status_counts.items()},
        by_rubric=[by_rubric[k] for k in sorted(by_rubric)],
        by_subset=[by_subset[k] for k in sorted(by_subset)],
        by_reviewer=by_reviewer,
        flags=flags,
        pairs=pairs,
        warnings=behind_warnings(by_reviewer),
    )


def behind_warnings(by_reviewer: list[dict]) -> list[str]:
    """One sentence per reviewer far behind the panel (see :data:`BEHIND_RATIO`), most behind first."""
    shares = [r["done_share"] for r in by_reviewer if r["assigned"]]
    if len(shares) < 2:
        return []
    median = statistics.median(shares)
    if median <= 0.1:
        return []
    behind = [
        r for r in by_reviewer if r["assigned"] and r["open"] + r["skipped"] and r["done_share"] < BEHIND_RATIO * median
    ]
    return [
        f"{r['username']} is far behind: {r['submitted']:,} of {r['assigned']:,} done ({r['done_share']:.0%}); "
        f"the panel's median is {median:.0%}."
        for r in sorted(behind, key=lambda r: r["done_share"])
    ]
