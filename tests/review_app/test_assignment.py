"""Assignment properties: k raters, balanced load, language-aware, no repeats, reassignment."""

from collections import Counter, defaultdict

import pytest
from sqlmodel import select

from review_app.db.engine import read_session
from review_app.db.models import Assignment, Item, Reviewer, Task
from review_app.rubrics import RUBRIC_A, ScoreSheet
from review_app.services import assignment, reviewing, studies
from review_app.services.actors import SYSTEM
from review_app.services.errors import InvalidInput

from .factories import add_users, seed_items, seed_responses


def _live(engine, study_name):
    study = studies.get_study(engine, study_name)
    with read_session(engine) as session:
        return session.exec(
            select(Assignment, Task, Item, Reviewer)
            .join(Task, Task.id == Assignment.task_id)
            .join(Item, Item.id == Task.item_id)
            .join(Reviewer, Reviewer.id == Assignment.reviewer_id)
            .where(Assignment.study_id == study.id)
        ).all()


@pytest.fixture
def study(engine, tmp_path):
    items = seed_items(engine, tmp_path, 89)  # 1 in 5 is Chinese (MEDMISJOURNEY)
    seed_responses(engine, tmp_path, items)
    add_users(engine, 14, zh_readers=4)
    studies.create_study(engine, "panel", rubrics=["A", "B"], actor=SYSTEM)
    studies.draw_pool(engine, "panel", 89, seed=5, actor=SYSTEM)
    return engine


def test_dual_share_k_raters_balance_language_and_no_repeats(study):
    result = assignment.assign(study, "panel", raters=2, dual_share=64 / 89, seed=1, actor=SYSTEM)
    assert result.dual_units == 64 and result.unfilled == []
    rows = [r for r in _live(study, "panel") if r[0].status != "withdrawn"]
    per_task = defaultdict(list)
    for a, task, _item, reviewer in rows:
        per_task[task.id].append((a.slot, reviewer.id))
    with read_session(study) as session:
        tasks = session.exec(select(Task)).all()
    assert len(per_task) == len(tasks) == 178
    for task in tasks:
        slots = sorted(s for s, _r in per_task[task.id])
        assert slots == list(range(1, task.target_raters + 1))  # exactly k raters
        assert len({r for _s, r in per_task[task.id]}) == len(slots)  # never the same reviewer twice
    assert Counter(t.target_raters for t in tasks) == {2: 128, 1: 50}
    # A and B of one unit go to the same reviewers
    by_unit = defaultdict(set)
    for a, task, _item, reviewer in rows:
        by_unit[(task.pool_rank, a.slot)].add(reviewer.id)
    assert all(len(ids) == 1 for ids in by_unit.values())
    # language rule
    for _a, _task, item, reviewer in rows:
        assert item.language in reviewer.language_set
    loads = Counter()
    for _a, task, _item, reviewer in rows:
        if task.rubric == "A":
            loads[reviewer.username] += 1
    assert len(loads) == 14 and max(loads.values()) - min(loads.values()) <= 1
    assert result.loads == dict(loads)


def test_chinese_items_without_chinese_readers_are_reported(engine, tmp_path):
    items = seed_items(engine, tmp_path, 10)
    seed_responses(engine, tmp_path, items)
    add_users(engine, 3, zh_readers=0)
    studies.create_study(engine, "s", rubrics=["B"], actor=SYSTEM)
    studies.draw_pool(engine, "s", 10, actor=SYSTEM)
    result = assignment.assign(engine, "s", raters=2, actor=SYSTEM)
    assert len(result.unfilled) == 4  # two units in Chinese, two slots each
    assert all("reads zh" in reason for reason in result.unfilled)


def test_reassignment_keeps_submitted_work(study):
    assignment.assign(study, "panel", raters=2, dual_share=1.0, seed=2, actor=SYSTEM)
    leaving = "rev05"
    mine = [r for r in _live(study, "panel") if r[3].username == leaving]
    first = next(a for a, task, _i, _r in mine if task.rubric == "A")
    sheet = ScoreSheet(rubric="A", scores=dict.fromkeys(RUBRIC_A.dimension_keys, 2))
    reviewing.submit(study, first.id, first.reviewer_id, sheet, client_token="t1", base_revision=0)
    result = assignment.assign(study, "panel", actor=SYSTEM)  # re-running fills nothing new
    assert result.created == 0
    moved = assignment.reassign(study, "panel", leaving, seed=3, actor=SYSTEM)
    assert moved.kept_submitted == 1 and moved.withdrawn == len(mine) - 1 and moved.unfilled == []
    assert moved.created == moved.withdrawn
    rows = _live(study, "panel")
    statuses = Counter(a.status for a, _t, _i, r in rows if r.username == leaving)
    assert statuses == {"submitted": 1, "withdrawn": len(mine) - 1}
    live = defaultdict(list)
    for a, task, item, reviewer in rows:
        if a.status != "withdrawn":
            live[task.id].append(reviewer.id)
            assert item.language in reviewer.language_set
    for reviewer_ids in live.values():
        assert len(reviewer_ids) == 2 and len(set(reviewer_ids)) == 2
    # the leaver never comes back, even when assignment runs again
    assignment.assign(study, "panel", actor=SYSTEM)
    with read_session(study) as session:
        left = session.exec(select(Reviewer).where(Reviewer.username == leaving)).one()
        again = session.exec(
            select(Assignment).where(Assignment.reviewer_id == left.id, Assignment.status == "assigned")
        ).all()
    assert again == []


def test_assign_needs_pool_and_reviewers(engine):
    studies.create_study(engine, "empty", actor=SYSTEM)
    with pytest.raises(InvalidInput, match="draw a pool first"):
        assignment.assign(engine, "empty", actor=SYSTEM)
