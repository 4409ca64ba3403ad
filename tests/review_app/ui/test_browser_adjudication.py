"""The adjudication page in a real browser at 1366x768: what the lead sees after *Record decision*.

The decision form is below the material, so the lead clicks *Record decision* scrolled down the
page. A recorded decision must be confirmed where the lead can see it, naming the task decided and
the task the form moved on to; a refused one must be shown once, with *Record decision* still in
view. The queue above the form must fit too: its reason column is not cut, for Rubric A, Rubric B
and the judge audit. Screenshots go to ``$MEDREV_ARTEFACTS/screenshots``.
"""

from __future__ import annotations

import contextlib
import re

import pytest
from sqlmodel import select

from review_app.db.engine import read_session
from review_app.db.models import Adjudication
from review_app.demo import DEMO_JUDGE_STUDY, DEMO_STUDY
from review_app.rubrics import get_rubric
from review_app.services import adjudication, rating_comparison
from review_app.services.actors import SYSTEM

from .browser_support import expect, shot, sign_in, wait_idle
from .test_browser import server  # noqa: F401  (the `medrev app` fixture)

pytestmark = pytest.mark.browser
LAPTOP = {"width": 1366, "height": 768}
RUBRIC = get_rubric("B")
WHY = "Why it needs a decision"
# The grid draws its cells on a canvas: record each text it draws, where, how wide, and on which canvas.
RECORD_DRAWN_TEXT = """
window.__drawn = [];
const canvases = [];
const fillText = CanvasRenderingContext2D.prototype.fillText;
CanvasRenderingContext2D.prototype.fillText = function (text, x, y, ...rest) {
  const m = this.getTransform(), ratio = window.devicePixelRatio || 1;
  if (!canvases.includes(this.canvas)) canvases.push(this.canvas);
  window.__drawn.push({text: String(text), x: (m.a * x + m.e) / ratio, y: (m.d * y + m.f) / ratio,
                       width: this.measureText(String(text)).width * m.a / ratio,
                       canvas: canvases.indexOf(this.canvas)});
  return fillText.call(this, text, x, y, ...rest);
};
window.__canvasesIn = (element) => canvases.flatMap((c, i) => (element.contains(c) ? [i] : []));
"""
# The queue grid: the last drawing of each header and cell on its canvases, and whether it scrolls sideways.
QUEUE_DRAWN = """
() => {
  const grid = document.querySelector("[data-testid='stDataFrame']");
  const scroller = grid.querySelector(".dvn-scroller");
  const inGrid = window.__canvasesIn(grid);  // the header's canvas and the cells'.
  const latest = new Map();
  for (const d of window.__drawn) {
    if (inGrid.includes(d.canvas)) latest.set(`${Math.round(d.x)},${Math.round(d.y)}`, d);
  }
  return {cells: [...latest.values()], scrollWidth: scroller.scrollWidth, clientWidth: scroller.clientWidth,
          right: grid.getBoundingClientRect().right,
          mainRight: document.querySelector("[data-testid='stMainBlockContainer']").getBoundingClientRect().right};
}
"""
PADDING = 8  # the grid's space between a cell's text and the column's edges


def _open_adjudication(browser, base: str, study: str = DEMO_STUDY, rubric=RUBRIC, *, init_script: str = ""):
    """lead01 on the Adjudication page of ``study`` and ``rubric`` (the demo study's Rubric B), at the top task."""
    context = browser.new_context(viewport=LAPTOP)
    if init_script:
        context.add_init_script(init_script)
    page = context.new_page()
    page.set_default_timeout(30_000)
    sign_in(page, base, "lead01")
    page.get_by_role("link", name="Adjudication").click()
    wait_idle(page)
    _pick_study(page, study)
    _pick_rubric(page, rubric)
    return page


def _pick_study(page, study: str) -> None:
    box = page.get_by_role("combobox", name="Study")
    selected = page.locator("[data-testid='stSelectbox']").filter(has=box)
    if not selected.get_by_text(study, exact=True).count():
        box.click()
        page.get_by_role("option", name=study, exact=True).click()
        wait_idle(page)


def _pick_rubric(page, rubric) -> None:
    choice = page.get_by_text(rubric.name, exact=True)
    if choice.count():  # a study with one rubric has no choice to make
        choice.click()
        wait_idle(page)


def _top_task(engine) -> adjudication.AdjudicationView:
    head = adjudication.disagreement_queue_head(engine, DEMO_STUDY, RUBRIC.key, open_only=True, limit=5)
    return adjudication.adjudication_view(engine, head.entries[0].task_id, actor=SYSTEM)


def _choose(form, dimension, value: int) -> None:
    group = form.locator("[data-testid='stRadio']").filter(has_text=dimension.reported_name)
    group.get_by_text(f"{value} · {dimension.level(value).label}", exact=True).click()


def _in_viewport(page, locator) -> dict:
    """The element's box once the page has settled (scrolling included); asserts it is in the window."""
    expect(locator).to_be_visible()
    wait_idle(page)
    with contextlib.suppress(Exception):  # re-drawn meanwhile: measured below all the same
        locator.evaluate(  # the page scrolls after drawing: wait for it (3 s at most) before measuring
            "el => new Promise(done => { const t0 = performance.now(); const check = () => {"
            " const r = el.getBoundingClientRect();"
            " if ((r.top >= 0 && r.bottom <= innerHeight) || performance.now() - t0 > 3000) done();"
            " else requestAnimationFrame(check); }; check(); })"
        )
    box = locator.bounding_box()
    assert box is not None
    assert box["y"] >= 0 and box["y"] + box["height"] <= LAPTOP["height"], box
    return box


def test_the_confirmation_of_a_recorded_decision_is_in_view_and_names_the_next_task(server, browser):  # noqa: F811
    base, engine = server
    view = _top_task(engine)
    task = view.task_id
    agreed = rating_comparison.agreed_dimensions(RUBRIC, view.ratings)
    page = _open_adjudication(browser, base)
    expect(page.get_by_role("combobox", name="Task to adjudicate")).to_be_visible()
    form = page.locator(f".st-key-adj-form-{task}")
    for dimension in RUBRIC.dimensions:
        if dimension.key not in agreed:  # side with the first rater: no rationale needed
            _choose(form, dimension, view.ratings[0].scores[dimension.key])
            wait_idle(page)
    button = form.get_by_role("button", name="Record decision")
    button.scroll_into_view_if_needed()
    assert page.evaluate("document.querySelector(\"[data-testid='stMain']\").scrollTop") > 0  # scrolled down
    button.click()

    confirmation = page.get_by_text(f"Recorded version 1 (adjudicated) for task {task}.")
    _in_viewport(page, confirmation)
    with read_session(engine) as session:
        assert session.exec(select(Adjudication).where(Adjudication.task_id == task)).one().status == "adjudicated"
    following = _top_task(engine).task_id
    assert following != task
    expect(confirmation).to_contain_text(f"Next: task {following}")
    picker = page.get_by_role("combobox", name="Task to adjudicate")
    expect(picker).to_have_value(re.compile(rf"^Task {following} ·"))
    _in_viewport(page, picker)
    shot(page, "54-lead-adjudication-recorded")
    page.context.close()


def test_a_refused_decision_is_shown_once_with_record_decision_in_view(server, browser):  # noqa: F811
    base, engine = server
    view = _top_task(engine)
    task = view.task_id
    agreed = rating_comparison.agreed_dimensions(RUBRIC, view.ratings)
    assert agreed, "the top Rubric B task of the demo has agreed dimensions"
    page = _open_adjudication(browser, base)
    form = page.locator(f".st-key-adj-form-{task}")
    expect(form).to_be_visible()
    for dimension in RUBRIC.dimensions:
        if dimension.key not in agreed:
            _choose(form, dimension, view.ratings[0].scores[dimension.key])
            wait_idle(page)
    key, value = next(iter(agreed.items()))
    dimension = RUBRIC.dimension(key)
    form.locator(f".st-key-adj-agreed-{task}-{key}").get_by_text("Override").click()
    wait_idle(page)
    _choose(form, dimension, next(v for v in dimension.values if v != value))  # overrides both raters
    wait_idle(page)
    form.get_by_role("button", name="Record decision").click()

    refusal = page.get_by_text("a rationale is required when the final score overrides every rater")
    expect(refusal.first).to_be_visible()
    wait_idle(page)
    assert refusal.count() == 1
    assert page.locator("[data-testid='stAlertContentError']").count() == 1
    _in_viewport(page, refusal)
    _in_viewport(page, form.get_by_role("button", name="Record decision"))
    shot(page, "55-lead-adjudication-refused")
    with read_session(engine) as session:
        assert session.exec(select(Adjudication).where(Adjudication.task_id == task)).first() is None
    page.context.close()


def _reason_column(page) -> tuple[list[dict], float, dict]:
    """The reason cells the queue grid drew last, the right edge of their column (the next column's left)
    and the grid's measurements (:data:`QUEUE_DRAWN`)."""
    # Drawn afresh at 1366 px: a narrower window and back makes the grid draw every visible cell again,
    # so nothing drawn for an earlier study or rubric is measured.
    page.set_viewport_size({**LAPTOP, "width": LAPTOP["width"] - 40})
    page.wait_for_timeout(500)
    page.evaluate("window.__drawn = []")
    page.set_viewport_size(LAPTOP)
    page.wait_for_timeout(700)
    drawn = page.evaluate(QUEUE_DRAWN)
    headers = sorted((d for d in drawn["cells"] if d["y"] < 30), key=lambda d: d["x"])
    names = [d["text"] for d in headers]
    assert WHY in names and names.index(WHY) + 1 < len(names), names
    why = headers[names.index(WHY)]
    right = headers[names.index(WHY) + 1]["x"] - PADDING
    cells = [d for d in drawn["cells"] if d["y"] > why["y"] + 10 and abs(d["x"] - why["x"]) < 3]
    return cells, right, drawn


@pytest.mark.parametrize(
    ("study", "rubric"),
    [(DEMO_STUDY, get_rubric("A")), (DEMO_STUDY, RUBRIC), (DEMO_JUDGE_STUDY, get_rubric("judge"))],
    ids=["rubric-A", "rubric-B", "judge-audit"],
)
def test_the_queue_s_reason_column_is_not_cut_at_1366(server, browser, study, rubric):  # noqa: F811
    base, engine = server
    page = _open_adjudication(browser, base, study, rubric, init_script=RECORD_DRAWN_TEXT)
    expect(page.get_by_role("combobox", name="Task to adjudicate")).to_be_visible()
    cells, right, grid = _reason_column(page)
    assert cells, "no reason drawn in the queue"
    for cell in cells:
        assert cell["x"] + cell["width"] <= right, f"cut at {right:.0f} px: {cell}"
    assert grid["scrollWidth"] <= grid["clientWidth"] + 1, f"the queue scrolls sideways: {grid['scrollWidth']} px"
    assert grid["right"] <= grid["mainRight"] + 1
    head = adjudication.disagreement_queue_head(engine, study, rubric.key, open_only=True, limit=20)
    assert {c["text"] for c in cells} <= {e.summary for e in head.entries}  # each drawn whole, not shortened
    shot(page, f"56-lead-adjudication-queue-{rubric.key}")
    # The reasons in full, each rater's score with its label, wrap in the expander under the queue.
    page.get_by_text("Why each task needs a decision, in full").click()
    full = page.locator("[data-testid='stExpander'] [data-testid='stTable']")
    expect(full).to_be_visible()
    wide = full.evaluate(
        "t => { const s = t.querySelector('table').parentElement; return s.scrollWidth - s.clientWidth; }"
    )
    assert wide <= 1, f"the full reasons scroll sideways by {wide} px"
    for entry in head.entries:
        for reason in entry.comparison.reasons:
            expect(full.get_by_text(reason, exact=False).first).to_be_visible()
    page.context.close()
