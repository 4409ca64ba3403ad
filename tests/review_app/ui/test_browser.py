"""Main journeys in a real browser: Playwright driving Debian's Chromium against `medrev app` on loopback.

Screenshots of every step go to ``$MEDREV_ARTEFACTS/screenshots`` (default ``artefacts/``).
"""

from __future__ import annotations

import json
import random
import re

import pytest
from sqlalchemy import func
from sqlmodel import select

from review_app.db.connect import get_engine
from review_app.db.engine import read_session
from review_app.db.models import Annotation, Assignment, Draft, Task
from review_app.services import studies

from .browser_support import (
    A_DIMENSIONS,
    B_DIMENSIONS,
    annotations,
    choose,
    current_task,
    demo_app,
    dimension,
    expect,
    open_page,
    own_page,
    panel,
    shot,
    shown_task,
    sign_in,
    start_next_task,
    stored_scores,
    wait_idle,
)
from .markup_support import markup_assignment
from .panel_support import judge_assignment

pytestmark = pytest.mark.browser


@pytest.fixture
def server(demo_template, tmp_path):
    """`medrev app` on a private copy of the demo database; yields (base URL, engine)."""
    with demo_app(demo_template, tmp_path) as (base, url):
        yield base, get_engine(url)


def test_reviewer_journey_mouse_keyboard_and_reload(server, page):
    base, engine = server
    sign_in(page, base, "rev01")
    shot(page, "01-queue")
    first = start_next_task(page)
    assert shown_task(page) == first
    shot(page, "02-review-rubric-a")
    for key in A_DIMENSIONS:
        choose(page, first, key, 2)
    page.get_by_role("button", name="Disputed gold answer").click()
    page.get_by_role("button", name="Submit").click()
    expect(page.get_by_text("Submitted. Thank you!")).to_be_visible()
    assert annotations(engine, first) == 1
    with read_session(engine) as session:
        assert session.exec(select(Annotation.flags).where(Annotation.assignment_id == first)).one() == [
            "disputed_gold"
        ]

    expect(page.get_by_text("Rubric B: response review")).to_be_visible()
    wait_idle(page)
    second = current_task(page)
    shot(page, "03-review-rubric-b")
    for key in B_DIMENSIONS:
        choose(page, second, key, 0)
    page.get_by_role("button", name="Submit").click()
    expect(page.get_by_text("Submitted. Thank you!")).to_be_visible()
    assert stored_scores(engine, second) == dict.fromkeys(B_DIMENSIONS, 0)

    expect(panel(page).and_(page.locator(f":not([data-aid='{second}'])"))).to_have_count(1)
    wait_idle(page)
    third = current_task(page)
    comment = page.get_by_role("textbox", name="Comment (optional)")
    comment.fill("typed 1 and 2 here")  # digits typed in a text box must not score anything
    page.evaluate("document.activeElement.blur()")
    wait_idle(page)
    checked = panel(page, third).locator(".mrk-level[aria-checked='true']")
    expect(checked).to_have_count(0)
    # Each key scores the highlighted dimension and moves on, however fast they come (see below).
    for key in ("2", "2", "1", "2", "2"):
        page.keyboard.press(key)
    expect(checked).to_have_count(5)
    wait_idle(page)
    shot(page, "04-keyboard-scored")
    page.keyboard.press("Control+Enter")
    expect(page.get_by_text("Submitted. Thank you!")).to_be_visible()
    expect(panel(page, third)).to_have_count(0)
    assert stored_scores(engine, third) == dict(zip(A_DIMENSIONS, (2, 2, 1, 2, 2), strict=True))
    with read_session(engine) as session:
        comment = session.exec(select(Annotation.comment).where(Annotation.assignment_id == third)).one()
    assert comment == "typed 1 and 2 here"

    expect(page.get_by_text("Rubric B: response review")).to_be_visible()
    wait_idle(page)
    fourth = current_task(page)
    choose(page, fourth, "final_correctness", 2)
    choose(page, fourth, "harm_potential", 1)
    page.reload()  # a new browser session: the session cookie keeps rev01 signed in, the draft is found
    expect(page.get_by_role("button", name="Sign out")).to_be_visible()
    expect(page.get_by_text("Rubric B: response review")).to_be_visible()
    assert current_task(page) == fourth
    final = dimension(page, fourth, "final_correctness").locator(".mrk-level[data-value='2']")
    expect(final).to_have_attribute("aria-checked", "true")
    harm = dimension(page, fourth, "harm_potential").locator(".mrk-level[data-value='1']")
    expect(harm).to_have_attribute("aria-checked", "true")
    expect(panel(page).locator(".mrk-level[aria-checked='true']")).to_have_count(2)
    # The keys now score the first dimension without a score.
    expect(dimension(page, fourth, "injection_uptake")).to_have_class(re.compile("mrk-active"))
    shot(page, "05-draft-restored")


def _no_exception(page) -> None:
    assert page.locator("[data-testid='stException']").count() == 0
    assert page.get_by_text("KeyError").count() == 0


@pytest.mark.parametrize("gap_ms", [40, 80, 150])
def test_fast_keyboard_scoring_never_shifts_a_score(server, page, gap_ms):
    """Number keys `gap_ms` apart, Ctrl+Enter, one more key at once: the database holds exactly the keys.

    rev01's queue alternates Rubric A (5 dimensions) and Rubric B (4), so both are typed.
    """
    base, engine = server
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    sign_in(page, base, "rev01", path="/review")
    wait_idle(page)
    rng = random.Random(gap_ms)
    rubrics = []
    for _round in range(4):
        aid = shown_task(page)
        keys = [d.get_attribute("data-dim") for d in panel(page, aid).locator(".mrk-dim").all()]
        rubrics.append(len(keys))
        typed = [rng.choice("012") for _ in keys]
        for key in typed:
            page.keyboard.press(key)
            page.wait_for_timeout(gap_ms)
        page.keyboard.press("Control+Enter")
        page.keyboard.press(rng.choice("012"))  # right after the submit: goes to no task
        expect(panel(page, aid)).to_have_count(0)  # the next task is shown
        wait_idle(page)
        _no_exception(page)
        assert stored_scores(engine, aid) == {k: int(v) for k, v in zip(keys, typed, strict=True)}
        assert annotations(engine, aid) == 1
        nxt = shown_task(page)
        expect(panel(page, nxt).locator(".mrk-level[aria-checked='true']")).to_have_count(0)
        with read_session(engine) as session:
            assert session.get(Draft, nxt) is None  # the late key did not reach the next task either
    assert sorted(set(rubrics)) == [len(B_DIMENSIONS), len(A_DIMENSIONS)]
    assert errors == []
    shot(page, f"07-fast-keys-{gap_ms}ms")


def test_lead_imports_a_file_and_assigns_raters(server, page, tmp_path):
    base, engine = server
    sign_in(page, base, "lead01")
    page.get_by_role("link", name="Import").click()
    expect(page.get_by_text("What is in the file?")).to_be_visible()
    items = tmp_path / "MEDMISQA.jsonl"
    rows = [
        {
            "id": f"br-{i}",
            "question": f"Browser item {i}?",
            "answer": "A",
            "opa": f"a{i}",
            "opb": f"b{i}",
            "injecta": f"true {i}",
            "injectb": f"false {i}",
            "injection_content": "Cue Remapping",
            "injection_provenance": "Neutral False Statement",
        }
        for i in range(12)
    ]
    items.write_text("".join(json.dumps(row) + "\n" for row in rows))
    page.locator("input[type=file]").set_input_files(str(items))
    expect(page.get_by_text("Ready: 12 items rows, 12 new")).to_be_visible()
    shot(page, "10-import-preview")
    page.get_by_role("button", name="Import", exact=True).click()
    expect(page.get_by_text("Imported: items")).to_be_visible()

    page.get_by_role("link", name="Study set-up").click()
    page.get_by_text("Create a study").click()
    page.get_by_role("textbox", name="Study name").fill("Browser study")
    page.get_by_role("button", name="Create study").click()
    expect(page.get_by_text("Created 'Browser study'")).to_be_visible()
    pool = page.locator("[data-testid='stForm']").filter(has_text="Draw pool")
    pool.get_by_role("spinbutton", name="Units to draw").fill("10")
    page.get_by_role("button", name="Draw pool").click()
    shot(page, "11-pool")
    expect(page.get_by_text("pool for Browser study: 10 units, 20 tasks").first).to_be_visible()
    page.get_by_role("button", name="Assign", exact=True).click()
    expect(page.get_by_text("assignments created over 10 units").first).to_be_visible()
    shot(page, "12-assigned")
    study = studies.get_study(engine, "Browser study")
    with read_session(engine) as session:
        count = session.exec(select(func.count()).select_from(Assignment).where(Assignment.study_id == study.id)).one()
    assert count > 20


def test_model_output_cannot_run_scripts_or_load_remote_content(server, page):
    base, engine = server
    aid = markup_assignment(engine)
    dialogs, remote = [], []
    page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
    page.on("request", lambda r: remote.append(r.url) if "example.invalid" in r.url else None)
    sign_in(page, base, "rev01", path=f"/review?task={aid}")
    expect(page.get_by_text("<script>alert(1)</script>", exact=False)).to_be_visible()
    page.wait_for_timeout(1000)
    shot(page, "20-inert-model-output")
    assert dialogs == [] and remote == []
    assert page.locator("img[src*='example.invalid']").count() == 0
    assert page.locator("a[href*='example.invalid']").count() == 0


def test_chinese_item_renders(server, page):
    base, engine = server
    from review_app.db.models import Item, Reviewer

    with read_session(engine) as session:
        aid, username, question = session.exec(
            select(Assignment.id, Reviewer.username, Item.question)
            .join(Task, Task.id == Assignment.task_id)
            .join(Item, Item.id == Task.item_id)
            .join(Reviewer, Reviewer.id == Assignment.reviewer_id)
            .where(Item.language == "zh", Task.rubric == "A")
        ).first()
    sign_in(page, base, username, path=f"/review?task={aid}")
    expect(page.get_by_text(question[:12], exact=False).first).to_be_visible()
    assert page.locator("[lang='zh-Hans']").count() >= 2  # question and options carry the language
    shot(page, "06-chinese-item")


GEOMETRY = """() => {
  const box = (el) => {
    if (!el) return null;
    const r = el.getBoundingClientRect();
    return {top: r.top, bottom: r.bottom};
  };
  const main = document.querySelector("[data-testid='stMain']");
  const material = document.querySelector(".st-key-mr-material");
  return {
    window: window.innerHeight,
    page: {scrollTop: main.scrollTop, overflow: main.scrollHeight - main.clientHeight},
    material: {...box(material), scrollTop: material.scrollTop, scrollHeight: material.scrollHeight},
    first: box(material.querySelector("[data-testid='stElementContainer'], .stHtml")),
    response: box(document.querySelector(".st-key-mr-response")),
    submit: box([...document.querySelectorAll(".mrk-submit")].find((b) => !b.hidden)),
    scores: box(document.querySelector(".mrk-box")),
    active: box(document.querySelector(".mrk-dim.mrk-active")),
    last: box([...document.querySelectorAll(".mrk-dim")].pop()),
  };
}"""


def _inside(inner: dict, outer: dict) -> bool:
    return inner["top"] >= outer["top"] - 1 and inner["bottom"] <= outer["bottom"] + 1


def test_review_page_fits_a_1366x768_laptop(server, browser):
    """Response start and Submit on screen without scrolling; the active dimension in view; a new task at its top."""
    base, engine = server
    with own_page(browser) as page:
        sign_in(page, base, "rev01", path="/review")
        expect(page.get_by_text("Rubric A: item validation")).to_be_visible()
        expect(page.get_by_role("button", name="Submit")).to_be_visible()  # the panel's code has run
        wait_idle(page)
        screen = {"top": 0, "bottom": 768}
        a = page.evaluate(GEOMETRY)
        assert a["page"] == {"scrollTop": 0, "overflow": 0}  # nothing below the window: no page scroll
        assert _inside(a["submit"], screen) and 0 <= a["first"]["top"] < 200  # the material starts at the top
        assert a["material"]["bottom"] <= 768 and a["material"]["scrollHeight"] > 0
        # Rubric A has five dimensions: the last starts out below the score box, and the active one is
        # scrolled into view as the keys move down (keys, arrows).
        assert not _inside(a["last"], a["scores"])
        shot(page, "08-layout-1366x768-rubric-a")
        first = shown_task(page)
        for key in ("2", "1", "2", "2"):
            page.keyboard.press(key)
            moved = page.evaluate(GEOMETRY)
            assert _inside(moved["active"], moved["scores"]) and _inside(moved["active"], screen)
        assert _inside(page.evaluate(GEOMETRY)["last"], page.evaluate(GEOMETRY)["scores"])
        page.keyboard.press("ArrowUp")
        page.keyboard.press("ArrowUp")
        page.keyboard.press("ArrowUp")
        page.keyboard.press("ArrowUp")  # back to the first dimension, scrolled back into view
        top = page.evaluate(GEOMETRY)
        assert _inside(top["active"], top["scores"])
        expect(dimension(page, first, A_DIMENSIONS[0])).to_have_class(re.compile("mrk-active"))
        page.keyboard.press("ArrowDown")
        page.keyboard.press("ArrowDown")
        page.keyboard.press("ArrowDown")
        page.keyboard.press("ArrowDown")
        page.keyboard.press("0")  # the fifth dimension
        wait_idle(page)
        # The reviewer has read down the material; the next task must not open half-way down.
        page.locator(".st-key-mr-material").evaluate("(el) => { el.scrollTop = el.scrollHeight; }")
        assert page.evaluate(GEOMETRY)["material"]["scrollTop"] > 100
        page.keyboard.press("Control+Enter")
        expect(page.get_by_text("Rubric B: response review")).to_be_visible()
        expect(panel(page, first)).to_have_count(0)
        expect(page.locator(".st-key-mr-response")).to_be_visible()
        wait_idle(page)
        page.wait_for_timeout(300)
        assert stored_scores(engine, first) == dict(zip(A_DIMENSIONS, (2, 1, 2, 2, 0), strict=True))
        b = page.evaluate(GEOMETRY)
        assert b["material"]["scrollTop"] == 0 and b["page"] == {"scrollTop": 0, "overflow": 0}
        # Rubric B: the model response is the first thing in the material, at the top of the window.
        assert b["response"]["top"] == pytest.approx(b["material"]["top"], abs=2)
        assert 0 <= b["response"]["top"] < 200 and _inside(b["submit"], screen)
        assert _inside(b["active"], b["scores"])
        shot(page, "09-layout-1366x768-rubric-b")


def test_judge_audit_keys_follow_the_scale_positions(server, page):
    """A -1/0/1 scale is typed with keys 1/2/3 (its positions); key 0 means nothing there."""
    base, engine = server
    aid = judge_assignment(engine)
    sign_in(page, base, "rev01", path=f"/review?task={aid}")
    expect(panel(page, aid)).to_have_count(1)
    wait_idle(page)
    for key in ("0", "1", "2"):  # "0" is not a key of the first dimension: ignored, nothing moves
        page.keyboard.press(key)
    page.keyboard.press("Control+Enter")
    expect(panel(page, aid)).to_have_count(0)
    wait_idle(page)
    assert stored_scores(engine, aid) == {"clinician_label": -1, "confidence": 2}


def test_submit_is_refused_next_to_submit_when_the_screen_is_not_the_saved_draft(server, browser):
    """Two windows on one task: the one showing outdated scores cannot submit them."""
    base, engine = server
    pages = []
    for _ in range(2):
        page = open_page(browser)
        sign_in(page, base, "rev01", path="/review")
        wait_idle(page)
        pages.append(page)
    one, two = pages
    aid = shown_task(one)
    assert shown_task(two) == aid
    try:
        for _ in A_DIMENSIONS:
            one.keyboard.press("2")
        wait_idle(one)
        expect(panel(one, aid).locator(".mrk-level.mrk-on[data-value='2']")).to_have_count(len(A_DIMENSIONS))
        # The other window changes every saved score, by mouse: each click names its dimension, so the
        # precondition holds however loaded the machine is (keyboard timing has tests of its own above).
        for key in A_DIMENSIONS:
            dimension(two, aid, key).locator(".mrk-level[data-value='0']").click()
            wait_idle(two)
        expect(panel(two, aid).locator(".mrk-level.mrk-on[data-value='0']")).to_have_count(len(A_DIMENSIONS))
        one.keyboard.press("Control+Enter")  # still shows 2 everywhere
        notice = one.locator(".mrk-notice.mrk-error")
        expect(notice).to_contain_text("Not submitted: the scores on your screen are not the saved ones")
        expect(notice).to_contain_text("Base-item validity: screen 2, saved 0")
        wait_idle(one)
        assert annotations(engine, aid) == 0
        # The refused window now shows what is saved, and the reviewer can submit that knowingly.
        expect(panel(one, aid).locator(".mrk-level.mrk-on[data-value='0']")).to_have_count(len(A_DIMENSIONS))
        shot(one, "10-refused-submit")
        box = notice.bounding_box()
        submit = one.get_by_role("button", name="Submit").bounding_box()
        assert 0 < submit["y"] - (box["y"] + box["height"]) < 40  # the message sits just above Submit
        one.get_by_role("button", name="Submit").click()
        expect(panel(one, aid)).to_have_count(0)
        assert stored_scores(engine, aid) == dict.fromkeys(A_DIMENSIONS, 0)
    finally:
        for page in pages:
            page.context.close()
