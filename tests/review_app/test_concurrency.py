"""Concurrent submits from many threads: nothing lost, nothing doubled, no 'database is locked'."""

import threading
from concurrent.futures import ThreadPoolExecutor

import pytest
from sqlalchemy import func
from sqlmodel import select

from review_app.db.engine import read_session
from review_app.db.models import Annotation, AnnotationScore, Assignment
from review_app.rubrics import RUBRIC_A, ScoreSheet
from review_app.services import assignment, reviewing, studies
from review_app.services.actors import SYSTEM
from review_app.services.errors import Conflict

from .factories import add_users, seed_items

THREADS = 16
PER_THREAD = 25
SHEET = ScoreSheet(rubric="A", scores=dict.fromkeys(RUBRIC_A.dimension_keys, 1))


@pytest.fixture
def big_study(engine, tmp_path):
    seed_items(engine, tmp_path, THREADS * PER_THREAD, subsets=("MEDMISQA",))
    add_users(engine, THREADS)
    studies.create_study(engine, "load", rubrics=["A"], actor=SYSTEM)
    studies.draw_pool(engine, "load", THREADS * PER_THREAD, seed=1, actor=SYSTEM)
    assignment.assign(engine, "load", raters=1, dual_share=0.0, actor=SYSTEM)
    with read_session(engine) as session:
        rows = session.exec(select(Assignment.id, Assignment.reviewer_id)).all()
    return engine, rows


def _run(workers, fn, jobs):
    errors = []
    barrier = threading.Barrier(workers)

    def wrapped(job):
        barrier.wait()
        try:
            return fn(job)
        except Exception as exc:  # collected and asserted below
            errors.append(exc)
            return exc

    with ThreadPoolExecutor(workers) as pool:
        results = list(pool.map(wrapped, jobs))
    return results, errors


def test_sixteen_threads_each_submitting_25_annotations(big_study):
    engine, rows = big_study
    by_reviewer = {}
    for aid, rid in rows:
        by_reviewer.setdefault(rid, []).append(aid)
    assert len(by_reviewer) == THREADS and {len(v) for v in by_reviewer.values()} == {PER_THREAD}

    def work(item):
        rid, aids = item
        for n, aid in enumerate(aids):
            reviewing.save_draft(engine, aid, rid, {"scores": {"base_validity": 1}}, seconds_on_task=n)
            reviewing.submit(engine, aid, rid, SHEET, client_token=f"{aid}-tok", base_revision=0)

    _results, errors = _run(THREADS, work, list(by_reviewer.items()))
    assert errors == []
    with read_session(engine) as session:
        annotations = session.exec(select(func.count()).select_from(Annotation)).one()
        scores = session.exec(select(func.count()).select_from(AnnotationScore)).one()
        submitted = session.exec(
            select(func.count()).select_from(Assignment).where(Assignment.status == "submitted")
        ).one()
    assert annotations == THREADS * PER_THREAD == submitted
    assert scores == annotations * len(RUBRIC_A.dimensions)


def test_sixteen_threads_racing_to_submit_the_same_assignment_twice(big_study):
    engine, rows = big_study
    aid, rid = rows[0]

    def double_click(_n):
        first = reviewing.submit(engine, aid, rid, SHEET, client_token="one-form", base_revision=0)
        second = reviewing.submit(engine, aid, rid, SHEET, client_token="one-form", base_revision=0)
        return first, second

    results, errors = _run(THREADS, double_click, range(THREADS))
    assert errors == []
    outcomes = [r for pair in results for r in pair]
    assert len({r.annotation_id for r in outcomes}) == 1
    assert sum(r.created for r in outcomes) == 1

    # Different windows (different tokens) racing on the same base revision: one wins, the rest conflict.
    aid2, rid2 = rows[1]

    def stale_windows(n):
        return reviewing.submit(engine, aid2, rid2, SHEET, client_token=f"window-{n}", base_revision=0)

    results, errors = _run(THREADS, stale_windows, range(THREADS))
    assert sum(1 for r in results if not isinstance(r, Exception)) == 1
    assert all(isinstance(e, Conflict) for e in errors) and len(errors) == THREADS - 1
    with read_session(engine) as session:
        counts = dict(
            session.exec(
                select(Annotation.assignment_id, func.count())
                .where(Annotation.assignment_id.in_([aid, aid2]))
                .group_by(Annotation.assignment_id)
            ).all()
        )
    assert counts == {aid: 1, aid2: 1}
