"""Sessions follow the account in the real script (AppTest): every run re-reads the signed-in user."""

from __future__ import annotations

from sqlmodel import select

from review_app.db.engine import read_session
from review_app.db.models import Annotation, AuthSession
from review_app.rubrics import get_rubric
from review_app.services import accounts, review_queue, reviewing, sessions
from review_app.services.actors import SYSTEM

from .conftest import sign_in
from .panel_support import Panel


def _open_review(at):
    user = at.session_state["medrev_user"]
    aid = review_queue.next_assignment(_db(), user.id, rubric="A")
    at.query_params["task"] = str(aid)
    at.switch_page("views/review.py").run()
    assert not at.exception, at.exception
    return aid


def _db():
    from review_app.db.connect import get_engine

    return get_engine()


def _annotations(db, aid: int) -> int:
    with read_session(db) as session:
        return len(session.exec(select(Annotation.id).where(Annotation.assignment_id == aid)).all())


def test_a_reviewer_deactivated_mid_task_cannot_submit(demo_db):
    at = sign_in("rev01")
    aid = _open_review(at)
    keys = Panel(at)
    keys.score_all(dict.fromkeys(get_rubric("A").dimension_keys, 2))
    accounts.set_active(demo_db, "rev01", False, actor=SYSTEM)  # the lead deactivates them meanwhile
    keys.submit()
    assert _annotations(demo_db, aid) == 0
    assert "medrev_user" not in at.session_state
    assert "deactivated" in at.info[0].value and at.button[0].label == "Sign in"


def test_a_password_change_ends_the_session_at_the_next_action(demo_db):
    at = sign_in("rev01")
    aid = _open_review(at)
    accounts.set_password(demo_db, "rev01", "a new password for rev01", actor=SYSTEM)
    Panel(at).score("base_validity", 1)  # the draft change must not be carried out
    assert "account changed" in at.info[0].value and "medrev_user" not in at.session_state
    view = reviewing.open_task(demo_db, aid, accounts.get_user(demo_db, "rev01").id)
    assert view.draft.get("scores", {}).get("base_validity") is None


def test_a_demoted_lead_loses_the_lead_pages_at_the_next_run(demo_db):
    at = sign_in("lead01")
    at.switch_page("views/lead_reviewers.py").run()
    assert not at.exception and at.markdown[0].value == "### Reviewers"
    accounts.set_role(demo_db, "lead01", "reviewer", actor=SYSTEM)
    at.run()
    assert "medrev_user" not in at.session_state and "account changed" in at.info[0].value


def test_sign_out_revokes_the_session_server_side(demo_db):
    at = sign_in("rev02")
    token = at.session_state["medrev_token"]
    assert isinstance(sessions.resolve(demo_db, token), sessions.SessionUser)
    next(b for b in at.button if b.label == "Sign out").click().run()
    assert sessions.resolve(demo_db, token) == sessions.Ended("You have signed out.")
    assert "medrev_user" not in at.session_state and at.button[0].label == "Sign in"
    with read_session(demo_db) as session:
        row = session.exec(select(AuthSession).where(AuthSession.revoked_at.is_not(None))).one()
    assert row.via == "password"


def test_the_lead_pages_offer_no_way_to_touch_an_admin_or_another_lead(demo_db):
    at = sign_in("lead01")
    at.switch_page("views/lead_reviewers.py").run()
    offered = {box.label: box.options for box in at.selectbox}
    for label in ("Reset the password of", "Deactivate or reactivate"):
        assert "admin" not in offered[label] and "lead02" not in offered[label], offered[label]
        assert "rev01" in offered[label]
    assert offered["Role"] == ["reviewer"]
    assert "Change the role of" not in offered


def test_identity_provider_sign_in_opens_a_session_that_sign_out_revokes(demo_db):
    from streamlit.testing.v1 import AppTest

    from .conftest import APP
    from .test_app import AUTH

    at = AppTest.from_file(str(APP), default_timeout=30)
    at.secrets["auth"] = AUTH
    at.user = {"is_logged_in": True, "email": "rev04@example.org"}
    at.run()
    token = at.session_state["medrev_token"]
    found = sessions.resolve(demo_db, token)
    assert found.username == "rev04"
    with read_session(demo_db) as session:
        assert session.exec(select(AuthSession.via).where(AuthSession.reviewer_id == found.id)).one() == "oidc"
    next(b for b in at.button if b.label == "Sign out").click().run()
    assert sessions.resolve(demo_db, token) == sessions.Ended("You have signed out.")
