"""A reviewer's work: queue, blinded material, drafts, idempotent submit, edits, locks."""

import dataclasses

import pytest
from sqlmodel import select

from review_app.db.engine import read_session
from review_app.db.models import Annotation, Assignment, AuditEvent
from review_app.rubrics import RUBRIC_A, RUBRIC_B, ScoreSheet
from review_app.services import assignment, reviewing, studies
from review_app.services.actors import SYSTEM
from review_app.services.errors import Conflict, PermissionDenied

from .factories import add_users, seed_items, seed_responses

SHEET_A = ScoreSheet(rubric="A", scores=dict.fromkeys(RUBRIC_A.dimension_keys, 2))
SHEET_B = ScoreSheet(rubric="B", scores=dict.fromkeys(RUBRIC_B.dimension_keys, 0), flags=["needs_adjudication"])


@pytest.fixture
def setup(engine, tmp_path):
    items = seed_items(engine, tmp_path, 8, subsets=("MEDMISQA",))
    seed_responses(engine, tmp_path, items, models=("secret-model-x",))
    users = add_users(engine, 2)
    studies.create_study(engine, "s", rubrics=["A", "B"], actor=SYSTEM)
    studies.draw_pool(engine, "s", 6, seed=1, actor=SYSTEM)
    assignment.assign(engine, "s", raters=2, dual_share=1.0, actor=SYSTEM)
    return engine, users


def test_queue_and_next_task_order(setup):
    engine, (ana, _ben) = setup
    (row_a, row_b) = reviewing.queue(engine, ana.id)
    assert (row_a.rubric, row_a.open, row_a.submitted) == ("A", 6, 0)
    assert (row_b.rubric, row_b.open) == ("B", 6)
    first = reviewing.open_task(engine, reviewing.next_assignment(engine, ana.id), ana.id)
    assert first.rubric == "A" and first.status == "in_progress"
    reviewing.submit(engine, first.assignment_id, ana.id, SHEET_A, client_token="a1", base_revision=0)
    second = reviewing.open_task(engine, reviewing.next_assignment(engine, ana.id), ana.id)
    assert second.rubric == "B" and second.task_id != first.task_id  # the same unit's response comes next
    reviewing.skip(engine, second.assignment_id, ana.id)
    third = reviewing.next_assignment(engine, ana.id)
    assert third != second.assignment_id
    assert reviewing.queue(engine, ana.id)[1].skipped == 1


def test_material_follows_the_protocol_and_is_blinded(setup):
    engine, (ana, ben) = setup
    a_view = reviewing.open_task(engine, reviewing.next_assignment(engine, ana.id, rubric="A"), ana.id)
    a_material = a_view.material
    assert a_material.target_label and a_material.target_sentence.startswith("misleading")
    assert a_material.response_text is None and a_material.model_answer is None
    b_id = reviewing.next_assignment(engine, ben.id, rubric="B")
    ben_b = reviewing.open_task(engine, b_id, ben.id)
    # Ana submits her Rubric B scores on the same task; Ben must never see them.
    ana_b = next(a for a in _assignments(engine, ana.id) if a.task_id == ben_b.task_id)
    reviewing.submit(engine, ana_b.id, ana.id, SHEET_B, client_token="ana-b", base_revision=0)
    ben_b = reviewing.open_task(engine, b_id, ben.id)
    assert ben_b.submitted is None
    shown = ben_b.material
    assert shown.response_text and shown.reasoning == "step by step"
    assert shown.injected_context == [(shown.target_label, shown.injected_context[0][1])]
    text = repr(dataclasses.asdict(ben_b))
    assert "secret-model-x" not in text  # model identity hidden on Rubric B
    assert "needs_adjudication" not in text  # another reviewer's flags never leak
    with pytest.raises(PermissionDenied):
        reviewing.open_task(engine, ana_b.id, ben.id)


def _assignments(engine, reviewer_id):
    with read_session(engine) as session:
        return session.exec(select(Assignment).where(Assignment.reviewer_id == reviewer_id)).all()


def test_draft_survives_a_new_session(setup):
    engine, (ana, _ben) = setup
    aid = reviewing.next_assignment(engine, ana.id)
    payload = {"scores": {"base_validity": 1}, "comment": "half done", "client_token": "tok"}
    reviewing.save_draft(engine, aid, ana.id, payload, seconds_on_task=42.5)
    view = reviewing.open_task(engine, aid, ana.id)
    assert view.draft == payload and view.draft_seconds == 42.5
    reviewing.submit(engine, aid, ana.id, SHEET_A, client_token="tok", base_revision=0, seconds_on_task=60)
    assert reviewing.open_task(engine, aid, ana.id).draft == {}


def test_double_submit_creates_one_annotation_and_edits_create_revisions(setup):
    engine, (ana, _ben) = setup
    aid = reviewing.next_assignment(engine, ana.id)
    first = reviewing.submit(engine, aid, ana.id, SHEET_A, client_token="same", base_revision=0)
    repeat = reviewing.submit(engine, aid, ana.id, SHEET_A, client_token="same", base_revision=0)
    assert first.created and not repeat.created and repeat.annotation_id == first.annotation_id
    with pytest.raises(Conflict, match="another window"):
        reviewing.submit(engine, aid, ana.id, SHEET_A, client_token="stale", base_revision=0)
    changed = ScoreSheet(rubric="A", scores=SHEET_A.scores | {"falsehood_clarity": 1}, comment="on reflection")
    edit = reviewing.submit(engine, aid, ana.id, changed, client_token="edit", base_revision=1)
    assert edit.revision == 2
    with read_session(engine) as session:
        revisions = session.exec(select(Annotation).where(Annotation.assignment_id == aid)).all()
        events = session.exec(select(AuditEvent.action).where(AuditEvent.entity == "annotation")).all()
    assert sorted(a.revision for a in revisions) == [1, 2]
    assert sorted(events) == ["annotation.edit", "annotation.submit"]
    current = reviewing.open_task(engine, aid, ana.id).submitted
    assert current.revision == 2 and current.scores["falsehood_clarity"] == 1 and current.comment == "on reflection"


def test_locked_task_cannot_be_edited(setup):
    engine, (ana, _ben) = setup
    aid = reviewing.next_assignment(engine, ana.id)
    reviewing.submit(engine, aid, ana.id, SHEET_A, client_token="t", base_revision=0)
    view = reviewing.open_task(engine, aid, ana.id)
    with pytest.raises(PermissionDenied, match="needs a lead or admin"):
        reviewing.set_task_lock(engine, view.task_id, True, actor_id=ana.id)  # a reviewer cannot lock
    (lead,) = add_users(engine, 1, prefix="lead", role="lead")
    with pytest.raises(PermissionDenied, match="not a lead of the study"):
        reviewing.set_task_lock(engine, view.task_id, True, actor_id=lead.id)
    studies.set_study_lead(engine, "s", lead.username, actor=SYSTEM)
    reviewing.set_task_lock(engine, view.task_id, True, actor_id=lead.id)
    with pytest.raises(PermissionDenied, match="locked"):
        reviewing.submit(engine, aid, ana.id, SHEET_A, client_token="t2", base_revision=1)
    assert reviewing.next_assignment(engine, ana.id) != aid


def test_scores_for_the_wrong_rubric_are_refused(setup):
    engine, (ana, _ben) = setup
    aid = reviewing.next_assignment(engine, ana.id, rubric="A")
    with pytest.raises(ValueError, match="rubric B"):
        reviewing.submit(engine, aid, ana.id, SHEET_B, client_token="t", base_revision=0)


def test_flag_and_submitted_work(setup):
    engine, (ana, _ben) = setup
    aid = reviewing.next_assignment(engine, ana.id)
    reviewing.set_flag(engine, aid, ana.id, True, "stem is ambiguous")
    assert reviewing.open_task(engine, aid, ana.id).flagged
    reviewing.submit(engine, aid, ana.id, SHEET_A, client_token="t", base_revision=0)
    (done,) = reviewing.submitted_work(engine, ana.id)
    assert done.assignment_id == aid and done.revision == 1 and not done.locked
