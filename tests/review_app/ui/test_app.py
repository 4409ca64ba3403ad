"""The real Streamlit script under AppTest: sign-in, gating, queue, scoring, drafts, edits, blinding."""

from __future__ import annotations

import pytest
from sqlalchemy import func
from sqlmodel import select
from streamlit.testing.v1 import AppTest

from review_app.db.engine import read_session
from review_app.db.models import Annotation, AnnotationScore, Assignment, ModelResponse, Reviewer, Task
from review_app.rubrics import get_rubric
from review_app.services import review_queue, reviewing
from review_app.services.actors import SYSTEM

from .conftest import APP, sign_in, walk_text
from .markup_support import markup_assignment
from .panel_support import Panel, panel


def _open_review(at, rubric: str | None = None):
    """Go to the review page on the next task (optionally of one rubric); returns (at, assignment id)."""
    user = at.session_state["medrev_user"]
    db = _engine()
    aid = review_queue.next_assignment(db, user.id, rubric=rubric)
    at.query_params["task"] = str(aid)
    at.switch_page("views/review.py").run()
    assert not at.exception, at.exception
    return at, aid


def _rev01_reviewing() -> tuple[AppTest, int, Panel]:
    """rev01 signed in on the review page of the next task: (session, assignment id, its score panel)."""
    at, aid = _open_review(sign_in("rev01"))
    return at, aid, Panel(at)


def _engine():
    from review_app.db.connect import get_engine

    return get_engine()


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
    assert at.metric[0].label.startswith("Tasks complete, of ")
    assert len(at.get("plotly_chart")) == 3


def test_queue_and_scoring_rubric_a_then_b(demo_db):
    at = sign_in("rev01")
    table = at.dataframe[0].value
    # the 45-item demo pool (a harm model with finite SEs) and the unit shared with rev02
    assert list(table["To do"]) == [9, 9, 2]
    assert list(table["Rubric"]) == [get_rubric(k).name for k in ("A", "B", "judge")]
    at, aid = _open_review(at)
    assert at.markdown[0].value == "#### Rubric A: item validation"
    keys = Panel(at)
    assert [d["key"] for d in keys.data["dims"]] == list(get_rubric("A").dimension_keys)
    assert keys.data["submit_label"] == "Submit" and keys.data["scores"] == {}
    keys.score_all(dict.fromkeys(get_rubric("A").dimension_keys, 2))
    keys.flags("disputed_gold")
    keys.comment("Gold looks right.")
    assert keys.data["scores"] == dict.fromkeys(get_rubric("A").dimension_keys, 2)  # drawn from the saved draft
    keys.submit()
    assert not at.exception
    (annotation,) = _annotations(demo_db, aid)
    assert annotation.flags == ["disputed_gold"] and annotation.comment == "Gold looks right."
    assert annotation.seconds_on_task > 0
    nxt = int(at.query_params["task"])
    assert nxt != aid and keys.data["aid"] == nxt
    assert keys.notice() == "success: Submitted. Thank you!"  # shown next to Submit on the next task
    assert at.markdown[0].value == "#### Rubric B: response review"  # the same unit's response comes next
    keys.score_all(dict.fromkeys(get_rubric("B").dimension_keys, 0))
    assert keys.notice() == ""  # the reviewer moved on
    keys.submit()
    assert len(_annotations(demo_db, nxt)) == 1


def test_incomplete_scores_are_not_submitted(demo_db):
    at, aid, keys = _rev01_reviewing()
    keys.score("base_validity", 2)
    keys.submit()
    assert not at.exception
    assert keys.notice().startswith("warning: Not submitted: please score every dimension; missing: Answer")
    assert _annotations(demo_db, aid) == [] and keys.data["aid"] == aid


def test_panel_events_land_on_the_dimension_they_name(demo_db):
    """Keys typed faster than the page reruns arrive together, each naming its dimension."""
    at, aid, keys = _rev01_reviewing()
    first = keys.data
    rubric = get_rubric("A")
    typed = dict(zip(rubric.dimension_keys, [2, 1, 2, 2, 0], strict=True))
    # The events of five keys and a Ctrl+Enter, sent before any rerun acknowledged them.
    events = [keys.event("score", data=first, dim=k, value=v) for k, v in typed.items()]
    submit = keys.event("submit", data=first, rubric="A", scores=typed, flags=[], comment="")
    late = keys.event("score", data=first, dim="base_validity", value=0)  # a key pressed right after
    keys.send(*events, submit, late)
    assert not at.exception, at.exception
    with read_session(demo_db) as session:
        stored = dict(
            session.exec(
                select(AnnotationScore.dimension, AnnotationScore.value)
                .join(Annotation, Annotation.id == AnnotationScore.annotation_id)
                .where(Annotation.assignment_id == aid)
            ).all()
        )
    assert stored == typed  # the late key did not change the submitted task
    assert keys.data["aid"] != aid and keys.data["scores"] == {}  # nor land on the next one
    assert keys.data["ack"] == {"page-1": late["seq"]}
    assert keys.notice() == "success: Submitted. Thank you!"
    keys.send()  # the same list again (a rerun): nothing is applied twice
    assert len(_annotations(demo_db, aid)) == 1 and not at.exception


def test_an_answered_submit_still_sent_moves_on_only_while_the_address_names_its_task(demo_db):
    """The panel withdraws an answered submit only with its next key or click (no extra rerun): until
    then every run still carries it, and the server tells a lost answer from a browser that moved on."""
    from review_app.ui.components.scoring import PANEL_KEY

    at, aid, keys = _rev01_reviewing()
    keys.score_all(dict.fromkeys(get_rubric("A").dimension_keys, 2))
    keys.submit()
    carried = list(keys.sent)  # the browser's state until its next event: the submit is in it
    assert carried[-1]["t"] == "submit"
    nxt = keys.data["aid"]
    assert nxt != aid and int(at.query_params["task"]) == nxt

    def rerun(address: int) -> None:
        """A rerun the panel did not start (e.g. the run answering the submit was cut short)."""
        at.query_params["task"] = str(address)
        at.session_state[PANEL_KEY] = {"events": list(carried)}
        at.run()
        assert not at.exception, at.exception

    rerun(aid)  # the answer never reached the browser: its address still names the submitted task
    assert keys.data["aid"] == nxt and int(at.query_params["task"]) == nxt
    rerun(nxt)  # the browser shows the next task: it has the answer, the submit is forgotten
    assert keys.data["aid"] == nxt
    rerun(aid)  # so opening the submitted task again opens it (for an edit), submit still carried
    assert keys.data["aid"] == aid and keys.data["submit_label"] == "Save as revision 2"
    assert len(_annotations(demo_db, aid)) == 1  # and nothing was submitted twice


def test_submit_of_a_vector_the_server_does_not_have_is_refused_next_to_submit(demo_db):
    at, aid, keys = _rev01_reviewing()
    keys.score_all(dict.fromkeys(get_rubric("A").dimension_keys, 2))
    shifted = dict.fromkeys(get_rubric("A").dimension_keys, 2) | {"falsehood_clarity": 1}
    keys.submit(shifted)
    assert not at.exception
    assert keys.notice() == (
        "error: Not submitted: the scores on your screen are not the saved ones "
        "(Falsehood clarity: screen 1, saved 2). Check the scores and submit again."
    )
    assert _annotations(demo_db, aid) == [] and keys.data["aid"] == aid
    assert keys.data["scores"]["falsehood_clarity"] == 2  # the panel is redrawn from what is saved
    keys.submit()
    assert len(_annotations(demo_db, aid)) == 1


def test_draft_is_restored_in_a_new_session(demo_db):
    _at, aid, keys = _rev01_reviewing()
    keys.score("base_validity", 1)
    keys.score("falsehood_clarity", 0)
    keys.comment("half way")
    again, aid2 = _open_review(sign_in("rev01"))  # reload: a brand-new session
    assert aid2 == aid  # work in progress comes first
    restored = panel(again)
    assert restored["scores"] == {"base_validity": 1, "falsehood_clarity": 0}
    assert restored["comment"] == "half way"
    assert restored["token"] == keys.data["token"]  # the same submission continues


def test_submit_from_two_windows_creates_one_annotation(demo_db):
    first, aid = _open_review(sign_in("rev01"))
    one = Panel(first)
    one.score_all(dict.fromkeys(get_rubric("A").dimension_keys, 2))  # saved: the draft carries the token
    second, same = _open_review(sign_in("rev01"))  # a reconnect opens the same task from the draft
    assert same == aid
    two = Panel(second, source="page-2")
    one.submit()
    two.submit()
    assert "already submitted" in two.notice()
    assert len(_annotations(demo_db, aid)) == 1


def test_edit_creates_a_new_revision(demo_db):
    at, aid, keys = _rev01_reviewing()
    keys.score_all(dict.fromkeys(get_rubric("A").dimension_keys, 2))
    keys.submit()
    at.switch_page("views/queue.py").run()
    at.button(key=f"edit{aid}").click().run()
    assert int(at.query_params["task"]) == aid
    at.switch_page("views/review.py").run()  # AppTest keeps requesting the page it was last switched to
    assert keys.data["aid"] == aid and keys.data["base"] == 1
    assert keys.data["scores"]["base_validity"] == 2  # the submitted revision is loaded
    assert keys.data["submit_label"] == "Save as revision 2"
    keys.score("base_validity", 1)
    keys.submit()
    revisions = sorted(a.revision for a in _annotations(demo_db, aid))
    assert revisions == [1, 2]


def test_locked_task_shows_read_only_scores(demo_db):
    at, aid, keys = _rev01_reviewing()
    keys.score_all(dict.fromkeys(get_rubric("A").dimension_keys, 1))
    keys.submit()
    user = at.session_state["medrev_user"]
    reviewing.set_task_lock(demo_db, reviewing.open_task(demo_db, aid, user.id).task_id, True, actor_id=SYSTEM)
    at = sign_in("rev01")  # opened again later, from a bookmark
    at.query_params["task"] = str(aid)
    at.switch_page("views/review.py").run()
    keys = Panel(at)
    assert keys.data["aid"] == aid
    assert keys.data["readonly"] and "locked" in keys.notice()
    assert keys.data["scores"] == dict.fromkeys(get_rubric("A").dimension_keys, 1)


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
    from review_app.db.connect import get_engine
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
    aid = markup_assignment(demo_db)
    at = sign_in("rev01")
    at.query_params["task"] = str(aid)
    at.switch_page("views/review.py").run()
    assert not at.exception
    bodies = [html.proto.body for html in at.get("html")]
    assert any("&lt;script&gt;alert(1)&lt;/script&gt;" in body for body in bodies)  # shown literally, as text
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


ROW = (
    b'{"id": "u-1", "question": "Q?", "answer": "A", "opa": "a", "opb": "b", "injecta": "t", '
    b'"injectb": "f", "injection_content": "Cue Remapping", "injection_provenance": "Neutral"}\n'
)
BAD_UPLOADS = [  # (file name, bytes, line, text the message must hold): the command line's own messages
    ("MEDMISQA.jsonl", b"\xef\xbb\xbf" + ROW, 1, "byte-order mark"),
    ("MEDMISQA.jsonl", ROW + b'{"id": "caf\xe9"}\n', 2, "UTF-8"),
    ("MEDMISQA.jsonl", ROW + b'{"id": "a\x00b"}\n', 2, "NUL"),
    ("MEDMISQA.jsonl", ROW.decode().encode("utf-16"), 1, "UTF-16"),
    ("MEDMISQA.jsonl", b"", None, "empty"),
    ("MEDMISQA.jsonl", ROW.replace(b'"opa": "a"', b'"opa": ["Discharge", "home"]'), 1, "a list"),
    ("MEDMISQA.jsonl", ROW + b'{"id": "x", "question": \n', 2, "malformed JSON"),
    ("roster.csv", b"username,display_name,role\nnew1,N,superuser\n", 2, "role"),
    ("roster.csv", b"username,display_name,role\nnew1,N,reviewer,extra\n", 2, "more cells"),
    ("MEDMISQA.parquet", b"PAR1 not parquet", None, "Parquet"),
    ("MEDMISQA.jsonl", b'{"foo": 1}\n', 1, "cannot tell"),
]


@pytest.mark.parametrize(("name", "data", "line", "text"), BAD_UPLOADS, ids=[b[3] for b in BAD_UPLOADS])
def test_a_bad_upload_shows_what_is_wrong_and_leaves_no_file(demo_db, tmp_path, monkeypatch, name, data, line, text):
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    at = sign_in("lead01")
    at.switch_page("views/lead_import.py").run()
    at.file_uploader[0].set_value((name, data, "application/octet-stream")).run()
    assert not at.exception, at.exception
    assert "cannot be imported" in at.error[0].value and "Import" not in [b.label for b in at.button]
    problems = at.dataframe[-1].value
    assert text in " ".join(problems["problem"]) and line in list(problems["line"]) + ([None] if line is None else [])
    assert "medrev-upload" not in " ".join(problems["problem"])  # named as uploaded, not by its temporary copy
    assert not list(tmp_path.glob("medrev-upload-*"))


def test_skipping_bad_rows_in_the_browser_imports_the_rest_and_lists_them(demo_db, tmp_path, monkeypatch):
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    at = sign_in("lead01")
    at.switch_page("views/lead_import.py").run()
    data = ROW + ROW.replace(b'"u-1"', b'"u-2"').replace(b'"answer": "A"', b'"answer": "Z"')
    at.checkbox[0].check().run()
    at.file_uploader[0].set_value(("MEDMISQA.jsonl", data, "application/json")).run()
    assert "1 new" in at.success[0].value and "1 bad row(s) to skip" in at.success[0].value
    assert list(at.dataframe[-1].value["line"]) == [2]
    next(b for b in at.button if b.label == "Import").click().run()
    assert any("Imported: items: 1 rows from MEDMISQA.jsonl" in s.value for s in at.success)
    assert not list(tmp_path.glob("medrev-upload-*"))
