"""A lead plans a study, draws a pool that meets the plan and reads reviewer quality; a reviewer cannot.

Real browser (Playwright on Debian's Chromium) against `medrev app` on loopback; screenshots go to
``$MEDREV_ARTEFACTS/screenshots``.
"""

from __future__ import annotations

import pytest

from review_app.analysis.sample_size import wilson_sample_size
from review_app.demo import DEMO_STUDY
from review_app.services import planning, studies

from .browser_support import expect, shot, sign_in, wait_idle
from .test_browser import server  # noqa: F401  (the app-server fixture)

pytestmark = pytest.mark.browser


def _pick(page, label: str, option: str) -> None:
    page.get_by_role("combobox", name=label).click()
    page.get_by_role("option", name=option, exact=True).click()
    wait_idle(page)


def test_lead_plans_draws_a_pool_that_meets_it_and_reads_quality(server, page, browser):  # noqa: F811
    base, engine = server
    needed = wilson_sample_size(0.38, 0.3)
    sign_in(page, base, "lead01")
    page.get_by_role("link", name="Study set-up").click()
    page.get_by_text("Create a study").click()
    page.get_by_role("textbox", name="Study name").fill("Planned study")
    page.get_by_role("button", name="Create study").click()
    expect(page.get_by_text("Created 'Planned study'")).to_be_visible()

    page.get_by_role("link", name="Plan", exact=True).click()
    expect(page.get_by_text("What must the study estimate?")).to_be_visible()
    form = page.locator("[data-testid='stForm']")
    form.get_by_role("spinbutton", name="Target 95% CI width").fill("0.30")
    page.get_by_role("button", name="Plan", exact=True).click()
    expect(page.get_by_text(f"Plan (rate): {needed} tasks")).to_be_visible(timeout=60_000)
    shot(page, "20-plan")
    page.get_by_role("button", name="Keep this plan for 'Planned study'").click()
    expect(page.get_by_text("Kept as the rate plan of 'Planned study'")).to_be_visible()
    assert [p.n_tasks for p in planning.saved_plans(engine, "Planned study")] == [needed]

    page.get_by_role("link", name="Study set-up").click()
    expect(page.get_by_text(f"the pool has 0 units; the plan needs {needed}")).to_be_visible()
    shot(page, "21-setup-short-of-plan")
    pool = page.locator("[data-testid='stForm']").filter(has_text="Draw pool")
    pool.get_by_role("spinbutton", name="Units to draw").fill(str(needed))
    page.get_by_role("button", name="Draw pool").click()
    expect(page.get_by_text(f"pool for Planned study: {needed} units").first).to_be_visible()
    expect(page.get_by_text("The pool size meets the plan.")).to_be_visible()
    expect(page.get_by_text("the plan needs")).to_have_count(0)
    shot(page, "22-setup-meets-plan")
    assert planning.plan_check(engine, "Planned study").units == needed

    page.get_by_role("link", name="Reviewers' quality").click()
    _pick(page, "Study", DEMO_STUDY)
    expect(page.get_by_text("Gold tasks", exact=True)).to_be_visible()
    # severity comes a moment later (the page shows the rest first, then reruns with it): wait for the
    # final page, so no element of the run before is still on screen beside its successor
    expect(page.get_by_text("Computing severity")).to_have_count(0, timeout=60_000)
    table = page.locator("[data-testid='stDataFrame']").first
    expect(table).to_be_visible()
    expect(page.get_by_role("button", name="Download this table (CSV)")).to_be_visible()
    shot(page, "23-reviewer-quality")

    # A reviewer has no link to the page, and its address does not open it.
    context = browser.new_context(viewport={"width": 1280, "height": 800})
    reviewer = context.new_page()
    reviewer.set_default_timeout(20_000)
    sign_in(reviewer, base, "rev03")
    expect(reviewer.get_by_role("link", name="Reviewers' quality")).to_have_count(0)
    expect(reviewer.get_by_role("link", name="Plan", exact=True)).to_have_count(0)
    for path in ("/lead_quality", "/lead_plan"):
        # The address typed while signed in (the session cookie follows the account), and a bookmarked
        # address opened signed out, which signs in and then lands there only if allowed.
        reviewer.goto(base + path)
        fresh = browser.new_context(viewport={"width": 1280, "height": 800})
        bookmarked = fresh.new_page()
        bookmarked.set_default_timeout(20_000)
        sign_in(bookmarked, base, "rev03", path=path)
        for shown in (reviewer, bookmarked):
            wait_idle(shown)
            expect(shown.get_by_role("button", name="Sign out")).to_be_visible()
            expect(shown.get_by_text("Gold tasks", exact=True)).to_have_count(0)
            expect(shown.get_by_text("What must the study estimate?")).to_have_count(0)
            expect(shown.get_by_text("Severity")).to_have_count(0)
        fresh.close()
    shot(reviewer, "24-reviewer-no-quality")
    context.close()
    assert studies.get_study(engine, "Planned study").rubrics == "A,B"
