"""WCAG 2.1 AA in a real browser: axe-core on every page, the keyboard alone, screen-reader names, 200% zoom.

Hospitals buy against WCAG 2.1 AA (Section 508, EN 301 549), and a review panel includes clinicians
who use only the keyboard, a screen reader or 200% zoom. Playwright drives Debian's Chromium against
`medrev app` on loopback at 1366x768:

- axe-core (vendored, ``vendor/``) runs its WCAG 2.0/2.1 A and AA rules on the sign-in page, the
  queue, a review task of each rubric (A, B, the judge audit) and every lead page; any serious or
  critical violation fails, listed with its rule, element and help address.
- A reviewer signs in, opens the next task, reads the material (scrolling it), scores, flags with a
  comment and submits with the keyboard alone; a lead adjudicates the same way. Every stop shows its
  focus (an outline or a ring on the focused control), and after each action the focus lands where
  the eye goes: the new task's first dimension, the recorded decision's confirmation.
- Screen readers: the controls are found by the names the accessibility tree gives them, and the
  live region says what a score or a submit did.
- At 200% zoom (683x384 CSS pixels) the review page shows the material and reaches Submit without
  scrolling sideways.
"""

from __future__ import annotations

import ast
import hashlib
import re
from pathlib import Path

import pytest
from sqlmodel import select

from review_app.db.engine import read_session
from review_app.db.models import Annotation, Assignment, Reviewer, Task, TaskFlag
from review_app.demo import DEMO_JUDGE_STUDY, DEMO_STUDY, demo_password
from review_app.rubrics import get_rubric
from review_app.services import adjudication
from review_app.services.actors import SYSTEM

from .browser_support import (
    LAPTOP,
    LEAD_PAGES,
    SHOTS,
    expect,
    open_page,
    own_page,
    panel,
    stored_scores,
    wait_idle,
)
from .table_support import prepare_lead_pages
from .test_browser import server  # noqa: F401  (the `medrev app` fixture)

APP = Path(__file__).resolve().parents[3] / "review_app" / "ui" / "app.py"
VENDOR = Path(__file__).with_name("vendor")
AXE = VENDOR / "axe.min.js"
AXE_VERSION = "4.14.1"
AXE_SHA256 = "29348999450cdf2849a8e70b7912fc2da85a849da39c0d0d5394f51d4a9ed95c"
WCAG_TAGS = ["wcag2a", "wcag2aa", "wcag21a", "wcag21aa"]
ZOOMED = {"width": LAPTOP["width"] // 2, "height": LAPTOP["height"] // 2}  # 1366x768 at 200% browser zoom
FOLDER = SHOTS / "accessibility"
JUDGE_PAGES = ("Agreement", "Adjudication", "Analysis", "Reviewers' quality")  # drawn per rubric
STILL_COMPUTING = ("Computing severity", "Checking reviewer quality", "Computing the study")

RUN_AXE = """
async (tags) => {
  const result = await axe.run(document, { runOnly: { type: "tag", values: tags }, resultTypes: ["violations"] });
  return result.violations
    .filter((v) => v.impact === "serious" || v.impact === "critical")
    .flatMap((v) => v.nodes.map((n) => ({
      rule: v.id, impact: v.impact, help: v.help, url: v.helpUrl,
      target: n.target.join(" "), summary: (n.failureSummary || "").replace(/\\s+/g, " ").slice(0, 300),
    })));
}
"""
# The focused control and whether its focus can be seen. A radio's or a switch's own input is hidden
# (1 px): its label carries the outline.
FOCUS = """
() => {
  const e = document.activeElement;
  if (!e || e === document.body) return null;
  const box = e.getBoundingClientRect();
  const shown = box.width <= 2 || box.height <= 2 ? e.closest("label") || e : e;
  const s = getComputedStyle(shown);
  const outline = s.outlineStyle !== "none" && parseFloat(s.outlineWidth) >= 2;
  const ring = s.boxShadow !== "none" && !/^rgba\\(\\d+, \\d+, \\d+, 0\\) /.test(s.boxShadow);
  return {
    tag: e.tagName,
    name: e.getAttribute("aria-label") || (e.labels && e.labels[0] ? e.labels[0].innerText : "") || e.innerText || "",
    visible: outline || ring,
  };
}
"""
LIVE = "#mr-live"


def _axe(page) -> list[dict]:
    """axe-core's serious and critical WCAG 2.0/2.1 A and AA violations on the page as it is now."""
    if not page.evaluate("() => typeof window.axe === 'object'"):
        page.add_script_tag(path=str(AXE))
    return page.evaluate(RUN_AXE, WCAG_TAGS)


def _settle(page) -> None:
    wait_idle(page)
    for text in STILL_COMPUTING:
        expect(page.get_by_text(text)).to_have_count(0, timeout=180_000)
    wait_idle(page)
    page.wait_for_timeout(700)  # plotly, the grids and the page script (150 ms after the last change) draw late


def _audit(page, name: str, found: dict[str, list[dict]]) -> None:
    _settle(page)
    found[name] = _axe(page)
    FOLDER.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(FOLDER / f"axe-{re.sub(r'[^a-z0-9]+', '-', name.lower()).strip('-')}.png"))


def _report(found: dict[str, list[dict]]) -> str:
    lines = [
        f"{page}: {v['rule']} ({v['impact']}) at {v['target']}: {v['help']} {v['url']}\n    {v['summary']}"
        for page, violations in found.items()
        for v in violations
    ]
    return f"{len(lines)} serious or critical WCAG violation(s):\n" + "\n".join(lines)


def _task_of(engine, username: str, rubric: str) -> int:
    """An open assignment of ``username`` in ``rubric``."""
    with read_session(engine) as session:
        return session.exec(
            select(Assignment.id)
            .join(Task, Task.id == Assignment.task_id)
            .join(Reviewer, Reviewer.id == Assignment.reviewer_id)
            .where(Task.rubric == rubric, Reviewer.username == username, Assignment.status != "submitted")
            .order_by(Assignment.id)
        ).first()


def _rubric_of(engine, aid: int) -> str:
    with read_session(engine) as session:
        return session.exec(
            select(Task.rubric).join(Assignment, Assignment.task_id == Task.id).where(Assignment.id == aid)
        ).one()


def _keyboard_sign_in(page, base: str, username: str, path: str = "/") -> None:
    """Sign in with the keyboard alone: the page puts the focus in Username."""
    page.goto(base + path)
    username_box = page.get_by_role("textbox", name="Username")
    expect(username_box).to_be_focused()
    _assert_focus_visible(page, "Username")
    page.keyboard.type(username)
    page.keyboard.press("Tab")
    expect(page.get_by_role("textbox", name="Password")).to_be_focused()
    _assert_focus_visible(page, "Password")
    page.keyboard.type(demo_password(username))
    page.keyboard.press("Enter")
    expect(page.get_by_role("button", name="Sign out")).to_be_visible()
    wait_idle(page)


def _focus(page) -> dict | None:
    return page.evaluate(FOCUS)


def _assert_focus_visible(page, where: str) -> dict:
    focused = _focus(page)
    assert focused is not None, f"{where}: nothing has the focus"
    assert focused["visible"], f"{where}: the focus on {focused['tag']} {focused['name']!r} is not visible"
    return focused


def _tab_until(page, test, *, back: bool = False, most: int = 40, where: str = "") -> dict:
    """Press Tab (or Shift+Tab) until ``test(focused)`` holds; every stop on the way shows its focus."""
    for _ in range(most):
        page.keyboard.press("Shift+Tab" if back else "Tab")
        focused = _assert_focus_visible(page, where)
        if test(focused):
            return focused
    raise AssertionError(f"{where}: not reached in {most} presses of {'Shift+Tab' if back else 'Tab'}")


def _read_to_the_end(page, region) -> None:
    """Page Down in the focused region until its end is in view (the browser scrolls smoothly: polled)."""
    at_end = "(el) => el.scrollTop + el.clientHeight >= el.scrollHeight - 2"
    for _ in range(30):
        page.keyboard.press("PageDown")
        page.wait_for_timeout(150)
        if region.evaluate(at_end):
            return
    raise AssertionError("the material could not be read to its end with the keyboard")


def _first_dimension_focused(page, rubric_key: str) -> None:
    """The focus is on a score of the task's first dimension (its Tab stop), named for screen readers."""
    dim = get_rubric(rubric_key).dimensions[0]
    names = [f"Score {lv.value}, {lv.label}, for {dim.name}" for lv in dim.levels]
    focused = _assert_focus_visible(page, "the new task")
    assert focused["name"] in names, f"the focus is on {focused['name']!r}, not on {dim.name}"


def test_vendored_axe_is_the_recorded_release_under_its_licence():
    """The rules the audit runs are pinned: version and checksum as recorded, licence beside the file."""
    text = AXE.read_bytes()
    assert hashlib.sha256(text).hexdigest() == AXE_SHA256
    assert text.startswith(f"/*! axe v{AXE_VERSION}".encode())
    assert "Mozilla Public License" in (VENDOR / "LICENSE").read_text(encoding="utf-8")
    readme = (VENDOR / "README.md").read_text(encoding="utf-8")
    assert AXE_VERSION in readme and AXE_SHA256 in readme


def test_the_audit_covers_every_lead_page_of_the_app():
    """The lead pages audited are the app's own list (``PAGES`` in app.py): a new page is audited too."""
    tree = ast.parse(APP.read_text(encoding="utf-8"))
    pages = next(
        node.value for node in tree.body if isinstance(node, ast.Assign) and node.targets[0].id == "PAGES"
    )
    leads = [entry.elts[1].value for entry in pages.elts if entry.elts[4].id == "LEADS"]
    assert len(leads) > 10 and sorted(leads) == sorted(LEAD_PAGES)
    assert set(JUDGE_PAGES) <= set(LEAD_PAGES)


def test_the_page_script_survives_streamlits_sanitiser():
    """st.html's sanitiser drops a script whose text looks like markup: the repairs would silently not run."""
    from review_app.ui.components import accessibility

    assert not re.search(r"<[/\w!]", accessibility.SCRIPT)


def test_every_chart_has_a_text_alternative_with_its_numbers():
    from review_app.ui.components import charts

    figure = charts.completion_bars(
        [{"rubric": "A", "complete": 3, "tasks": 5}, {"rubric": "B", "complete": 1, "tasks": 4}], "rubric", "By rubric"
    )
    assert figure.layout.meta["alt"] == "Chart: By rubric. complete: A 3, B 1; not yet: A 2, B 3."


@pytest.mark.browser
def test_axe_finds_no_serious_violation_on_any_page(server, browser):  # noqa: F811
    """Sign-in, queue, a review task of each rubric and every lead page pass WCAG 2.1 AA (axe-core)."""
    base, engine = server
    prepare_lead_pages(engine, {"review": DEMO_STUDY, "judge": DEMO_JUDGE_STUDY})
    found: dict[str, list[dict]] = {}
    tasks = {rubric: _task_of(engine, "rev01", rubric) for rubric in ("A", "B", "judge")}
    assert all(tasks.values()), tasks

    page = open_page(browser, timeout=60_000)
    page.goto(base)
    expect(page.get_by_role("textbox", name="Username")).to_be_visible()
    _audit(page, "sign-in", found)
    page.get_by_role("textbox", name="Username").fill("rev01")
    page.get_by_role("textbox", name="Password").fill("not the password")
    page.get_by_role("button", name="Sign in").click()
    expect(page.get_by_text("Wrong username or password.")).to_be_visible()
    _audit(page, "sign-in, refused", found)
    page.get_by_role("textbox", name="Password").fill(demo_password("rev01"))
    page.get_by_role("button", name="Sign in").click()
    expect(page.get_by_role("button", name="Start next task")).to_be_visible()
    _audit(page, "queue", found)
    # The navigation is the app's own: a landmark of links, the current page marked for screen readers.
    nav = page.get_by_role("navigation", name="Pages")
    expect(nav.get_by_role("link", name="My queue", exact=True)).to_have_attribute("aria-current", "page")
    expect(nav.get_by_role("link", name="Review", exact=True)).not_to_have_attribute("aria-current", "page")

    for rubric, aid in tasks.items():
        page.goto(f"{base}/review?task={aid}")
        expect(panel(page, aid)).to_have_count(1)
        _audit(page, f"review, rubric {rubric}", found)
        expect(page.get_by_role("region", name=re.compile("^Task material"))).to_have_count(1)
    page.get_by_role("button", name="Flag for lead").click()
    expect(page.get_by_role("dialog", name="Flag for lead")).to_be_visible()
    _audit(page, "review, the flag dialog open", found)
    page.context.close()

    page = open_page(browser, timeout=60_000)
    page.goto(base)
    page.get_by_role("textbox", name="Username").fill("lead01")
    page.get_by_role("textbox", name="Password").fill(demo_password("lead01"))
    page.get_by_role("button", name="Sign in").click()
    expect(page.get_by_role("button", name="Sign out")).to_be_visible()
    for study, pages in ((DEMO_STUDY, LEAD_PAGES), (DEMO_JUDGE_STUDY, JUDGE_PAGES)):
        for name in pages:
            page.get_by_role("link", name=name, exact=True).click()
            _settle(page)
            box = page.get_by_role("combobox", name="Study", exact=True)
            chosen = page.locator("[data-testid='stSelectbox']").filter(has=box)
            if box.count() and not chosen.get_by_text(study, exact=True).count():
                box.click()
                page.get_by_role("option", name=study, exact=True).click()
            _audit(page, f"{name} ({study})", found)
            if name == "Progress":  # every chart is an image named by its numbers
                charts = page.locator("[data-testid='stPlotlyChart']")
                expect(page.get_by_role("img", name=re.compile(r"^Chart: By rubric\. complete: "))).to_have_count(1)
                expect(page.get_by_role("img", name=re.compile(r"^Chart: "))).to_have_count(charts.count())
            if name == "Adjudication":  # the raters' table has its column headers
                ratings = page.locator("[data-testid='stTable']").last
                expect(ratings.get_by_role("columnheader").first).to_be_visible()
    page.context.close()
    assert not any(found.values()), _report(found)


@pytest.mark.browser
def test_a_reviewer_signs_in_reads_scores_flags_and_submits_with_the_keyboard_alone(server, browser):  # noqa: F811
    """Tab, Shift+Tab, Enter, Space, the arrow keys, the score keys and Ctrl+Enter: no mouse at all."""
    base, engine = server
    with own_page(browser, timeout=30_000) as page:
        _keyboard_sign_in(page, base, "rev01")
        # The queue opens on its next-task button; Enter opens the task.
        expect(page.get_by_role("button", name="Start next task")).to_be_focused()
        _assert_focus_visible(page, "the queue")
        page.keyboard.press("Enter")
        expect(panel(page)).to_have_count(1)
        wait_idle(page)
        first = int(panel(page).get_attribute("data-aid"))
        expect(page.get_by_text("Rubric A: item validation")).to_be_visible()
        _first_dimension_focused(page, "A")

        # Rubric A: the score keys score the focused dimension; the focus follows to the next one.
        rubric = get_rubric("A")
        for i, key in enumerate(("2", "2", "1", "2", "2")):
            page.keyboard.press(key)
            dim = rubric.dimensions[i]
            level = next(lv for lv in dim.levels if str(lv.value) == key)
            expect(page.locator(LIVE)).to_contain_text(f"{dim.name}: {level.value}, {level.label}.")
            if i + 1 < len(rubric.dimensions):
                following = rubric.dimensions[i + 1]
                assert _assert_focus_visible(page, "a scored dimension")["name"].endswith(f"for {following.name}")
        # A flag of the rubric, toggled with Space, then the comment box; Ctrl+Enter submits from there.
        _tab_until(page, lambda f: f["name"] == "Disputed gold answer", where="the flags")
        page.keyboard.press("Space")
        expect(page.get_by_role("button", name="Disputed gold answer")).to_have_attribute("aria-pressed", "true")
        _tab_until(page, lambda f: f["tag"] == "TEXTAREA", where="the comment")
        page.keyboard.type("Stem fine; the gold answer is debatable.")
        page.keyboard.press("Control+Enter")
        expect(panel(page, first)).to_have_count(0)
        expect(page.locator(".mrk-notice[role='status']")).to_have_text("Submitted. Thank you!")
        wait_idle(page)
        second = int(panel(page).get_attribute("data-aid"))
        expect(page.get_by_text("Rubric B: response review")).to_be_visible()
        _first_dimension_focused(page, "B")
        assert stored_scores(engine, first) == dict(zip(rubric.dimension_keys, (2, 2, 1, 2, 2), strict=True))
        with read_session(engine) as session:
            flags, comment = session.exec(
                select(Annotation.flags, Annotation.comment).where(Annotation.assignment_id == first)
            ).one()
        assert flags == ["disputed_gold"] and comment == "Stem fine; the gold answer is debatable."

        # Rubric B: back to the material (a named tab stop) and read it to its end with the keyboard.
        region = page.get_by_role("region", name=re.compile("^Task material"))
        _tab_until(page, lambda f: f["name"].startswith("Task material"), back=True, most=6, where="the material")
        expect(region).to_be_focused()
        size = region.evaluate("(el) => ({ scroll: el.scrollHeight, client: el.clientHeight })")
        assert size["scroll"] > size["client"] + 50, "the Rubric B material should need scrolling at 1366x768"
        _read_to_the_end(page, region)
        expect(panel(page, second).locator(".mrk-level[aria-checked='true']")).to_have_count(0)  # nothing scored

        # Back to the scores: Right and Left move within a dimension, Space gives the score.
        rubric = get_rubric("B")
        _tab_until(page, lambda f: f["name"].startswith("Score "), most=6, where="back to the scores")
        _first_dimension_focused(page, "B")
        page.keyboard.press("ArrowRight")
        page.keyboard.press("ArrowRight")
        correct = page.get_by_role("radio", name=f"Score 2, Correct, for {rubric.dimensions[0].name}")
        expect(correct).to_be_focused()
        page.keyboard.press("Space")
        expect(correct).to_have_attribute("aria-checked", "true")
        expect(page.locator(LIVE)).to_contain_text(f"{rubric.dimensions[0].name}: 2, Correct.")
        for dim in rubric.dimensions[1:]:  # the focus moved on: Enter gives its first score
            assert _assert_focus_visible(page, "the next dimension")["name"].endswith(f"for {dim.name}")
            page.keyboard.press("Enter")
        expect(panel(page, second).locator(".mrk-level[aria-checked='true']")).to_have_count(len(rubric.dimensions))
        wait_idle(page)

        # Flag for the lead with a comment: the dialog takes the focus, and gives it back when sent.
        _tab_until(page, lambda f: f["name"].startswith("Flag for lead"), back=True, most=12, where="Flag for lead")
        page.keyboard.press("Enter")
        dialog = page.get_by_role("dialog", name="Flag for lead")
        expect(dialog).to_be_visible()
        expect(dialog.get_by_role("radio").first).to_be_focused()
        _assert_focus_visible(page, "the flag dialog")
        _tab_until(page, lambda f: f["name"] == "Comment for the lead", most=4, where="the flag's comment")
        page.keyboard.type("The response quotes a guideline that does not exist.")
        _tab_until(page, lambda f: f["name"] == "Send to lead", most=3, where="Send to lead")
        page.keyboard.press("Enter")
        expect(dialog).to_have_count(0)
        expect(page.get_by_role("button", name="Unflag")).to_be_focused()
        _assert_focus_visible(page, "after the flag was sent")
        with read_session(engine) as session:
            flag = session.exec(select(TaskFlag).where(TaskFlag.assignment_id == second)).one()
        assert flag.comment == "The response quotes a guideline that does not exist."

        page.keyboard.press("Control+Enter")
        expect(panel(page, second)).to_have_count(0)
        expect(page.locator(".mrk-notice[role='status']")).to_have_text("Submitted. Thank you!")
        wait_idle(page)
        expect(panel(page)).to_have_count(1)
        _first_dimension_focused(page, _rubric_of(engine, int(panel(page).get_attribute("data-aid"))))
        assert stored_scores(engine, second) == {"final_correctness": 2, **dict.fromkeys(rubric.dimension_keys[1:], 0)}
        FOLDER.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(FOLDER / "keyboard-reviewer-next-task.png"))


@pytest.mark.browser
def test_a_lead_adjudicates_with_the_keyboard_alone(server, browser):  # noqa: F811
    """From sign-in to a recorded decision, the focus then on its confirmation."""
    base, engine = server
    with own_page(browser, timeout=30_000) as page:
        _keyboard_sign_in(page, base, "lead01")
        _tab_until(page, lambda f: f["name"].strip().endswith("Adjudication"), where="the navigation")
        page.keyboard.press("Enter")
        expect(page.get_by_role("combobox", name="Task to adjudicate")).to_be_visible()
        _settle(page)
        # The page opens with the focus at the start of its content, not in the sidebar.
        assert _focus(page)["tag"] == "MAIN"
        task_box = page.get_by_role("combobox", name="Task to adjudicate")
        task_id = int(re.search(r"Task (\d+)", task_box.input_value()).group(1))
        view = adjudication.adjudication_view(engine, task_id, actor=SYSTEM)
        assert view.latest is None  # not decided yet

        _tab_until(page, lambda f: f["name"].startswith("Task material"), most=60, where="the task's material")
        region = page.get_by_role("region", name=re.compile("^Task material"))
        expect(region).to_be_focused()
        _read_to_the_end(page, region)

        # Each score still to decide is a radio group: Space checks the focused score; the status
        # keeps its default; the rationale is typed; Enter on Record decision records it.
        for _ in range(40):
            page.keyboard.press("Tab")
            focused = _assert_focus_visible(page, "the decision form")
            if focused["tag"] == "INPUT" and page.evaluate(
                "() => { const e = document.activeElement; return e.type === 'radio' && !e.closest("
                "'[role=radiogroup]').querySelector('input:checked'); }"
            ):
                page.keyboard.press("Space")
                wait_idle(page)
            elif focused["tag"] == "TEXTAREA":
                page.keyboard.type("Both raters missed the retraction notice; decided on the source.")
            elif focused["name"] == "Record decision":
                break
        else:
            raise AssertionError("Record decision not reached with Tab")
        page.keyboard.press("Enter")
        notice = page.locator(".st-key-adj-notice")
        expect(notice).to_contain_text(f"for task {task_id}")
        expect(notice).to_be_focused()
        _assert_focus_visible(page, "the confirmation")
        expect(notice.get_by_role("status")).to_have_count(1)  # a live region: read out as it appears
        assert adjudication.adjudication_view(engine, task_id, actor=SYSTEM).latest is not None
        FOLDER.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(FOLDER / "keyboard-lead-recorded.png"))


@pytest.mark.browser
def test_the_review_page_at_200_percent_zoom_needs_no_sideways_scrolling(server, browser):  # noqa: F811
    """683x384 CSS pixels (1366x768 at 200%): the material in view, Submit reached, nothing wider than the window."""
    base, _engine = server
    wide = (
        "() => [document.scrollingElement, document.querySelector(\"[data-testid='stMain']\")]"
        ".map((el) => el.scrollWidth - el.clientWidth)"
    )
    with own_page(browser, ZOOMED, timeout=30_000, device_scale_factor=2) as page:
        _keyboard_sign_in(page, base, "rev01", path="/review")
        expect(panel(page)).to_have_count(1)
        wait_idle(page)
        page.wait_for_timeout(300)
        assert page.evaluate(wide) == [0, 0]
        material = page.get_by_role("region", name=re.compile("^Task material")).bounding_box()
        assert material["y"] < ZOOMED["height"] - 100 and material["width"] > 250  # readable, on screen
        FOLDER.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(FOLDER / "review-200-percent.png"))
        _tab_until(page, lambda f: f["name"] == "Submit", most=25, where="Submit at 200%")
        submit = page.get_by_role("button", name="Submit").bounding_box()
        assert submit["y"] >= 0 and submit["y"] + submit["height"] <= ZOOMED["height"] + 1
        assert submit["x"] >= 0 and submit["x"] + submit["width"] <= ZOOMED["width"]
        assert page.evaluate(wide) == [0, 0]
        page.screenshot(path=str(FOLDER / "review-200-percent-submit.png"))
