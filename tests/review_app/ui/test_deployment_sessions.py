"""Sessions in the documented deployment: a sign-in on one replica is honoured by every replica.

The session lives in the shared PostgreSQL database and the token is signed with the key all
replicas share, so a browser keeps its sign-in whichever replica answers (cookies are per host, not
per port, so one browser reaches the proxy and both replicas with the same cookie here).
"""

from __future__ import annotations

import pytest
from sqlmodel import select

from review_app.db.engine import read_session
from review_app.db.models import AuthSession, Reviewer
from review_app.services import sessions

from .browser_support import expect, sign_in
from .test_deployment import deployment  # noqa: F401  (nginx + two replicas + PostgreSQL)

pytestmark = [pytest.mark.browser, pytest.mark.postgres]


def test_a_sign_in_through_the_proxy_holds_on_every_replica(deployment, browser):  # noqa: F811
    context = browser.new_context(viewport={"width": 1440, "height": 900}, ignore_https_errors=True)
    page = context.new_page()
    page.set_default_timeout(20_000)
    sign_in(page, deployment["proxy"], "rev03")
    assert [c["name"] for c in context.cookies()].count(sessions.COOKIE_NAME) == 1
    for replica in deployment["replicas"]:
        tab = context.new_page()
        tab.set_default_timeout(20_000)
        tab.goto(replica + "/")
        expect(tab.get_by_role("button", name="Sign out")).to_be_visible()
        expect(tab.get_by_text("Welcome, Dr. Rafael Sampleton")).to_be_visible()
    tab.get_by_role("button", name="Sign out").click()  # on the second replica
    expect(tab.get_by_role("button", name="Sign in")).to_be_visible()
    with read_session(deployment["engine"]) as session:
        rows = session.exec(
            select(AuthSession)
            .join(Reviewer, Reviewer.id == AuthSession.reviewer_id)
            .where(Reviewer.username == "rev03")
        ).all()
    assert len(rows) == 1 and rows[0].revoked_at is not None  # one session, served by three front doors
    page.reload()  # through the proxy again: signed out everywhere
    expect(page.get_by_role("button", name="Sign in")).to_be_visible()
    context.close()
