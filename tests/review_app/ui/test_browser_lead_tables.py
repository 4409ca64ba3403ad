"""The lead's Analysis, Agreement and Quality pages in a real browser at 1366x768, with screenshots.

Real browser (Playwright on Debian's Chromium) against `medrev app` on loopback. The screenshots go to
``$MEDREV_ARTEFACTS/screenshots`` (30-33); ``docs/agreement-page.png`` in the README is
``31-agreement.png`` from this test, and ``docs/review-page.png`` is ``09-layout-1366x768-rubric-b.png``
from ``test_browser.py::test_review_page_fits_a_1366x768_laptop``.
"""

from __future__ import annotations

import csv
import io
import re
from pathlib import Path

import pytest

from review_app.demo import DEMO_JUDGE_STUDY, DEMO_STUDY

from .browser_support import expect, shot, sign_in
from .test_browser import server  # noqa: F401  (the app-server fixture)

pytestmark = pytest.mark.browser


def _settled(page) -> None:
    """Like ``wait_idle``, with time for a first analysis (bootstrap and harm model) on a busy machine."""
    page.wait_for_timeout(100)
    expect(page.locator("[data-testid='stApp'][data-test-script-state='notRunning']")).to_have_count(1, timeout=120_000)


def _pick(page, label: str, option: str) -> None:
    page.get_by_role("combobox", name=label).click()
    page.get_by_role("option", name=option, exact=True).click()
    _settled(page)


def _open(page, link: str) -> None:
    page.get_by_role("link", name=link, exact=True).click()
    _settled(page)


def test_lead_reads_analysis_agreement_and_quality_at_1366x768(server, browser):  # noqa: F811
    base, _engine = server
    context = browser.new_context(viewport={"width": 1366, "height": 768}, accept_downloads=True)
    page = context.new_page()
    page.set_default_timeout(60_000)
    try:
        sign_in(page, base, "lead01")
        _open(page, "Analysis")
        _pick(page, "Study", DEMO_STUDY)
        page.get_by_text("Include pending tasks, with the ratings they have so far").click()  # the demo's harm model
        _settled(page)
        expect(page.get_by_text("Rubric A: item validation").first).to_be_visible()
        expect(page.get_by_text("Adjusted odds ratio (log scale)").first).to_be_attached()  # a figure's axis title
        shot(page, "30-analysis")
        harm = page.get_by_text("Adjusted odds ratios of a worst-case outcome", exact=True)
        harm.scroll_into_view_if_needed()
        expect(page.get_by_text("the fit converged").first).to_be_attached()
        shot(page, "30-analysis-harm-model")
        # A table's CSV download is the export's file: codebook columns, every term.
        buttons = page.get_by_role("button", name=re.compile(r"CSV$"))
        assert buttons.count() >= 4
        with page.expect_download() as download:
            page.locator("[class*='st-key-csv'][class*='harm_model']").get_by_role("button").click()
        assert download.value.suggested_filename.endswith("_harm_model.csv")
        rows = list(csv.DictReader(io.StringIO(Path(download.value.path()).read_text(encoding="utf-8"))))
        assert {"term", "odds_ratio", "or_ci_low", "p_value"} <= set(rows[0]) and rows[0]["term"] == "Intercept"

        _open(page, "Agreement")
        expect(page.get_by_text("Agreement, Rubric A: item validation").first).to_be_visible()
        expect(page.get_by_text("Krippendorff's α (ordinal)").first).to_be_attached()
        shot(page, "31-agreement")

        _open(page, "Reviewers' quality")
        expect(page.locator("[data-testid='stDataFrame']").first).to_be_visible()
        shot(page, "32-quality")

        _open(page, "Analysis")
        _pick(page, "Study", DEMO_JUDGE_STUDY)
        expect(page.get_by_text("Judge audit: the automatic judge against clinicians")).to_be_visible()
        expect(page.get_by_text("Confidence in the verdict").first).to_be_attached()
        expect(page.get_by_text("Automatic judge vs clinicians").first).to_be_visible()
        shot(page, "33-analysis-judge-audit")
    finally:
        context.close()
