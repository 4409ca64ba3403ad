"""A score click sends the task's elements and the panel's data, not the panel's code or the page's style rules.

The score panel's code (``score_panel.js`` with ``a11y.js``, 33 kB) goes with the panel until the browser
has sent an event; from then on the component names the code already on the page. The style rules of the
panel and the material are put up once per page run, outside the task's fragment that every click reruns.
"""

from __future__ import annotations

import json
import re

import pytest
from streamlit.testing.v1 import AppTest

from review_app.services import review_queue
from review_app.ui.components import material

from .browser_support import (
    A_DIMENSIONS,
    expect,
    panel,
    shown_task,
    sign_in,
    start_next_task,
    stored_scores,
    wait_idle,
)
from .conftest import sign_in as sign_in_app
from .panel_support import Panel
from .test_browser import server  # noqa: F401  (the `medrev app` fixture)


def _component(at: AppTest):
    (element,) = at.get("bidi_component")
    return element.proto


def _html(at: AppTest) -> list[str]:
    return [html.proto.body for html in at.get("html")]


def test_the_code_goes_with_the_panel_until_the_browser_sends_an_event(demo_db):
    at = sign_in_app("rev01")
    aid = review_queue.next_assignment(demo_db, at.session_state["medrev_user"].id)
    at.query_params["task"] = str(aid)
    at.switch_page("views/review.py").run()
    first = _component(at)
    assert first.component_name == "medrev_score_panel"
    assert "S.draw = draw;" in first.js_content and len(first.js_content) > 20_000
    assert first.css_content == ""  # the rules are the page's (below)
    keys = Panel(at)
    keys.score(A_DIMENSIONS[0], 1)
    assert not at.exception, at.exception
    drawn = _component(at)
    assert drawn.component_name == "drawn_medrev_score_panel" and len(drawn.js_content) < 200
    assert drawn.id == first.id  # one widget: the browser's events keep their address
    assert json.loads(drawn.json).keys() == json.loads(first.json).keys()  # the panel gets the same data either way
    assert keys.data["scores"] == {A_DIMENSIONS[0]: 1}
    keys.score_all(dict.fromkeys(A_DIMENSIONS[1:], 2))
    keys.submit()
    assert keys.data["aid"] != aid  # the next task, drawn by the code the page has
    assert _component(at).component_name == "drawn_medrev_score_panel"
    at.switch_page("views/queue.py").run()
    at.switch_page("views/review.py").run()  # the same page, back from the queue: it still has the code
    assert _component(at).component_name == "drawn_medrev_score_panel"
    fresh = sign_in_app("rev01")  # another load of the page: a new session, which is sent the code
    fresh.query_params["task"] = str(keys.data["aid"])
    fresh.switch_page("views/review.py").run()
    assert _component(fresh).component_name == "medrev_score_panel"


def test_the_style_rules_are_the_pages_and_the_material_carries_none(demo_db):
    at = sign_in_app("rev01")
    user = at.session_state["medrev_user"]
    aid = review_queue.next_assignment(demo_db, user.id, rubric="B")
    at.query_params["task"] = str(aid)
    at.switch_page("views/review.py").run()
    assert not at.exception, at.exception
    bodies = _html(at)
    styles = [b for b in bodies if b.lstrip().startswith("<style>") and ".mrk {" in b]
    assert len(styles) == 1 and material.STYLE.strip() in styles[0] and material.MARKDOWN_STYLE.strip() in styles[0]
    cards = [b for b in bodies if 'class="mr-card' in b or 'class="mr-md' in b]
    assert cards and not any("<style" in b for b in cards)


@pytest.mark.browser
def test_the_panel_drawn_by_the_pages_code_keeps_its_place_focus_and_style(server, page):  # noqa: F811
    base, engine = server
    errors = []
    page.on("console", lambda m: errors.append(f"{m.type}: {m.text}") if m.type in ("error", "warning") else None)
    page.on("pageerror", lambda e: errors.append(f"page error: {e}"))
    sign_in(page, base, "rev01")
    first = start_next_task(page)
    page.wait_for_function("() => window.__medrevScorePanel?.root?.contains(document.activeElement)")
    page.evaluate("window.__firstRoot = window.__medrevScorePanel.root")
    page.keyboard.press("2")  # the first event: its rerun draws the panel with the code on the page
    on = panel(page, first).locator(".mrk-level[aria-checked='true']")
    expect(on).to_have_count(1)
    wait_idle(page)
    kept = page.evaluate(
        "(() => { const r = window.__medrevScorePanel.root;"
        " return r === window.__firstRoot && r.isConnected && r.contains(document.activeElement); })()"
    )
    assert kept, "the panel was drawn again in another place, or the focus left it"
    assert on.evaluate("e => getComputedStyle(e).backgroundColor") == "rgb(230, 236, 255)"  # .mrk-level.mrk-on
    for key in ("1", "0", "2", "1"):
        page.keyboard.press(key)
    expect(on).to_have_count(5)
    wait_idle(page)
    page.keyboard.press("Control+Enter")
    expect(page.get_by_text("Submitted. Thank you!")).to_be_visible()
    assert stored_scores(engine, first) == dict(zip(A_DIMENSIONS, (2, 1, 0, 2, 1), strict=True))
    expect(panel(page).and_(page.locator(f":not([data-aid='{first}'])"))).to_have_count(1)
    wait_idle(page)
    card = page.locator(".mr-card").first
    assert card.evaluate("e => getComputedStyle(e).borderTopLeftRadius") == "10px"  # the material's rules
    submit = page.locator(".mrk-submit")
    assert re.fullmatch(r"rgb\(.+\)", submit.evaluate("e => getComputedStyle(e).backgroundColor"))
    assert submit.evaluate("e => getComputedStyle(e).color") == "rgb(255, 255, 255)"
    second = shown_task(page)
    page.get_by_role("link", name="My queue").click()
    page.get_by_role("button", name="Start next task").click()  # the panel drawn again, by the page's code
    expect(panel(page, second)).to_have_count(1)
    wait_idle(page)
    page.keyboard.press("1")
    expect(panel(page, second).locator(".mrk-level[aria-checked='true']")).to_have_count(1)
    wait_idle(page)
    assert page.locator("[data-testid='stException']").count() == 0 and errors == []
