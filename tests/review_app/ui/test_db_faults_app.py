"""The app shows a database fault as the CLI's sentence (no traceback), and runs read-only on a read-only file."""

from __future__ import annotations

import shutil
from contextlib import nullcontext

import pytest
from sqlmodel import select

from review_app.db.connect import dispose_engines, get_engine
from review_app.db.engine import read_session
from review_app.db.errors import DatabaseUnavailable, read_only_sentence
from review_app.db.models import Assignment, Study
from review_app.demo import DEMO_STUDY
from review_app.ui.components.text import plain

from ..db_faults import FAULTS, made, read_only_file
from .conftest import new_session, sign_in

FAULT_PARAMS = [pytest.param(k, marks=pytest.mark.postgres) if k.startswith("postgres") else k for k in FAULTS]


@pytest.mark.parametrize("kind", FAULT_PARAMS)
def test_app_shows_each_fault_as_one_sentence(kind, tmp_path, monkeypatch):
    with made(kind, tmp_path) as fault:
        monkeypatch.setenv("MEDREV_DATABASE_URL", fault.url)
        with pytest.raises(DatabaseUnavailable) as raised:
            get_engine(fault.url)
        for _ in range(2):  # a reload still says it (the fault is not cached, so the app retries)
            at = new_session()
            at.run()
            assert not at.exception, at.exception
            assert [e.value for e in at.error] == [plain(str(raised.value))]
            assert not at.text_input  # no sign-in form over a database that cannot be used
        assert "secret-pw" not in at.error[0].value
    dispose_engines()


@pytest.fixture(params=["file-attribute", "mode=ro"])
def read_only_demo(request, demo_template, tmp_path, monkeypatch):
    """A copy of the demo database that this process cannot write; yields (engine, reason, path)."""
    path = tmp_path / "demo.db"
    shutil.copyfile(demo_template, path)
    if request.param == "file-attribute":
        url, guard = f"sqlite:///{path}", read_only_file(path)
    else:
        url, guard = f"sqlite:///file:{path}?mode=ro&uri=true", nullcontext("it is opened with mode=ro")
    monkeypatch.setenv("MEDREV_DATABASE_URL", url)
    with guard as reason:
        yield get_engine(url), reason, path
        dispose_engines()


def test_read_only_database_everyone_signs_in_and_reads_saving_says_why(read_only_demo):
    engine, reason, path = read_only_demo
    before = path.read_bytes()
    notice = plain(read_only_sentence(path, reason))

    at = sign_in("rev01")
    assert not at.exception, at.exception
    assert at.session_state["medrev_user"].username == "rev01"
    assert notice in [w.value for w in at.warning]
    assert at.markdown[0].value.startswith("### Welcome")

    user = at.session_state["medrev_user"]
    with read_session(engine) as session:  # a task not opened yet (the demo opens rev01's shared ones)
        aid = session.exec(
            select(Assignment.id)
            .where(Assignment.reviewer_id == user.id, Assignment.status == "assigned")
            .order_by(Assignment.id)
        ).first()
    at.query_params["task"] = str(aid)
    at.switch_page("views/review.py").run()
    assert not at.exception, at.exception
    assert not at.error
    with read_session(engine) as session:
        assert session.get(Assignment, aid).status == "assigned"  # shown, not marked as started
    next(b for b in at.button if b.label == "Send to lead").click().run()
    assert not at.exception, at.exception
    assert [t.value for t in at.toast] == [plain(read_only_sentence(path, reason))]  # a toast: Submit stays put

    lead = sign_in("lead01")
    assert lead.session_state["medrev_user"].username == "lead01"
    for page in ("lead_progress", "lead_agreement", "lead_adjudication", "lead_reviewers", "lead_setup"):
        lead.session_state["lead_study"] = DEMO_STUDY
        lead.switch_page(f"views/{page}.py").run()
        assert not lead.exception, (page, lead.exception)
        assert notice in [w.value for w in lead.warning], page
    lead.text_input[0].input("A new study")
    next(b for b in lead.button if b.label == "Create study").click().run()
    assert [e.value for e in lead.error] == [notice]
    with read_session(engine) as session:
        assert "A new study" not in session.exec(select(Study.name)).all()
    assert path.read_bytes() == before
