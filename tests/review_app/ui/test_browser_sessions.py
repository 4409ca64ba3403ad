"""Sessions in a real browser against `medrev app`: the cookie survives reloads and tabs, the account rules.

Playwright drives Debian's Chromium; screenshots go to ``$MEDREV_ARTEFACTS/screenshots``.
"""

from __future__ import annotations

import pytest

from review_app.services import accounts, sessions
from review_app.services.actors import SYSTEM

from .browser_support import (
    A_DIMENSIONS,
    annotations,
    choose,
    current_task,
    expect,
    shot,
    sign_in,
    start_next_task,
    wait_idle,
)
from .test_browser import server  # noqa: F401  (the `medrev app` fixture)

pytestmark = pytest.mark.browser


def _session_cookie(context) -> dict:
    (cookie,) = [c for c in context.cookies() if c["name"] == sessions.COOKIE_NAME]
    return cookie


def test_reload_and_a_second_tab_stay_signed_in_and_sign_out_ends_both(server, page):  # noqa: F811
    base, engine = server
    sign_in(page, base, "rev01")
    task = start_next_task(page)
    cookie = _session_cookie(page.context)
    assert cookie["httpOnly"] and cookie["sameSite"] == "Strict" and cookie["path"] == "/"
    assert sessions.COOKIE_NAME not in page.evaluate("document.cookie")  # scripts cannot read it

    page.reload()
    expect(page.get_by_role("button", name="Sign out")).to_be_visible()
    expect(page.get_by_text("Rubric A: item validation")).to_be_visible()
    assert current_task(page) == task
    shot(page, "40-reload-still-signed-in")

    second = page.context.new_page()
    second.goto(base + "/")
    expect(second.get_by_role("button", name="Sign out")).to_be_visible()
    expect(second.get_by_text("Welcome")).to_be_visible()
    second.get_by_role("button", name="Sign out").click()
    expect(second.get_by_role("button", name="Sign in")).to_be_visible()
    assert not [c for c in page.context.cookies() if c["name"] == sessions.COOKIE_NAME]
    assert isinstance(sessions.resolve(engine, cookie["value"]), sessions.Ended)  # revoked server-side

    page.reload()  # the first tab's next load finds no session
    expect(page.get_by_role("button", name="Sign in")).to_be_visible()


def test_a_reviewer_deactivated_mid_task_cannot_submit(server, page):  # noqa: F811
    base, engine = server
    sign_in(page, base, "rev02")
    task = start_next_task(page)
    for dimension in A_DIMENSIONS:
        choose(page, task, dimension, 2)
    accounts.set_active(engine, "rev02", False, actor=SYSTEM)  # the lead deactivates rev02 meanwhile
    page.get_by_role("button", name="Submit").click()
    expect(page.get_by_text("your account has been deactivated")).to_be_visible()
    expect(page.get_by_role("button", name="Sign in")).to_be_visible()
    shot(page, "41-deactivated-mid-task")
    assert annotations(engine, task) == 0
    page.reload()  # and the cookie no longer signs anyone in
    expect(page.get_by_role("button", name="Sign in")).to_be_visible()


def test_a_lead_is_offered_no_way_to_touch_an_admin(server, page):  # noqa: F811
    base, engine = server
    sign_in(page, base, "lead01")
    page.get_by_role("link", name="Reviewers", exact=True).click()
    expect(page.get_by_text("Reset the password of")).to_be_visible()
    wait_idle(page)
    others = {u.username for u in accounts.list_users(engine) if u.role in ("lead", "admin")} - {"lead01"}
    assert others == {"lead02", "admin"}
    for label in ("Reset the password of", "Deactivate or reactivate", "Role"):
        page.get_by_label(label).click()
        page.keyboard.press("ArrowDown")  # opens the list
        options = page.get_by_role("option")
        expect(options.first).to_be_visible()
        offered = set(options.all_inner_texts())
        assert not offered & others, (label, offered)
        if label == "Role":
            assert offered == {"reviewer"}
        else:
            assert "rev01" in offered
        page.keyboard.press("Escape")
        wait_idle(page)
    expect(page.get_by_text("Change the role of")).to_have_count(0)
    shot(page, "42-lead-accounts")
