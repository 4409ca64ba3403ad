"""The lead pages' study selector in a real browser, at 1366x768: every switch sticks at the first choice.

An unkeyed selectbox whose index came from session state showed the new study for a moment and then
snapped back to the previous one, so a lead had to choose twice. Here a lead makes ten switches on
every page that has the selector, among three studies (the demo's two and one created for the test,
so a switch is not only a toggle between two), with the mouse and with the keyboard (arrow keys, or
typing the name), some with no pause at all (the next switch starts while the rerun of the last one
is still running) and some after a short pause, each then held for a moment to catch a late snap-back.
The choice carries over from page to page, and a new browser session of the same lead opens on it.
"""

from __future__ import annotations

import random

import pytest

from review_app.demo import DEMO_JUDGE_STUDY, DEMO_STUDY
from review_app.services import preferences, studies
from review_app.services.accounts import get_user
from review_app.services.actors import Actor

from .browser_support import LAPTOP, LEAD_PAGES, expect, open_page, shot, sign_in, wait_idle
from .test_browser import server  # noqa: F401  (the `medrev app` fixture)

pytestmark = pytest.mark.browser
THIRD = "Selector check: a third study"
STUDIES = (DEMO_STUDY, DEMO_JUDGE_STUDY, THIRD)  # the selector's order: oldest first
# Every lead page with the study selector (all but Import, which works on files, not on a study).
PAGES = tuple(name for name in LEAD_PAGES if name != "Import")
# (how, pause in seconds) of the ten switches on each page: every input method with and without a pause.
SWITCHES = (
    ("mouse", 0.3),
    ("typing", 0.3),
    ("mouse", 0.0),
    ("arrows", 0.0),
    ("arrows", 0.3),
    ("mouse", 0.0),
    ("typing", 0.0),
    ("mouse", 0.3),
    ("arrows", 0.0),
    ("typing", 0.3),
)


def _box(page):
    return page.get_by_role("combobox", name="Study", exact=True)


def _focused_option(page, box) -> str | None:
    """The option the arrow keys are on (the combobox names it as its active descendant)."""
    active = box.get_attribute("aria-activedescendant")
    return page.locator(f"[id='{active}']").inner_text() if active else None


def _switch(page, study: str, how: str) -> None:
    """Choose ``study`` in the selector once, with the mouse or the keyboard."""
    box = _box(page)
    if how == "mouse":
        box.click()
        page.get_by_role("option", name=study, exact=True).click()
    else:
        # A keyboard user's pointer rests away from the list: an option under a resting pointer takes
        # the list's focus whenever the page moves under it, and Enter then picks that option instead.
        page.mouse.move(LAPTOP["width"] - 5, LAPTOP["height"] - 5)
        box.focus()
        if how == "arrows":
            page.keyboard.press("ArrowDown")  # opens the list on the selected study
            expect(box).to_have_attribute("aria-expanded", "true")
            for _ in range(len(STUDIES)):
                focused = _focused_option(page, box)
                if focused == study:
                    break
                up = focused is not None and STUDIES.index(study) < STUDIES.index(focused)
                page.keyboard.press("ArrowUp" if up else "ArrowDown")
        else:
            page.keyboard.press("ControlOrMeta+a")
            page.keyboard.type(study)
        expect(page.get_by_role("option", name=study, exact=True)).to_have_attribute("data-focused", "true")
        page.keyboard.press("Enter")
    expect(box).to_have_value(study)


def _holds(page, study: str, where: str) -> None:
    """Once the rerun is over the selector still shows ``study``, sampled for a while (a snap-back came late)."""
    wait_idle(page)
    for _ in range(4):
        assert _box(page).input_value() == study, f"{where}: snapped back from {study!r}"
        page.wait_for_timeout(150)
    expect(page.locator("[data-testid='stException']")).to_have_count(0)


def test_ten_switches_stick_on_every_lead_page_and_the_next_session_opens_on_the_last(server, browser):  # noqa: F811
    base, engine = server
    lead = get_user(engine, "lead01")
    studies.create_study(engine, THIRD, rubrics=["A"], actor=Actor(lead.id))
    assert [s.name for s in studies.list_studies(engine)] == list(STUDIES)
    rng = random.Random(20261129)  # its hundredth switch lands on the oldest study

    page = open_page(browser, timeout=30_000)
    sign_in(page, base, "lead01")
    current = THIRD  # no choice stored yet: the newest study
    for name in PAGES:
        page.get_by_role("link", name=name, exact=True).click()
        wait_idle(page)
        expect(_box(page)).to_have_value(current)  # the choice made on the page before
        for step, (how, pause) in enumerate(SWITCHES):
            current = rng.choice([s for s in STUDIES if s != current])
            where = f"{name}, switch {step + 1} ({how}, pause {pause} s) to {current!r}"
            try:
                _switch(page, current, how)
            except AssertionError as exc:  # e.g. the list closed under the keys: the widget was made anew
                raise AssertionError(f"{where}: the selector did not take the choice") from exc
            if pause:
                page.wait_for_timeout(int(pause * 1000))
                _holds(page, current, where)
        _holds(page, current, f"{name}, after ten switches")
        assert preferences.last_study(engine, Actor(lead.id)) == current, name  # the app took the last one
    shot(page, "60-study-selector")
    page.context.close()
    assert current == DEMO_STUDY  # neither the newest study nor the demo's default: the next session proves the memory

    # A new browser session of the same lead opens on the study chosen last, on any lead page.
    page = open_page(browser, timeout=30_000)
    sign_in(page, base, "lead01", "/lead_export")
    expect(_box(page)).to_have_value(current)
    page.get_by_role("link", name="Progress", exact=True).click()
    wait_idle(page)
    expect(_box(page)).to_have_value(current)
    page.context.close()
