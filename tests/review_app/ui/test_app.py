"""The real Streamlit script under AppTest: sign-in, gating, queue, scoring, drafts, edits, blinding."""

from __future__ import annotations

import pytest
from sqlalchemy import func
from sqlmodel import select
from streamlit.testing.v1 import AppTest

from review_app.db.engine import read_session
from review_app.db.models import Annotation, Assignment, ModelResponse, Reviewer, Task
from review_app.rubrics import get_rubric
from review_app.services import reviewing
from review_app.services.actors import SYSTEM

from .conftest import APP, sign_in, walk_text


def _open_review(at, rubric: str | None = None):
    """Go to the review page on the next task (optionally of one rubric); returns (at, assignment id)."""
    user = at.session_state["medrev_user"]
    db = _engine()
    aid = reviewing.next_assignment(db, user.id, rubric=rubric)
    at.query_params["task"] = str(aid)
    at.switch_page("views/review.py").run()
    assert not at.exception, at.exception
    return at, aid


def _engine():
    from review_app.db.engine import get_engine

    return get_engine()


def _score_all(at, aid: int, rubric_key: str, value: int = 2) -> None:
    for dimension in get_rubric(rubric_key).dimensions:
        at.radio(key=f"a{aid}:score:{dimension.key}").set_value(value).run()


def _annotations(db, aid: int) -> list[Annotation]:
    with read_session(db) as session:
        return session.exec(select(Annotation).where(Annotation.assignment_id == aid)).all()


def test_sign_in_success_and_wrong_password(demo_db):
    at = sign_in("rev01", "not the password")
    assert [e.value for e in at.error] == ["Wrong username or password."]
    assert "medrev_user" not in at.session_state
    at = sign_in("rev01")
    assert not at.error and at.session_state["medrev_user"].username == "rev01"
    assert at.markdown[0].value.startswith("### Welcome")
    assert at.button(key=None) is not None
    assert "Start next task" in [b.label for b in at.button]


def test_lock_out_after_repeated_failures(demo_db, monkeypatch):
    monkeypatch.setenv("MEDREV_LOCKOUT_ATTEMPTS", "3")
    for _ in range(2):
        assert sign_in("rev02", "wrong password!").error[0].value == "Wrong username or password."
    at = sign_in("rev02", "wrong password!")
    assert "locked" in at.error[0].value
    at = sign_in("rev02")  # the right password during the lock-out is refused too
    assert "locked" in at.error[0].value and "medrev_user" not in at.session_state


def test_reviewer_cannot_reach_lead_pages(demo_db):
    at = sign_in("rev01")
    with pytest.raises(ValueError, match="registered"):
        at.switch_page("views/lead_progress.py")
    # Even run directly (as if reached by URL), the page checks the role itself.
    page = AppTest.from_file(str(APP.parent / "views" / "lead_progress.py"), default_timeout=30)
    page.session_state["medrev_user"] = at.session_state["medrev_user"]
    page.run()
    assert "for study leads" in page.error[0].value
    assert not page.get("plotly_chart") and not page.metric


def test_lead_sees_lead_pages(demo_db):
    at = sign_in("lead01")
    at.switch_page("views/lead_progress.py").run()
    assert not at.exception
    assert at.metric[0].label == "Tasks complete"
    assert len(at.get("plotly_chart")) == 3


def test_queue_and_scoring_rubric_a_then_b(demo_db):
    at = sign_in("rev01")
    table = at.dataframe[0].value
    assert list(table["To do"]) == [6, 6, 2]
    assert list(table["Rubric"]) == [get_rubric(k).name for k in ("A", "B", "judge")]
    at, aid = _open_review(at)
    assert at.markdown[0].value == "#### Rubric A: item validation"
    _score_all(at, aid, "A")
    at.button_group(key=f"a{aid}:flags").set_value(["disputed_gold"]).run()
    at.text_area(key=f"a{aid}:comment").input("Gold looks right.").run()
    at.button(key=f"a{aid}:submit").click().run()
    assert at.success[0].value == "Submitted. Thank you!"
    (annotation,) = _annotations(demo_db, aid)
    assert annotation.flags == ["disputed_gold"] and annotation.comment == "Gold looks right."
    assert annotation.seconds_on_task > 0
    nxt = int(at.query_params["task"])
    assert nxt != aid
    assert at.markdown[0].value == "#### Rubric B: response review"  # the same unit's response comes next
    _score_all(at, nxt, "B", 0)
    at.button(key=f"a{nxt}:submit").click().run()
    assert len(_annotations(demo_db, nxt)) == 1


def test_incomplete_scores_are_not_submitted(demo_db):
    at, aid = _open_review(sign_in("rev01"))
    at.radio(key=f"a{aid}:score:base_validity").set_value(2).run()
    at.button(key=f"a{aid}:submit").click().run()
    assert "missing" in at.warning[0].value.lower()
    assert _annotations(demo_db, aid) == []


def test_keyboard_buttons_score_the_active_dimension(demo_db):
    at, aid = _open_review(sign_in("rev01"))
    rubric = get_rubric("A")
    assert at.button(key=f"a{aid}:kb0").proto.shortcut.lower() == "0"
    for value in (2, 1, 2, 2, 0):
        at.button(key=f"a{aid}:kb{value}").click().run()
    values = [at.radio(key=f"a{aid}:score:{d.key}").value for d in rubric.dimensions]
    assert values == [2, 1, 2, 2, 0]  # each key scored the first unscored dimension
    at.radio(key=f"a{aid}:score:falsehood_clarity").set_value(None).run()  # clear one: the keys go back to it
    assert "Falsehood clarity" in at.caption[-1].value
    at.button(key=f"a{aid}:kb1").click().run()
    assert at.radio(key=f"a{aid}:score:falsehood_clarity").value == 1
    assert at.button(key=f"a{aid}:submit").proto.shortcut.lower() == "ctrl+enter"


def test_draft_is_restored_in_a_new_session(demo_db):
    at, aid = _open_review(sign_in("rev01"))
    at.radio(key=f"a{aid}:score:base_validity").set_value(1).run()
    at.radio(key=f"a{aid}:score:falsehood_clarity").set_value(0).run()
    at.text_area(key=f"a{aid}:comment").input("half way").run()
    again, aid2 = _open_review(sign_in("rev01"))  # reload: a brand-new session
    assert aid2 == aid  # work in progress comes first
    assert again.radio(key=f"a{aid}:score:base_validity").value == 1
    assert again.radio(key=f"a{aid}:score:falsehood_clarity").value == 0
    assert again.radio(key=f"a{aid}:score:clinical_plausibility").value is None
    assert again.text_area(key=f"a{aid}:comment").value == "half way"


def test_submit_from_two_windows_creates_one_annotation(demo_db):
    first, aid = _open_review(sign_in("rev01"))
    _score_all(first, aid, "A")  # autosaved: the draft carries the submission token
    second, same = _open_review(sign_in("rev01"))  # a reconnect opens the same task from the draft
    assert same == aid
    first.button(key=f"a{aid}:submit").click().run()
    second.button(key=f"a{aid}:submit").click().run()
    assert "already submitted" in second.info[0].value
    assert len(_annotations(demo_db, aid)) == 1


def test_edit_creates_a_new_revision(demo_db):
    at, aid = _open_review(sign_in("rev01"))
    _score_all(at, aid, "A")
    at.button(key=f"a{aid}:submit").click().run()
    at.switch_page("views/queue.py").run()
    at.button(key=f"edit{aid}").click().run()
    assert int(at.query_params["task"]) == aid
    at.switch_page("views/review.py")  # AppTest keeps requesting the page it was last switched to
    assert at.radio(key=f"a{aid}:score:base_validity").value == 2  # the submitted revision is loaded
    assert at.button(key=f"a{aid}:submit").label == "Save as revision 2"
    at.radio(key=f"a{aid}:score:base_validity").set_value(1).run()
    at.button(key=f"a{aid}:submit").click().run()
    revisions = sorted(a.revision for a in _annotations(demo_db, aid))
    assert revisions == [1, 2]


def test_other_reviewers_scores_and_model_identity_never_reach_the_page(demo_db):
    with read_session(demo_db) as session:
        row = session.exec(
            select(Task.id, func.count(Assignment.id))
            .join(Assignment, Assignment.task_id == Task.id)
            .where(Task.rubric == "B", Assignment.status != "withdrawn")
            .group_by(Task.id)
            .having(func.count(Assignment.id) == 2)
        ).first()
        task_id = row[0]
        pair = session.exec(
            select(Assignment, Reviewer)
            .join(Reviewer, Reviewer.id == Assignment.reviewer_id)
            .where(Assignment.task_id == task_id)
        ).all()
        model = session.exec(
            select(ModelResponse.model).join(Task, Task.response_id == ModelResponse.id).where(Task.id == task_id)
        ).one()
    (first, first_user), (second, second_user) = pair
    from review_app.db.engine import get_engine
    from review_app.rubrics import ScoreSheet
    from review_app.services.accounts import set_password

    db = get_engine()
    sheet = ScoreSheet(rubric="B", scores=dict.fromkeys(get_rubric("B").dimension_keys, 0), comment="SECRET-XYZ-123")
    if first.status != "submitted":
        reviewing.submit(db, first.id, first_user.id, sheet, client_token="blind", base_revision=0)
    set_password(db, second_user.username, "another-password-1", actor=SYSTEM)
    at = sign_in(second_user.username, "another-password-1")
    at.query_params["task"] = str(second.id)
    at.switch_page("views/review.py").run()
    page = walk_text(at)
    assert "SECRET-XYZ-123" not in page
    assert model not in page
    assert first_user.username not in page and first_user.display_name not in page


def test_model_output_is_rendered_inert(demo_db):
    from review_app.services import assignment, studies

    with read_session(demo_db) as session:
        response = session.exec(select(ModelResponse).where(ModelResponse.response_text.contains("<script>"))).one()
    # A study whose pool holds every type1 response of that model, so the markup response is in it.
    studies.create_study(demo_db, "inert", rubrics=["B"], actor=SYSTEM)
    quota = studies.parse_quota(f"model={response.model}:1")
    studies.draw_pool(demo_db, "inert", 47, quotas=[quota], seed=1, actor=SYSTEM)
    assignment.enrol(demo_db, "inert", ["rev01"], actor=SYSTEM)
    assignment.assign(demo_db, "inert", raters=1, actor=SYSTEM)
    with read_session(demo_db) as session:
        aid = session.exec(
            select(Assignment.id).join(Task, Task.id == Assignment.task_id).where(Task.response_id == response.id)
        ).one()
    at = sign_in("rev01")
    at.query_params["task"] = str(aid)
    at.switch_page("views/review.py").run()
    assert not at.exception
    assert any("<script>alert(1)</script>" in t.value for t in at.text)  # shown literally, as text
    for html in at.get("html"):
        assert "<script" not in html.proto.body and "<img" not in html.proto.body
    for markdown in at.markdown:
        assert "example.invalid" not in markdown.value


def test_import_preview_refuses_a_bad_file(demo_db):
    at = sign_in("lead01")
    at.switch_page("views/lead_import.py").run()
    bad = (
        b'{"id": "x1", "question": "Q?", "answer": "Z", "opa": "a", "opb": "b"}\n'
        b'{"id": "x2", "question": "Q?", "answer": "A", "opa": "a", "opb": "b", "injecta": "t", "injectb": "f", '
        b'"injection_content": "Dose Inflation", "injection_provenance": "Neutral"}\n'
    )
    at.file_uploader[0].set_value(("MEDMISQA.jsonl", bad, "application/json")).run()
    assert not at.exception, at.exception
    assert "cannot be imported: 2 problem(s)" in at.error[0].value
    issues = at.dataframe[1].value
    assert list(issues["line"]) == [1, 2] and list(issues["field"]) == ["answer", "injection_content"]
    assert "Import" not in [b.label for b in at.button]


def test_import_preview_then_import(demo_db, tmp_path):
    at = sign_in("lead01")
    at.switch_page("views/lead_import.py").run()
    good = (
        b'{"id": "new-1", "question": "Q?", "answer": "A", "opa": "a", "opb": "b", "injecta": "t", '
        b'"injectb": "f", "injection_content": "Cue Remapping", "injection_provenance": "Neutral"}\n'
    )
    at.file_uploader[0].set_value(("MEDMISQA.jsonl", good, "application/json")).run()
    assert "1 new" in at.success[0].value
    next(b for b in at.button if b.label == "Import").click().run()
    assert any("Imported" in s.value for s in at.success)


AUTH = {
    "redirect_uri": "http://localhost:8501/oauth2callback",
    "cookie_secret": "test-cookie-secret",
    "client_id": "medrev",
    "client_secret": "not-a-secret",
    "server_metadata_url": "https://idp.example.org/.well-known/openid-configuration",
}


def test_identity_provider_sign_in_maps_the_email_to_a_reviewer(demo_db):
    at = AppTest.from_file(str(APP), default_timeout=30)
    at.secrets["auth"] = AUTH
    at.user = {"is_logged_in": True, "email": "REV01@example.org"}
    at.run()
    assert not at.exception, at.exception
    assert at.session_state["medrev_user"].username == "rev01"
    assert at.markdown[0].value.startswith("### Welcome")


def test_identity_provider_sign_in_with_an_unknown_email_is_refused(demo_db):
    at = AppTest.from_file(str(APP), default_timeout=30)
    at.secrets["auth"] = AUTH
    at.user = {"is_logged_in": True, "email": "stranger@example.org"}
    at.run()
    assert "no active reviewer account has this email" in at.error[0].value
    assert "medrev_user" not in at.session_state


def test_sign_in_page_offers_the_identity_provider_when_configured(demo_db):
    at = AppTest.from_file(str(APP), default_timeout=30)
    at.secrets["auth"] = AUTH
    at.user = {"is_logged_in": False}
    at.run()
    assert "Sign in with your institution" in [b.label for b in at.button]
