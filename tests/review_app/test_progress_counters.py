"""Progress counters kept by triggers (migration 0007) equal a full scan after every kind of write.

The Progress page reads ``progress_cell``, ``assignment_tally`` and ``task.submitted_count``
instead of aggregating every task and assignment. These tests drive a study through every write
path that changes what the page counts (pool draw, assignment, submit, edit, skip, flag, unflag,
reassignment of a leaving reviewer, a second pool draw, and raw SQL: a task's target changed,
assignments and a task deleted) and after each step compare the service's answer with a full
scan of the tasks and assignments (kept here as the reference), on SQLite and PostgreSQL. A database migrated
from revision 0006 with work already in it gets the same counters from the migration's backfill.
"""

from __future__ import annotations

from datetime import timedelta

from sqlalchemy import and_, case, func, select, text

from review_app.db.engine import read_session
from review_app.db.migrate import upgrade
from review_app.db.models import Annotation, Assignment, Item, Reviewer, Study, StudyTally, Task, utcnow
from review_app.rubrics import ScoreSheet, get_rubric
from review_app.services import assignment as assigning
from review_app.services import progress, reviewing, studies
from review_app.services.actors import SYSTEM

from .factories import add_users, rate, seed_items, seed_responses, slots_by_task

A = get_rubric("A").dimension_keys
B = get_rubric("B").dimension_keys


def _scan(engine, study_name: str) -> dict:
    """What the Progress page computed by scanning every task and assignment (before migration 0007)."""
    with read_session(engine) as session:
        study_id = session.execute(select(Study.id).where(Study.name == study_name)).scalar_one()
        done = (
            select(Assignment.task_id, func.count().label("done"))
            .where(Assignment.study_id == study_id, Assignment.status == "submitted")
            .group_by(Assignment.task_id)
            .subquery()
        )
        complete = case((func.coalesce(done.c.done, 0) >= Task.target_raters, 1), else_=0)
        multi = Task.target_raters >= 2
        started = func.coalesce(done.c.done, 0) > 0
        cells = session.execute(
            select(
                Task.rubric,
                Item.subset,
                func.count(),
                func.sum(complete),
                func.sum(case((multi, 1), else_=0)),
                func.sum(case((multi, complete), else_=0)),
                func.sum(case((and_(multi, ~started), 1), else_=0)),
            )
            .join(Item, Item.id == Task.item_id)
            .outerjoin(done, done.c.task_id == Task.id)
            .where(Task.study_id == study_id)
            .group_by(Task.rubric, Item.subset)
        ).all()
        statuses = dict(
            session.execute(
                select(Assignment.status, func.count())
                .where(Assignment.study_id == study_id)
                .group_by(Assignment.status)
            ).all()
        )
        reviewers = session.execute(
            select(
                Reviewer.username,
                func.sum(case((Assignment.status != "withdrawn", 1), else_=0)),
                func.sum(case((Assignment.status == "submitted", 1), else_=0)),
                func.sum(case((Assignment.status.in_(("assigned", "in_progress")), 1), else_=0)),
                func.sum(case((Assignment.status == "skipped", 1), else_=0)),
                func.sum(case((Assignment.flagged, 1), else_=0)),
            )
            .join(Assignment, Assignment.reviewer_id == Reviewer.id)
            .where(Assignment.study_id == study_id)
            .group_by(Reviewer.username)
        ).all()
        first = (
            select(Annotation.reviewer_id, Annotation.seconds_on_task, Annotation.created_at)
            .join(Assignment, Assignment.id == Annotation.assignment_id)
            .where(Assignment.study_id == study_id, Annotation.revision == 1)
            .subquery()
        )
        ranked = select(
            first,
            func.row_number().over(partition_by=first.c.reviewer_id, order_by=first.c.seconds_on_task).label("rn"),
            func.count().over(partition_by=first.c.reviewer_id).label("n"),
        ).subquery()
        middle = ranked.c.rn.in_(((ranked.c.n + 1) // 2, (ranked.c.n + 2) // 2))
        week_ago = utcnow() - timedelta(days=7)
        names = dict(session.execute(select(Reviewer.id, Reviewer.username)).all())
        throughput = {
            names[r[0]]: (round(float(r[4]), 1), round(r[1] / r[2], 1), int(r[3] or 0))
            for r in session.execute(
                select(
                    ranked.c.reviewer_id,
                    func.count(),
                    func.count(func.distinct(func.date(ranked.c.created_at))),
                    func.sum(case((ranked.c.created_at >= week_ago, 1), else_=0)),
                    func.avg(case((middle, ranked.c.seconds_on_task), else_=None)),
                ).group_by(ranked.c.reviewer_id)
            ).all()
        }
    by_rubric: dict[str, list[int]] = {}
    by_subset: dict[str, list[int]] = {}
    pairs = [0, 0, 0]
    for rubric, subset, tasks, completed, planned, paired, unstarted in cells:
        for table, key in ((by_rubric, rubric), (by_subset, subset)):
            row = table.setdefault(key, [0, 0])
            row[0] += int(tasks)
            row[1] += int(completed or 0)
        pairs = [pairs[0] + int(planned or 0), pairs[1] + int(paired or 0), pairs[2] + int(unstarted or 0)]
    return {
        "by_rubric": {k: tuple(v) for k, v in sorted(by_rubric.items())},
        "by_subset": {k: tuple(v) for k, v in sorted(by_subset.items())},
        "assignments": {k: int(v) for k, v in statuses.items()},
        "pairs": {"planned": pairs[0], "complete": pairs[1], "not_started": pairs[2]},
        "reviewers": {name: tuple(int(x or 0) for x in counts) for name, *counts in reviewers},
        "throughput": throughput,
    }


def _counted(engine, study_name: str) -> dict:
    report = progress.study_progress(engine, study_name)
    return {
        "by_rubric": {r["rubric"]: (r["tasks"], r["complete"]) for r in report.by_rubric},
        "by_subset": {r["subset"]: (r["tasks"], r["complete"]) for r in report.by_subset},
        "assignments": report.assignments,
        "pairs": {k: report.pairs[k] for k in ("planned", "complete", "not_started")},
        "reviewers": {
            r["username"]: tuple(r[k] for k in ("assigned", "submitted", "open", "skipped", "flagged"))
            for r in report.by_reviewer
        },
        "throughput": {
            r["username"]: (r["median_seconds"], r["per_active_day"], r["last_7_days"])
            for r in report.by_reviewer
            if r["median_seconds"] is not None
        },
    }


def _annotation_tally(engine, study_name: str) -> tuple[tuple, tuple]:
    """(study_tally's row, the same two numbers counted from every annotation of the study)."""
    with read_session(engine) as session:
        study_id = session.execute(select(Study.id).where(Study.name == study_name)).scalar_one()
        kept = session.execute(
            select(StudyTally.annotations, StudyTally.last_annotation_id).where(StudyTally.study_id == study_id)
        ).first()
        counted = session.execute(
            select(func.count(Annotation.id), func.max(Annotation.id))
            .join(Assignment, Assignment.id == Annotation.assignment_id)
            .where(Assignment.study_id == study_id)
        ).one()
    return (tuple(kept) if kept else (0, None)), (counted[0], counted[1])


def _same(engine, study_name: str = "s") -> dict:
    expected = _scan(engine, study_name)
    assert _counted(engine, study_name) == expected
    kept, counted = _annotation_tally(engine, study_name)
    assert kept == counted
    return expected


def _live(engine, rubric: str) -> list:
    return [a for slots in slots_by_task(engine, "s", rubric).values() for a in slots]


def test_counters_equal_a_full_scan_after_every_kind_of_write(engine, tmp_path):
    items = seed_items(engine, tmp_path, 12, subsets=("MEDMISQA", "MEDMISMCQA"))
    seed_responses(engine, tmp_path, items, models=("model-a",))
    users = add_users(engine, 4)
    studies.create_study(engine, "s", rubrics=["A", "B"], actor=SYSTEM)
    studies.create_study(engine, "other", rubrics=["A"], actor=SYSTEM)
    assigning.enrol(engine, "s", [u.username for u in users], actor=SYSTEM)
    assigning.enrol(engine, "other", [u.username for u in users[:2]], actor=SYSTEM)
    studies.draw_pool(engine, "s", 8, seed=1, actor=SYSTEM)
    studies.draw_pool(engine, "other", 5, seed=2, actor=SYSTEM)
    _same(engine)
    assigning.assign(engine, "s", raters=2, dual_share=0.5, seed=3, actor=SYSTEM)
    assigning.assign(engine, "other", raters=1, seed=4, actor=SYSTEM)
    first = _same(engine)
    assert first["pairs"]["planned"] > 0 and first["assignments"]["assigned"] > 0

    a_slots, b_slots = _live(engine, "A"), _live(engine, "B")
    for n, slot in enumerate(a_slots[:5]):
        sheet = ScoreSheet(rubric="A", scores=dict.fromkeys(A, 1))
        reviewing.submit(engine, slot.id, slot.reviewer_id, sheet, client_token=f"t{slot.id}", base_revision=0,
                         seconds_on_task=[90.0, 12.5, 40.0, 7.25, 300.0][n])  # fmt: skip
    for slot in b_slots[:4]:
        rate(engine, slot, dict.fromkeys(B, 2))
    after_submits = _same(engine)
    assert after_submits["assignments"]["submitted"] == 9
    rate(engine, a_slots[0], dict.fromkeys(A, 2), base_revision=1)  # an edit is a revision, not a new submit
    assert _same(engine) == after_submits

    reviewing.skip(engine, a_slots[6].id, a_slots[6].reviewer_id)
    reviewing.set_flag(engine, b_slots[5].id, b_slots[5].reviewer_id, True, "The question is ambiguous.")
    flagged = _same(engine)
    assert flagged["assignments"].get("skipped") == 1 and sum(r[4] for r in flagged["reviewers"].values()) == 1
    reviewing.set_flag(engine, b_slots[5].id, b_slots[5].reviewer_id, False, "")
    _same(engine)

    assigning.reassign(engine, "s", users[0].username, seed=5, actor=SYSTEM)  # open slots withdrawn, re-given
    after_reassign = _same(engine)
    assert after_reassign["assignments"].get("withdrawn", 0) > 0

    studies.draw_pool(engine, "s", 4, seed=1, add=True, actor=SYSTEM)  # a second draw adds tasks
    assigning.assign(engine, "s", raters=2, dual_share=1.0, seed=6, actor=SYSTEM)
    _same(engine)

    with engine.begin() as connection:  # writes no service makes, made anyway: the triggers still count
        task_id = (
            connection.execute(
                select(Task.id).join(Study, Study.id == Task.study_id).where(Study.name == "s").order_by(Task.id)
            )
            .scalars()
            .first()
        )
        connection.execute(text("UPDATE task SET target_raters = 3 WHERE id = :t"), {"t": task_id})
    _same(engine)
    with engine.begin() as connection:
        victim = (
            connection.execute(
                select(Task.id).join(Study, Study.id == Task.study_id).where(Study.name == "s").order_by(Task.id.desc())
            )
            .scalars()
            .first()
        )
        connection.execute(text("DELETE FROM assignment WHERE task_id = :t"), {"t": victim})
        connection.execute(text("DELETE FROM task_flag WHERE task_id = :t"), {"t": victim})
        connection.execute(text("DELETE FROM task WHERE id = :t"), {"t": victim})
        connection.execute(text("UPDATE assignment SET status = 'submitted' WHERE status = 'assigned' AND id % 3 = 0"))
    final = _same(engine)
    assert sum(t for t, _c in final["by_rubric"].values()) > 0
    _same(engine, "other")


def test_a_database_migrated_with_work_in_it_counts_what_it_holds(tmp_path):
    """Upgrading from 0006 fills the counters from the rows already there (the migration's backfill)."""
    from review_app.db.engine import make_engine

    url = f"sqlite:///{tmp_path / 'old.db'}"
    engine = make_engine(url)
    upgrade(engine, "0006")
    with engine.begin() as connection:
        connection.execute(text("INSERT INTO study (name, description, rubrics, status, settings, created_at) "
                                "VALUES ('s', '', '[\"A\"]', 'active', '{}', '2026-01-01')"))  # fmt: skip
        connection.execute(text(
            "INSERT INTO reviewer (username, display_name, role, profession, country, languages, active, "
            "failed_logins, session_version, created_at) VALUES ('rev', 'R', 'reviewer', '', '', 'en', 1, 0, 1, "
            "'2026-01-01')"
        ))  # fmt: skip
    items = seed_items(engine, tmp_path, 6, subsets=("MEDMISQA", "MEDMISHLE"))
    del items
    with engine.begin() as connection:
        item_ids = connection.execute(text("SELECT id FROM item ORDER BY id")).scalars().all()
        for rank, item_id in enumerate(item_ids, start=1):
            connection.execute(
                text(
                    "INSERT INTO task (study_id, rubric, item_id, unit_key, pool_rank, target_raters, locked, "
                    "created_at) VALUES (1, 'A', :i, :u, :r, :n, 0, '2026-01-01')"
                ),
                {"i": item_id, "u": f"A:i{item_id}", "r": rank, "n": 1 + rank % 2},
            )
            connection.execute(
                text(
                    "INSERT INTO assignment (task_id, reviewer_id, study_id, slot, status, flagged, note, "
                    "assigned_at) VALUES (:t, 1, 1, 1, :s, :f, '', '2026-01-01')"
                ),
                {"t": rank, "s": "submitted" if rank % 3 else "assigned", "f": rank == 2},
            )
    upgrade(engine)
    counted = _same(engine)
    assert counted["assignments"] == {"submitted": 4, "assigned": 2}
    assert counted["pairs"] == {"planned": 3, "complete": 0, "not_started": 1}
    assert counted["reviewers"] == {"rev": (6, 4, 2, 0, 1)}
    engine.dispose()


def test_concurrent_submits_keep_the_counters_exact(engine, tmp_path):
    """Reviewers submitting at once (threads; row locks on the shared cells on PostgreSQL) lose no count."""
    import threading

    items = seed_items(engine, tmp_path, 30, subsets=("MEDMISQA",))
    del items
    users = add_users(engine, 6)
    studies.create_study(engine, "s", rubrics=["A"], actor=SYSTEM)
    assigning.enrol(engine, "s", [u.username for u in users], actor=SYSTEM)
    studies.draw_pool(engine, "s", 30, seed=1, actor=SYSTEM)
    assigning.assign(engine, "s", raters=2, dual_share=1.0, seed=2, actor=SYSTEM)
    slots = _live(engine, "A")
    mine: dict[int, list] = {}
    for slot in slots:
        mine.setdefault(slot.reviewer_id, []).append(slot)
    errors: list[BaseException] = []

    def work(queue: list) -> None:
        try:
            for slot in queue:
                rate(engine, slot, dict.fromkeys(A, 1))
        except BaseException as error:
            errors.append(error)

    threads = [threading.Thread(target=work, args=(queue,)) for queue in mine.values()]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    counted = _same(engine)
    assert counted["assignments"] == {"submitted": 60}
    assert counted["by_rubric"] == {"A": (30, 30)} and counted["pairs"]["complete"] == 30
