"""Study, display and user names reach Markdown-rendering elements only escaped (AppTest on the real script).

The browser side (no request leaves 127.0.0.1, the name shows literally) is test_browser_safety.py.
"""

from __future__ import annotations

import re

from sqlalchemy import text

from review_app.db.engine import write_session
from review_app.demo import DEMO_STUDY
from review_app.services import review_queue
from review_app.ui.components.text import plain

from .conftest import sign_in

HOSTILE_STUDY = "Study ![pixel](http://203.0.113.9/s.png) <img src=http://203.0.113.9/t.png> [/] :red[x]"
HOSTILE_NAME = "Dr **Bold** ![me](http://203.0.113.9/n.png) [link](http://203.0.113.9/) <b>b</b> [/]"
# Markdown that would act if a name went through unescaped (an escaped character is preceded by a backslash).
RAW_MARKERS = [
    re.compile(p) for p in (r"!\[", r"(?<!\\)\]\(", r"(?<!\\)<img", r"(?<!\\)\*\*Bold", r"(?<!\\)<b>", r"(?<!\\):red\[")
]


def rename(engine, study: str = HOSTILE_STUDY, display_name: str = HOSTILE_NAME) -> None:
    """Give the demo study and two demo accounts hostile names (test set-up straight in the database)."""
    with write_session(engine) as session:
        session.exec(text("UPDATE study SET name = :new WHERE name = :old").bindparams(new=study, old=DEMO_STUDY))
        session.exec(
            text("UPDATE reviewer SET display_name = :name WHERE username IN ('rev01', 'lead01')").bindparams(
                name=display_name
            )
        )


def markdown_texts(at) -> list[str]:
    """Every text on the page that Streamlit renders as Markdown (sidebar included)."""
    texts: list[str] = []
    for kind in ("markdown", "caption", "error", "success", "info", "warning", "title", "header", "subheader"):
        texts += [element.value for element in getattr(at, kind)]
    texts += [p.text for p in at.progress]
    texts += [b.label for b in at.button] + [m.label for m in at.metric] + [e.label for e in at.expander]
    texts += [element.value for element in at.sidebar.markdown]
    return texts


def assert_only_escaped(at, *names: str) -> None:
    texts = markdown_texts(at)
    for value in texts:
        for marker in RAW_MARKERS:
            assert not marker.search(value), (marker.pattern, value)
    for name in names:
        assert any(plain(name) in value for value in texts), (name, texts)


def test_names_are_escaped_for_a_reviewer(demo_db):
    rename(demo_db)
    at = sign_in("rev01")
    assert not at.exception, at.exception
    assert at.markdown[0].value == f"### Welcome, {plain(HOSTILE_NAME)}"
    assert f"**{plain(HOSTILE_NAME)}**" in at.sidebar.markdown[0].value
    assert_only_escaped(at, HOSTILE_NAME)
    user = at.session_state["medrev_user"]
    at.query_params["task"] = str(review_queue.next_assignment(demo_db, user.id))
    at.switch_page("views/review.py").run()
    assert not at.exception, at.exception
    assert_only_escaped(at, HOSTILE_STUDY)  # the study name in the progress line


def test_names_are_escaped_on_the_lead_pages(demo_db):
    rename(demo_db)
    at = sign_in("lead01")
    for page in ("lead_progress", "lead_agreement", "lead_adjudication", "lead_reviewers", "lead_setup"):
        at.session_state["lead_study"] = HOSTILE_STUDY
        at.switch_page(f"views/{page}.py").run()
        assert not at.exception, (page, at.exception)
        assert HOSTILE_STUDY in at.selectbox[0].options  # a plain-text widget shows the name as it is
        assert_only_escaped(at, HOSTILE_NAME)
    at.switch_page("views/lead_reviewers.py").run()
    assert f"#### Enrolment in {plain(HOSTILE_STUDY)}" in [m.value for m in at.markdown]
    at.switch_page("views/lead_setup.py").run()
    at.text_input[0].input(HOSTILE_STUDY)  # creating a study that exists: the refusal quotes the name
    next(b for b in at.button if b.label == "Create study").click().run()
    (refusal,) = [e.value for e in at.error]
    assert plain(repr(HOSTILE_STUDY)) in refusal
    assert_only_escaped(at)
