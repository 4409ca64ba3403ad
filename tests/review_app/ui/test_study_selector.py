"""The lead pages' one study selector under AppTest: a choice sticks on every rerun and page, is
remembered per account in the database (written only when it changes), opens the next session of
that lead, and a study created on Study set-up becomes the selected one.
"""

from __future__ import annotations

import pytest
from sqlalchemy import text

from review_app.demo import DEMO_JUDGE_STUDY, DEMO_STUDY
from review_app.services import preferences, studies
from review_app.services.accounts import get_user
from review_app.services.actors import Actor

from .conftest import sign_in

# Every page with the selector, and one without it (Streamlit drops the widget's state there).
SELECTOR_PAGES = (
    "lead_progress",
    "lead_agreement",
    "lead_flags",
    "lead_adjudication",
    "lead_analysis",
    "lead_export",
    "lead_setup",
    "lead_reviewers",
    "lead_plan",
    "lead_quality",
)


def _open(at, page: str):
    at.switch_page(f"views/{page}.py").run()
    assert not at.exception, (page, at.exception)
    return at


def _selector(at):
    (box,) = [s for s in at.selectbox if s.label == "Study"]
    return box


def _choose(at, study: str) -> None:
    _selector(at).select(study).run()
    assert not at.exception, at.exception


@pytest.fixture
def writes(monkeypatch) -> list[tuple[str, str]]:
    """Every preference write the pages make, as (username, study); the writes still happen."""
    made: list[tuple[str, str]] = []
    real = preferences.remember_study

    def counted(engine, username, study, *, actor):
        made.append((username, study))
        return real(engine, username, study, actor=actor)

    monkeypatch.setattr(preferences, "remember_study", counted)
    return made


def test_a_choice_sticks_on_every_rerun_and_every_lead_page(demo_db, writes):
    at = _open(sign_in("lead01"), "lead_export")
    assert _selector(at).value == DEMO_JUDGE_STUDY  # nothing chosen yet: the newest study
    assert writes == []  # opening on the default writes nothing
    _choose(at, DEMO_STUDY)
    assert _selector(at).value == DEMO_STUDY
    at.run()
    assert _selector(at).value == DEMO_STUDY
    for step, page in enumerate(SELECTOR_PAGES):
        _open(at, page)
        assert _selector(at).value == (DEMO_STUDY if step % 2 == 0 else DEMO_JUDGE_STUDY), page
        _choose(at, DEMO_JUDGE_STUDY if step % 2 == 0 else DEMO_STUDY)
        if step % 3 == 2:
            _open(at, "lead_import")  # no selector here: the choice must outlive the widget's state
    assert _selector(_open(at, "lead_progress")).value == DEMO_STUDY
    # One write per change, none for the reruns and page switches in between.
    assert writes == [("lead01", DEMO_STUDY)] + [
        ("lead01", DEMO_JUDGE_STUDY if step % 2 == 0 else DEMO_STUDY) for step in range(len(SELECTOR_PAGES))
    ]


def test_a_rerun_leaves_the_browsers_choice_alone(demo_db):
    """The server tells the browser the selector's value only when the browser may not have it.

    A value pushed on every run lands over a choice the lead is making while that run is under way:
    the browser showed the old study again, or closed the list under the lead's keys.
    """
    at = _open(sign_in("lead01"), "lead_export")
    assert _selector(at).proto.set_value  # a new page's widget is told the study chosen
    _choose(at, DEMO_STUDY)
    assert not _selector(at).proto.set_value  # the browser's own change
    at.run()
    assert not _selector(at).proto.set_value
    _open(at, "lead_flags")
    assert _selector(at).proto.set_value and _selector(at).value == DEMO_STUDY
    at.run()
    assert not _selector(at).proto.set_value


def test_the_choice_opens_the_next_session_of_that_lead_only(demo_db):
    first = _open(sign_in("lead01"), "lead_progress")
    _choose(first, DEMO_STUDY)
    lead = get_user(demo_db, "lead01")
    assert preferences.last_study(demo_db, Actor(lead.id)) == DEMO_STUDY

    again = _open(sign_in("lead01"), "lead_export")
    assert _selector(again).value == DEMO_STUDY
    assert _selector(_open(sign_in("lead02"), "lead_export")).value == DEMO_JUDGE_STUDY  # their own (none yet)

    _choose(again, DEMO_JUDGE_STUDY)
    assert _selector(_open(sign_in("lead01"), "lead_flags")).value == DEMO_JUDGE_STUDY


def test_a_study_that_is_gone_opens_the_newest(demo_db):
    with demo_db.begin() as connection:
        connection.execute(
            text(
                "INSERT INTO study (name, description, rubrics, status, settings, created_at) "
                "VALUES ('Short-lived', '', 'A', 'active', '{}', CURRENT_TIMESTAMP)"
            )
        )
        connection.execute(  # led by lead01: a lead's selector lists the studies they lead
            text(
                "INSERT INTO study_lead (study_id, reviewer_id, added_at) "
                "SELECT study.id, reviewer.id, CURRENT_TIMESTAMP FROM study, reviewer "
                "WHERE study.name = 'Short-lived' AND reviewer.username = 'lead01'"
            )
        )
    first = _open(sign_in("lead01"), "lead_export")
    assert _selector(first).value == "Short-lived"
    _choose(first, DEMO_STUDY)
    _choose(first, "Short-lived")
    with demo_db.begin() as connection:
        connection.execute(
            text("DELETE FROM study_lead WHERE study_id IN (SELECT id FROM study WHERE name = 'Short-lived')")
        )
        connection.execute(text("DELETE FROM study WHERE name = 'Short-lived'"))
    assert _selector(_open(sign_in("lead01"), "lead_export")).value == DEMO_JUDGE_STUDY
    _open(first, "lead_progress")  # the session that chose it falls back too, without an error
    assert _selector(first).value == DEMO_JUDGE_STUDY


def test_a_study_created_on_set_up_becomes_the_selected_one(demo_db):
    at = _open(sign_in("lead01"), "lead_export")
    _choose(at, DEMO_STUDY)
    _open(at, "lead_setup")
    assert _selector(at).value == DEMO_STUDY
    at.text_input[0].input("Selector study")
    next(b for b in at.button if b.label == "Create study").click().run()
    assert not at.exception, at.exception
    assert "Created 'Selector study'." in [s.value for s in at.success]
    assert _selector(at).value == "Selector study"
    assert at.session_state["lead_study"] == "Selector study"
    assert _selector(_open(at, "lead_export")).value == "Selector study"
    assert [s.name for s in studies.list_studies(demo_db)][-1] == "Selector study"
    assert _selector(_open(sign_in("lead01"), "lead_progress")).value == "Selector study"
