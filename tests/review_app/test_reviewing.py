"""A reviewer's work: queue, blinded material, drafts, idempotent submit, edits, locks."""

import dataclasses

import pytest
from sqlmodel import select

from review_app.db.engine import read_session
from review_app.db.models import Annotation, AnnotationScore, Assignment, AuditEvent
from review_app.rubrics import RUBRIC_A, RUBRIC_B, ScoreSheet
from review_app.services import assignment, review_queue, reviewing, studies
from review_app.services.actors import SYSTEM
from review_app.services.errors import Conflict, InvalidInput, PermissionDenied, ScoresDiffer, ServiceError

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
    (row_a, row_b) = review_queue.queue(engine, ana.id)
    assert (row_a.rubric, row_a.open, row_a.submitted) == ("A", 6, 0)
    assert (row_b.rubric, row_b.open) == ("B", 6)
    first = reviewing.open_task(engine, review_queue.next_assignment(engine, ana.id), ana.id)
    assert first.rubric == "A" and first.status == "in_progress"
    reviewing.submit(engine, first.assignment_id, ana.id, SHEET_A, client_token="a1", base_revision=0)
    second = reviewing.open_task(engine, review_queue.next_assignment(engine, ana.id), ana.id)
    assert second.rubric == "B" and second.task_id != first.task_id  # the same unit's response comes next
    reviewing.skip(engine, second.assignment_id, ana.id)
    third = review_queue.next_assignment(engine, ana.id)
    assert third != second.assignment_id
    assert review_queue.queue(engine, ana.id)[1].skipped == 1


def test_material_follows_the_protocol_and_is_blinded(setup):
    engine, (ana, ben) = setup
    a_view = reviewing.open_task(engine, review_queue.next_assignment(engine, ana.id, rubric="A"), ana.id)
    a_material = a_view.material
    assert a_material.target_label and a_material.target_sentence.startswith("misleading")
    assert a_material.response_text is None and a_material.model_answer is None
    # the inline definitions travel with the material (pages never look up bench_core's taxonomy)
    assert a_material.content_definition.id == a_material.content_type and a_material.content_definition.requires
    assert a_material.provenance_definition.id == a_material.provenance and a_material.provenance_definition.definition
    b_id = review_queue.next_assignment(engine, ben.id, rubric="B")
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
    aid = review_queue.next_assignment(engine, ana.id)
    payload = {"scores": {"base_validity": 1}, "comment": "half done", "client_token": "tok"}
    reviewing.save_draft(engine, aid, ana.id, payload, seconds_on_task=42.5)
    view = reviewing.open_task(engine, aid, ana.id)
    assert view.draft == payload and view.draft_seconds == 42.5
    reviewing.submit(engine, aid, ana.id, SHEET_A, client_token="tok", base_revision=0, seconds_on_task=60)
    assert reviewing.open_task(engine, aid, ana.id).draft == {}


def test_double_submit_creates_one_annotation_and_edits_create_revisions(setup):
    engine, (ana, _ben) = setup
    aid = review_queue.next_assignment(engine, ana.id)
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
    aid = review_queue.next_assignment(engine, ana.id)
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
    assert review_queue.next_assignment(engine, ana.id) != aid


def test_scores_for_the_wrong_rubric_are_refused(setup):
    engine, (ana, _ben) = setup
    aid = review_queue.next_assignment(engine, ana.id, rubric="A")
    with pytest.raises(ValueError, match="rubric B"):
        reviewing.submit(engine, aid, ana.id, SHEET_B, client_token="t", base_revision=0)


def test_flag_and_submitted_work(setup):
    engine, (ana, _ben) = setup
    aid = review_queue.next_assignment(engine, ana.id)
    reviewing.set_flag(engine, aid, ana.id, True, "stem is ambiguous")
    assert reviewing.open_task(engine, aid, ana.id).flagged
    reviewing.submit(engine, aid, ana.id, SHEET_A, client_token="t", base_revision=0)
    (done,) = review_queue.submitted_work(engine, ana.id)
    assert done.assignment_id == aid and done.revision == 1 and not done.locked


# ----- changes that name their task and dimension; submit checked against the draft -----


def _change(token="tok", base=0, *, seq=0, source="", **fields):
    return reviewing.DraftChange(client_token=token, base_revision=base, source=source, seq=seq, **fields)


def _stored_scores(engine, aid):
    with read_session(engine) as session:
        rows = session.exec(
            select(AnnotationScore.dimension, AnnotationScore.value, Annotation.revision)
            .join(Annotation, Annotation.id == AnnotationScore.annotation_id)
            .where(Annotation.assignment_id == aid)
        ).all()
    return {(revision, dimension): value for dimension, value, revision in rows}


def test_changes_apply_to_the_dimension_they_name_in_any_order(setup):
    engine, (ana, _ben) = setup
    aid = review_queue.next_assignment(engine, ana.id, rubric="A")
    # Keys aimed at dimensions 3, 1 and 2 (not in rubric order, as when the reviewer moves around) land
    # exactly where they were aimed: the server has no "active dimension" of its own.
    for seq, (key, value) in (
        (1, ("falsehood_clarity", 0)),
        (2, ("base_validity", 2)),
        (3, ("answer_preservation", 1)),
    ):
        reviewing.change_draft(engine, aid, ana.id, _change(source="page", seq=seq, scores={key: value}))
    draft = reviewing.open_task(engine, aid, ana.id).draft
    assert draft["scores"] == {"base_validity": 2, "answer_preservation": 1, "falsehood_clarity": 0}
    assert draft["client_token"] == "tok" and draft["base_revision"] == 0
    # A change that arrives again (a rerun or reconnect resends it) is not applied twice, even after newer ones.
    reviewing.change_draft(engine, aid, ana.id, _change(source="page", seq=4, scores={"base_validity": 1}))
    for seq in (4, 2):
        again = reviewing.change_draft(
            engine, aid, ana.id, _change(source="page", seq=seq, scores={"base_validity": 0})
        )
        assert not again.applied and again.payload["scores"]["base_validity"] == 1
    # Another page (a reload) numbers its changes afresh.
    other = reviewing.change_draft(
        engine, aid, ana.id, _change(source="reloaded", seq=1, scores={"attack_fidelity": 2})
    )
    assert other.applied and other.payload["scores"]["attack_fidelity"] == 2
    reviewing.change_draft(engine, aid, ana.id, _change(scores={"attack_fidelity": None}))
    # Flags and comment are fields of their own: changing them leaves the scores alone, and vice versa.
    reviewing.change_draft(engine, aid, ana.id, _change(flags=("disputed_gold",), comment="odd stem"))
    reviewing.change_draft(engine, aid, ana.id, _change(scores={"falsehood_clarity": None}))
    draft = reviewing.open_task(engine, aid, ana.id).draft
    assert draft["scores"] == {"base_validity": 1, "answer_preservation": 1}
    assert draft["flags"] == ["disputed_gold"] and draft["comment"] == "odd stem"


def test_changes_for_a_submission_that_is_over_are_refused(setup):
    engine, (ana, ben) = setup
    aid = review_queue.next_assignment(engine, ana.id, rubric="A")
    other = review_queue.next_assignment(engine, ana.id, rubric="B")
    reviewing.change_draft(engine, aid, ana.id, _change(scores={"base_validity": 2}))
    reviewing.change_draft(engine, other, ana.id, _change("tok-b", scores={"harm_potential": 0}))
    reviewing.submit(engine, aid, ana.id, SHEET_A, client_token="tok", base_revision=0, expected_scores=None)
    # A key pressed for the submitted task (just after Ctrl+Enter) is refused, not moved to another task.
    with pytest.raises(Conflict, match="already submitted"):
        reviewing.change_draft(engine, aid, ana.id, _change(scores={"base_validity": 0}))
    # A window that still shows the task before that submission cannot start an edit from it either.
    with pytest.raises(Conflict, match="another window"):
        reviewing.change_draft(engine, aid, ana.id, _change("tok-2", scores={"base_validity": 0}))
    assert reviewing.open_task(engine, aid, ana.id).draft == {}
    assert reviewing.open_task(engine, other, ana.id).draft["scores"] == {"harm_potential": 0}
    assert _stored_scores(engine, aid) == {(1, k): 2 for k in RUBRIC_A.dimension_keys}
    # An edit (based on revision 1) starts from the scores in force and changes only what it names.
    state = reviewing.change_draft(engine, aid, ana.id, _change("edit", 1, scores={"answer_preservation": 0}))
    assert state.payload["scores"] == dict.fromkeys(RUBRIC_A.dimension_keys, 2) | {"answer_preservation": 0}
    with pytest.raises(PermissionDenied):
        reviewing.change_draft(engine, aid, ben.id, _change("edit", 1, scores={"base_validity": 0}))


def test_changes_out_of_the_rubric_or_on_a_locked_task_are_refused(setup):
    engine, (ana, _ben) = setup
    aid = review_queue.next_assignment(engine, ana.id, rubric="A")
    with pytest.raises(InvalidInput, match="no dimension 'harm_potential'"):
        reviewing.change_draft(engine, aid, ana.id, _change(scores={"harm_potential": 1}))
    with pytest.raises(InvalidInput, match="out of range"):
        reviewing.change_draft(engine, aid, ana.id, _change(scores={"base_validity": 3}))
    with pytest.raises(InvalidInput, match="no flag"):
        reviewing.change_draft(engine, aid, ana.id, _change(flags=("response_incomplete",)))
    view = reviewing.open_task(engine, aid, ana.id)
    reviewing.set_task_lock(engine, view.task_id, True, actor_id=SYSTEM)
    with pytest.raises(PermissionDenied, match="locked"):
        reviewing.change_draft(engine, aid, ana.id, _change(scores={"base_validity": 1}))
    assert reviewing.open_task(engine, aid, ana.id).draft == {}


def test_submit_refuses_a_vector_that_differs_from_the_draft(setup):
    engine, (ana, _ben) = setup
    aid = review_queue.next_assignment(engine, ana.id, rubric="B")
    saved = {"final_correctness": 0, "injection_uptake": 1, "clinical_grounding": 2, "harm_potential": 0}
    for seq, (key, value) in enumerate(saved.items(), start=1):
        reviewing.change_draft(
            engine, aid, ana.id, _change(source="p", seq=seq, scores={key: value}), seconds_on_task=10.0 * seq
        )

    def submit(scores: dict, expected: dict, **options) -> reviewing.SubmitResult:
        """Submit ``scores`` as the sheet, ``expected`` as the vector the screen showed."""
        sheet = ScoreSheet(rubric="B", scores=scores)
        return reviewing.submit(
            engine, aid, ana.id, sheet, client_token="tok", base_revision=0, expected_scores=expected, **options
        )

    # The screen showed the scores shifted by one dimension (the failure this check exists for).
    shifted = dict(zip(RUBRIC_B.dimension_keys, [1, 2, 0, 0], strict=True))
    with pytest.raises(ScoresDiffer) as refused:
        submit(shifted, shifted)
    message = str(refused.value)
    assert isinstance(refused.value, ServiceError)
    assert "Final-answer correctness: screen 1, saved 0" in message and "Harm potential" not in message
    # One dimension missing on the screen but saved (or the reverse) is a difference too.
    partial = saved | {"harm_potential": None}
    with pytest.raises(ScoresDiffer, match="Harm potential: screen none, saved 0"):
        submit(saved, partial)
    # The sheet itself must be the vector shown.
    with pytest.raises(ScoresDiffer, match="not the scores on your screen"):
        submit(shifted, saved)
    assert _stored_scores(engine, aid) == {}
    assert reviewing.open_task(engine, aid, ana.id).draft["scores"] == saved  # nothing lost either
    result = submit(saved, saved, seconds_on_task=None)
    assert result.created and _stored_scores(engine, aid) == {(1, k): v for k, v in saved.items()}
    with read_session(engine) as session:
        assert session.get(Annotation, result.annotation_id).seconds_on_task == 40.0  # the draft's time


def test_submit_of_an_unchanged_edit_checks_against_the_revision_in_force(setup):
    engine, (ana, _ben) = setup
    aid = review_queue.next_assignment(engine, ana.id, rubric="A")
    reviewing.submit(engine, aid, ana.id, SHEET_A, client_token="first", base_revision=0)
    same = dict(SHEET_A.scores)

    def again(expected: dict) -> reviewing.SubmitResult:
        return reviewing.submit(
            engine, aid, ana.id, SHEET_A, client_token="again", base_revision=1, expected_scores=expected
        )

    with pytest.raises(ScoresDiffer):
        again(same | {"base_validity": 1})
    assert again(same).revision == 2
