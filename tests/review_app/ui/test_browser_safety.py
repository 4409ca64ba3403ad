"""In a real browser: loading the sign-in page, the queue, the review page and lead pages makes no request
beyond 127.0.0.1, even when a study and a display name carry Markdown images, HTML images and links;
those names show literally. Every request is recorded with ``page.on("request")``.
"""

from __future__ import annotations

from urllib.parse import urlsplit

import pytest
from sqlalchemy import text

from review_app.db.connect import dispose_engines, get_engine
from review_app.db.engine import write_session
from review_app.demo import DEMO_JUDGE_STUDY

from .browser_support import demo_app, expect, open_page, shot, sign_in, wait_idle
from .test_names_as_text import HOSTILE_NAME, HOSTILE_STUDY, rename

pytestmark = pytest.mark.browser
DESKTOP = {"width": 1440, "height": 900}


def _make_hostile(url: str) -> None:
    """Give two demo accounts and both demo studies names with Markdown images, HTML images and links."""
    engine = get_engine(url)
    rename(engine)
    with write_session(engine) as session:  # the lead pages open on the newest study: make it hostile too
        session.exec(
            text("UPDATE study SET name = :new WHERE name = :old").bindparams(
                new=HOSTILE_STUDY + " (judge)", old=DEMO_JUDGE_STUDY
            )
        )
    dispose_engines()


@pytest.fixture
def hostile_server(demo_template, tmp_path):
    with demo_app(demo_template, tmp_path, prepare=_make_hostile) as (base, _url):
        yield base


def _recorded(page) -> list[str]:
    urls: list[str] = []
    page.on("request", lambda request: urls.append(request.url))
    return urls


def _off_machine(urls: list[str], base: str) -> list[str]:
    """Requests to any host but the app's own (data: and blob: URLs never leave the browser)."""
    own = urlsplit(base).netloc
    return [u for u in urls if urlsplit(u).scheme in ("http", "https", "ws", "wss") and urlsplit(u).netloc != own]


def _assert_inert(page) -> None:
    assert page.locator("img[src*='203.0.113.9']").count() == 0
    assert page.locator("a[href*='203.0.113.9']").count() == 0


def test_pages_load_nothing_from_other_hosts_and_show_names_literally(hostile_server, browser):
    base = hostile_server
    reviewer = open_page(browser, DESKTOP)
    requests = _recorded(reviewer)
    reviewer.goto(base)
    expect(reviewer.get_by_role("button", name="Sign in")).to_be_visible()
    wait_idle(reviewer)
    reviewer.wait_for_timeout(1000)  # the favicon and fonts are requested after the first render
    assert _off_machine(requests, base) == []
    sign_in(reviewer, base, "rev01")
    expect(reviewer.get_by_text("Welcome, Dr **Bold** ![me](http", exact=False)).to_be_visible()
    _assert_inert(reviewer)
    reviewer.get_by_role("button", name="Start next task").click()
    expect(reviewer.get_by_text("Study ![pixel](http", exact=False).first).to_be_visible()
    wait_idle(reviewer)
    _assert_inert(reviewer)
    shot(reviewer, "40-hostile-names-review")
    assert _off_machine(requests, base) == []

    lead = open_page(browser, DESKTOP)
    lead_requests = _recorded(lead)
    sign_in(lead, base, "lead01", "/lead_reviewers")
    expect(lead.get_by_text("Enrolment in Study ![pixel](http", exact=False)).to_be_visible()
    wait_idle(lead)
    _assert_inert(lead)
    lead.get_by_role("link", name="Progress").click()  # in-app navigation (a reload signs out on main)
    expect(lead.get_by_text("Tasks complete")).to_be_visible()
    wait_idle(lead)
    _assert_inert(lead)
    shot(lead, "41-hostile-names-lead")
    assert len(lead_requests) > 10 and _off_machine(lead_requests, base) == []
    assert HOSTILE_NAME.startswith("Dr **Bold**")
    reviewer.context.close()
    lead.context.close()
