"""Every lead page at 1366x768 in a real browser: a screenshot of each, and no table cut at the right edge.

Real browser (Playwright on Debian's Chromium) against `medrev app` on loopback, signed in as a lead,
for the Rubric A/B demo study and the judge-audit demo study (a rated gold task and a reviewer's flag
added first, so the Reviewers' quality page has its gold columns and the Flags page its table). Each
page is shot at the laptop's viewport and whole (the viewport made as tall as the page, the width
kept at 1366) into ``$MEDREV_ARTEFACTS/screenshots/lead_pages/``.

Then every table is measured, those in expanders too (each expander opened, and the page shot whole
again as ``<page>-<study>-expanders-open-full.png``): a table's grid must
not scroll sideways (its scroller's ``scrollWidth`` at most its ``clientWidth``) and must end
inside the page's main column. Pages whose tables go through ``review_app.ui.components.tables``
are held to it; the others' measurements are written next to the screenshots
(``lead_pages/widths.json``) for their owners.
"""

from __future__ import annotations

import json

import pytest

from review_app.demo import DEMO_JUDGE_STUDY, DEMO_STUDY

from .browser_support import SHOTS, expect, sign_in, wait_idle
from .table_support import prepare_lead_pages
from .test_browser import server  # noqa: F401  (the `medrev app` fixture)

pytestmark = pytest.mark.browser
LAPTOP = {"width": 1366, "height": 768}
FOLDER = SHOTS / "lead_pages"
# (link in the navigation, file stem, held to the no-cut rule)
PAGES = (
    ("Progress", "progress", True),
    ("Flags", "flags", True),
    ("Reviewers", "reviewers", True),
    ("Reviewers' quality", "quality", True),
    ("Agreement", "agreement", True),
    ("Analysis", "analysis", False),
    ("Plan", "plan", False),
    ("Study set-up", "setup", False),
    ("Adjudication", "adjudication", False),
    ("Export", "export", False),
    ("Import", "import", False),
)
STUDIES = {"review": DEMO_STUDY, "judge": DEMO_JUDGE_STUDY}
STILL_COMPUTING = ("Computing severity", "Checking reviewer quality", "Computing the study")
MEASURE = """
() => {
  const main = document.querySelector("[data-testid='stMainBlockContainer']").getBoundingClientRect();
  const out = [];
  for (const grid of document.querySelectorAll("[data-testid='stDataFrame'], [data-testid='stTable']")) {
    const box = grid.getBoundingClientRect();
    if (box.width === 0) continue;  // in a closed expander
    const scroller = grid.querySelector(".dvn-scroller") || grid.querySelector("table")?.parentElement || grid;
    const heading = [...grid.querySelectorAll("[role='columnheader'], th")].map(h => h.innerText.trim());
    out.push({
      headers: heading.filter(Boolean).slice(0, 12),
      scrollWidth: scroller.scrollWidth,
      clientWidth: scroller.clientWidth,
      right: Math.round(box.right),
      mainRight: Math.round(main.right),
    });
  }
  return out;
}
"""


def _settle(page) -> None:
    """Wait for the rerun, then for anything the page computes in the background (severity, alerts)."""
    wait_idle(page)
    for text in STILL_COMPUTING:
        expect(page.get_by_text(text)).to_have_count(0, timeout=180_000)
    wait_idle(page)
    page.wait_for_timeout(500)  # plotly and the grids draw after the script run ends


def _pick_study(page, study: str) -> None:
    box = page.get_by_role("combobox", name="Study", exact=True)
    if not box.count():
        return  # a page without the selector (Import)
    chosen = page.locator("[data-testid='stSelectbox']").filter(has=box)
    if chosen.get_by_text(study, exact=True).count():
        return
    box.click()
    page.get_by_role("option", name=study, exact=True).click()
    _settle(page)


def _screenshots(page, name: str, *, whole_only: bool = False) -> None:
    FOLDER.mkdir(parents=True, exist_ok=True)
    if not whole_only:
        page.screenshot(path=str(FOLDER / f"{name}.png"))
    height = page.evaluate(
        "() => Math.max(...[...document.querySelectorAll(\"[data-testid='stMain'], [data-testid='stAppViewContainer']"
        ", section.main\")].map(e => e.scrollHeight), document.body.scrollHeight)"
    )
    page.set_viewport_size({"width": LAPTOP["width"], "height": min(max(height + 40, LAPTOP["height"]), 12_000)})
    page.wait_for_timeout(700)
    page.screenshot(path=str(FOLDER / f"{name}-full.png"))
    page.set_viewport_size(LAPTOP)
    page.wait_for_timeout(300)


def _open_expanders(page) -> None:
    closed = page.locator("[data-testid='stExpander'] details:not([open]) > summary")
    for _ in range(closed.count()):
        closed.first.click()
    page.wait_for_timeout(600)


def test_every_lead_page_at_1366x768_shot_and_no_table_cut_at_the_right(server, browser):  # noqa: F811
    base, engine = server
    prepare_lead_pages(engine, STUDIES)
    context = browser.new_context(viewport=LAPTOP)
    page = context.new_page()
    page.set_default_timeout(60_000)
    widths: dict[str, list[dict]] = {}
    cut: list[str] = []
    try:
        sign_in(page, base, "lead01")
        for study_key, study in STUDIES.items():
            for link, stem, held in PAGES:
                page.get_by_role("link", name=link, exact=True).click()
                _settle(page)
                _pick_study(page, study)
                _settle(page)
                name = f"{stem}-{study_key}"
                _screenshots(page, name)
                _open_expanders(page)
                if held:
                    _screenshots(page, f"{name}-expanders-open", whole_only=True)
                measured = page.evaluate(MEASURE)
                widths[name] = measured
                for table in measured:
                    wide = table["scrollWidth"] > table["clientWidth"] + 1 or table["right"] > table["mainRight"] + 1
                    if wide and held:
                        cut.append(f"{name}: {table}")
    finally:
        FOLDER.mkdir(parents=True, exist_ok=True)
        (FOLDER / "widths.json").write_text(json.dumps(widths, indent=1) + "\n", encoding="utf-8")
        context.close()
    assert widths["quality-review"], "the Reviewers' quality page showed no table"
    assert not cut, "tables cut at the right edge at 1366 px:\n" + "\n".join(cut)
