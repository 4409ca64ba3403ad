"""Study progress by rubric, subset and reviewer, computed in the database (fast on large studies).

Besides the counts, what a lead acts on: the reviewers' throughput (submitted ratings
per active day, and in the last 7 days) and median time on task (first submissions only, so an
edit does not count twice), the dual-rated tasks still waiting for one of their raters, the
reviewers' flags by status, and a warning for each reviewer far behind the panel (see
:data:`BEHIND_RATIO`).
"""

from __future__ import annotations

import statistics
from dataclasses import asdict, dataclass, field
from datetime import timedelta

from sqlalchemy import Engine, bindparam, case, func
from sqlmodel import select

from review_app.analysis.formatting import format_percent
from review_app.db.engine import read_session
from review_app.db.models import (
    FLAG_STATUSES,
    AssignmentTally,
    FirstSubmission,
    ProgressCell,
    Reviewer,
    Study,
    TaskFlag,
    utcnow,
)
from review_app.services.actors import SYSTEM, Actor
from review_app.services.errors import NotFound
from review_app.services.studies import lead_of

_REVIEWER_COUNTS = ("assigned", "submitted", "open", "skipped", "flagged")
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


def study_progress(engine: Engine, study_name: str, *, actor: Actor = SYSTEM) -> Progress:
    """Counts by rubric, subset and reviewer, pairs, throughput and flags, aggregated in the database.

    Only for a lead of the study or an admin (``actor``; the command line acts as the system).
    """
    with read_session(engine) as session:
        study = session.exec(select(Study).where(Study.name == study_name)).first()
        if study is None:
            raise NotFound(f"no study named {study_name!r}")
        lead_of(session, actor, study)
        # Counters kept by database triggers (migration 0007): reading them costs the same at any
        # study size, where the scans they replace took 20-50 s at 500,000 items.
        cells = session.exec(
            select(
                ProgressCell.rubric,
                ProgressCell.subset,
                ProgressCell.tasks,
                ProgressCell.complete,
                ProgressCell.planned_pairs,
                ProgressCell.complete_pairs,
                ProgressCell.unstarted_pairs,
            )
            .where(ProgressCell.study_id == study.id, ProgressCell.tasks > 0)
            .order_by(ProgressCell.rubric, ProgressCell.subset)
        ).all()
        tallies = session.exec(
            select(
                AssignmentTally.reviewer_id, AssignmentTally.status, AssignmentTally.n, AssignmentTally.flagged
            ).where(AssignmentTally.study_id == study.id, AssignmentTally.n > 0)
        ).all()
        status_counts: dict[str, int] = {}
        per_reviewer: dict[int, dict[str, int]] = {}
        for reviewer_id, status, n, flagged in tallies:
            status_counts[status] = status_counts.get(status, 0) + n
            counts = per_reviewer.setdefault(reviewer_id, dict.fromkeys(_REVIEWER_COUNTS, 0))
            counts["assigned"] += n if status != "withdrawn" else 0
            counts["submitted"] += n if status == "submitted" else 0
            counts["open"] += n if status in ("assigned", "in_progress") else 0
            counts["skipped"] += n if status == "skipped" else 0
            counts["flagged"] += flagged
        reviewer_rows = session.exec(
            select(Reviewer.id, Reviewer.username, Reviewer.display_name)
            .where(
                Reviewer.id.in_(
                    select(AssignmentTally.reviewer_id).where(
                        AssignmentTally.study_id == study.id, AssignmentTally.n > 0
                    )
                )
            )
            .order_by(Reviewer.username)
        ).all()
        # First submissions only (an edit is not a second unit of work), from the table a trigger
        # keeps (migration 0007): the counts read one index range per study, each median the middle
        # row or two of the reviewer's range of the other index, whatever the study's size.
        week_ago = utcnow() - timedelta(days=7)
        counts = session.exec(
            select(
                FirstSubmission.reviewer_id,
                func.count(),
                func.count(func.distinct(func.date(FirstSubmission.created_at))),
                func.sum(case((FirstSubmission.created_at >= week_ago, 1), else_=0)),
            )
            .where(FirstSubmission.study_id == study.id)
            .group_by(FirstSubmission.reviewer_id)
        ).all()
        middle = (  # one compiled statement, run once per reviewer through the connection
            select(FirstSubmission.seconds_on_task)
            .where(FirstSubmission.study_id == study.id, FirstSubmission.reviewer_id == bindparam("reviewer"))
            .order_by(FirstSubmission.seconds_on_task)
            .offset(bindparam("skip"))
            .limit(bindparam("take"))
        )
        connection = session.connection()
        throughput = {}
        for reviewer_id, n, days, recent in counts:
            # the middle row (odd count) or the two middle rows (even count) of the reviewer's range
            values = connection.execute(middle, {"reviewer": reviewer_id, "skip": (n - 1) // 2, "take": 2 - n % 2})
            values = values.scalars().all()
            throughput[reviewer_id] = (int(n), int(days), int(recent or 0), sum(values) / len(values))
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
        row = {"username": r.username, "display_name": r.display_name, **per_reviewer[r.id]}
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
        f"{r['username']} is far behind: {r['submitted']:,} of {r['assigned']:,} done "
        f"({format_percent(r['done_share'], 0)}); the panel's median is {format_percent(median, 0)}."
        for r in sorted(behind, key=lambda r: r["done_share"])
    ]
