"""Under AppTest, a lead's pages show only the studies they lead (docs/security.md, "Roles and permissions").

The demo's lead01 leads the two demo studies; a third study has its own lead. lead01's selector lists
only the demo studies on every lead page; that study, put in the session by hand, gets the services'
refusal and none of its data, and a choice among lead01's own studies brings the page back. A lead of
no study is told how to get one.
"""

from __future__ import annotations

import pytest

from review_app.demo import DEMO_JUDGE_STUDY, DEMO_STUDY
from review_app.services import accounts, assignment, studies
from review_app.services.accounts import UserProfile
from review_app.services.actors import SYSTEM

from .conftest import sign_in
from .test_study_selector import SELECTOR_PAGES, _open, _selector

OTHER = "Other panel"
PASSWORD = "other-lead-pw"


@pytest.fixture
def other_panel(demo_db):
    """A study of its own lead (lead09), drawn and assigned over the demo's items and reviewers."""
    accounts.create_user(
        demo_db, UserProfile(username="lead09", display_name="Other lead", role="lead"), password=PASSWORD, actor=SYSTEM
    )
    studies.create_study(demo_db, OTHER, rubrics=["A"], actor=SYSTEM)
    studies.set_study_lead(demo_db, OTHER, "lead09", actor=SYSTEM)
    studies.draw_pool(demo_db, OTHER, 5, seed=3, actor=SYSTEM)
    assignment.enrol(demo_db, OTHER, ["rev01", "rev02"], actor=SYSTEM)
    assignment.assign(demo_db, OTHER, raters=2, dual_share=1.0, actor=SYSTEM)
    return demo_db


def _open_holding(at, page: str, study: str):
    """The page opened with ``study`` in the session, as a hand-set ``lead_study`` or an old choice holds it."""
    at.session_state["lead_study"] = study
    return _open(at, page)


def test_a_lead_sees_only_their_studies_and_is_refused_another(other_panel):
    lead = sign_in("lead01")
    for page in SELECTOR_PAGES:
        _open(lead, page)
        assert _selector(lead).options == [DEMO_STUDY, DEMO_JUDGE_STUDY], page
    own = sign_in("lead09", PASSWORD)
    assert _selector(_open(own, "lead_progress")).options == [OTHER]
    admin = sign_in("admin")
    assert _selector(_open(admin, "lead_progress")).options == [DEMO_STUDY, DEMO_JUDGE_STUDY, OTHER]

    for page in SELECTOR_PAGES:
        _open_holding(lead, page, OTHER)
        errors = [e.value for e in lead.error]
        assert errors == [f"you are not a lead of the study '{OTHER}'; ask an admin or one of its leads"], page
        box = _selector(lead)
        assert box.value is None and box.options == [DEMO_STUDY, DEMO_JUDGE_STUDY], page
        # nothing of the study: no number, chart or table of it (the Reviewers page lists the accounts)
        assert not lead.metric and not lead.get("plotly_chart") and not lead.get("download_button"), page
        assert len(lead.dataframe) == (1 if page == "lead_reviewers" else 0), page
        assert not any(OTHER in m.value for m in lead.markdown), page

    _selector(lead).select(DEMO_STUDY).run()  # one of the lead's own studies: the page is back
    assert not lead.exception and not lead.error
    assert _selector(lead).value == DEMO_STUDY and lead.session_state["lead_study"] == DEMO_STUDY
    _open(lead, "lead_progress")
    assert _selector(lead).value == DEMO_STUDY and lead.metric


def test_a_lead_of_no_study_is_told_how_to_get_one(demo_db):
    accounts.create_user(
        demo_db, UserProfile(username="lead10", display_name="New lead", role="lead"), password=PASSWORD, actor=SYSTEM
    )
    lead = sign_in("lead10", PASSWORD)
    for page in ("lead_progress", "lead_quality", "lead_setup"):
        _open(lead, page)
        assert any(i.value.startswith("You lead no study yet: create one on the Study set-up page") for i in lead.info)
        assert not [s for s in lead.selectbox if s.label == "Study"] and not lead.error, page
