"""The study lead's day in a real browser, at 1366x768 like a hospital laptop.

A reviewer flags a task and scores it; a second reviewer scores the same task, differing on one
dimension; the lead sees the flag on the Flags page and resolves it, adjudicates only the
disagreeing dimension (the others are pre-filled as agreed), reads Progress without cut numbers,
and downloads the export of the study selected, then of the other study. Screenshots of the Flags,
Adjudication, Progress and Export pages go to ``$MEDREV_ARTEFACTS/screenshots``.
"""

from __future__ import annotations

import json
import zipfile

import pytest
from sqlmodel import select

from review_app.db.engine import read_session
from review_app.db.models import Adjudication, Assignment, AuditEvent, TaskFlag
from review_app.demo import DEMO_JUDGE_STUDY, DEMO_STUDY
from review_app.rubrics import get_rubric

from .browser_support import (
    A_DIMENSIONS,
    expect,
    open_page,
    panel,
    shot,
    shown_task,
    sign_in,
    stored_scores,
    wait_idle,
)
from .test_browser import server  # noqa: F401  (the `medrev app` fixture)

pytestmark = pytest.mark.browser


def _pick(page, label: str, option: str) -> None:
    wait_idle(page)
    box = page.get_by_role("combobox", name=label)
    expect(box).to_be_visible()
    selected = page.locator("[data-testid='stSelectbox']").filter(has=box)
    if selected.get_by_text(option, exact=True).count():
        return  # already the selected study (the lead pages remember it)
    box.click()
    page.get_by_role("option", name=option, exact=True).click()
    wait_idle(page)


def _on_first_task(browser, base: str, username: str) -> tuple:
    """``username`` signed in, in a browser session of their own, on the first task of their queue
    (Rubric A in the demo): (page, assignment id)."""
    page = open_page(browser)
    sign_in(page, base, username, "/review")
    expect(page.get_by_text("Rubric A: item validation")).to_be_visible()
    wait_idle(page)
    return page, shown_task(page)


def _score_by_keys(page, aid: int, keys: str) -> None:
    """Type the scores as number keys (one per dimension, in order), then Ctrl+Enter."""
    for key in keys:
        page.keyboard.press(key)
    expect(panel(page, aid).locator(".mrk-level[aria-checked='true']")).to_have_count(len(keys))
    wait_idle(page)
    page.keyboard.press("Control+Enter")
    expect(page.get_by_text("Submitted. Thank you!")).to_be_visible()
    expect(panel(page, aid)).to_have_count(0)
    wait_idle(page)


def _task_of(engine, aid: int) -> int:
    with read_session(engine) as session:
        return session.get(Assignment, aid).task_id


def _manifest(download) -> dict:
    with zipfile.ZipFile(download.path()) as zipped:
        return json.loads(zipped.read(next(n for n in zipped.namelist() if n.endswith("manifest.json"))))


def _not_cut(page) -> None:
    """Every metric value and label fits its box (Streamlit cuts long ones with an ellipsis)."""
    values = page.locator("[data-testid='stMetricValue'], [data-testid='stMetricLabel'] p")
    expect(values.first).to_be_visible()
    overflowing = values.evaluate_all(
        "els => els.filter(e => { const t = e.querySelector('div') || e;"
        " return t.scrollWidth > t.clientWidth + 1 || e.scrollWidth > e.clientWidth + 1; })"
        ".map(e => e.innerText)"
    )
    assert overflowing == []


def test_flag_disagree_adjudicate_and_export_the_right_study(server, browser):  # noqa: F811
    base, engine = server
    rubric = get_rubric("A")
    last = rubric.dimensions[-1]

    # 1. rev01 flags the first task (shared with rev02), then scores it 2 on every dimension.
    first, aid1 = _on_first_task(browser, base, "rev01")
    first.get_by_role("button", name="Flag for lead").click()
    first.get_by_text("the item", exact=True).click()
    first.get_by_role("textbox", name="Comment for the lead").fill("Option C is also defensible.")
    first.get_by_role("button", name="Send to lead").click()
    expect(first.get_by_text("Flag sent to the study lead.")).to_be_visible()
    expect(first.get_by_role("button", name="Unflag")).to_be_visible()
    wait_idle(first)
    first.keyboard.press("Escape")
    first.evaluate("document.activeElement && document.activeElement.blur()")  # keys go to the score panel
    wait_idle(first)
    _score_by_keys(first, aid1, "2" * len(rubric.dimensions))
    assert stored_scores(engine, aid1) == dict.fromkeys(A_DIMENSIONS, 2)
    first.context.close()

    # 2. rev02 opens the same task first in their queue and differs on the last dimension only.
    second, aid2 = _on_first_task(browser, base, "rev02")
    task = _task_of(engine, aid1)
    assert _task_of(engine, aid2) == task

    _score_by_keys(second, aid2, "2" * (len(rubric.dimensions) - 1) + "0")
    assert stored_scores(engine, aid2) == dict.fromkeys(A_DIMENSIONS, 2) | {last.key: 0}
    second.context.close()

    # 3. The lead sees the flag and resolves it.
    lead = open_page(browser, timeout=30_000, accept_downloads=True)
    sign_in(lead, base, "lead01")
    lead.get_by_role("link", name="Flags").click()
    _pick(lead, "Study", DEMO_STUDY)
    expect(lead.get_by_text("Option C is also defensible.").first).to_be_visible()
    expect(lead.get_by_text("Problem with the item").first).to_be_visible()
    with read_session(engine) as session:
        flag = session.exec(select(TaskFlag).where(TaskFlag.assignment_id == aid1)).one()
    assert (flag.task_id, flag.kind, flag.status) == (task, "item", "open")
    lead.get_by_role("textbox", name="Reply to the reviewer").fill("Checked: the key stands.")
    shot(lead, "50-lead-flags")
    lead.get_by_role("button", name="Resolve").click()
    expect(lead.get_by_text(f"Flag {flag.id} resolved.")).to_be_visible()
    with read_session(engine) as session:
        assert session.get(TaskFlag, flag.id).status == "resolved"
        assert session.exec(select(AuditEvent).where(AuditEvent.action == "flag.resolve")).one().actor_id

    # 4. The lead adjudicates only the disagreeing dimension.
    lead.get_by_role("link", name="Adjudication").click()
    _pick(lead, "Study", DEMO_STUDY)
    lead.get_by_text(rubric.name, exact=True).click()
    wait_idle(lead)
    option = lead.get_by_role("combobox", name="Task to adjudicate")
    option.click()
    lead.get_by_role("option", name=f"Task {task} ·").first.click()
    wait_idle(lead)
    expect(lead.get_by_text(f"{len(rubric.dimensions) - 1} dimensions agreed by the raters")).to_be_visible()
    form = lead.locator(f".st-key-adj-form-{task}")
    expect(form.locator("[data-testid='stRadio']")).to_have_count(2)  # the disputed dimension and the status
    agreed_rows = form.locator(f"[class*='st-key-adj-agreed-{task}-']")
    expect(agreed_rows).to_have_count(len(rubric.dimensions) - 1)
    for row in agreed_rows.all():
        expect(row).to_contain_text("agreed")
        expect(row.get_by_text("Override")).to_be_visible()
    form.locator("[data-testid='stRadio']").first.get_by_text(f"0 · {last.level(0).label}").click()
    wait_idle(lead)
    shot(lead, "51-lead-adjudication")
    form.get_by_role("button", name="Record decision").click()
    expect(lead.get_by_text(f"Recorded version 1 (adjudicated) for task {task}.")).to_be_visible()
    with read_session(engine) as session:
        decision = session.exec(select(Adjudication).where(Adjudication.task_id == task)).one()
    assert decision.final_scores == dict.fromkeys(A_DIMENSIONS, 2) | {last.key: 0}

    # 5. Progress reads at a glance: no metric cut, open flags counted.
    lead.get_by_role("link", name="Progress").click()
    _pick(lead, "Study", DEMO_STUDY)
    expect(lead.get_by_text("Open flags")).to_be_visible()
    expect(lead.get_by_text("Median time on task (min)").first).to_be_attached()
    _not_cut(lead)
    shot(lead, "52-lead-progress")

    # 6. The export follows the selected study.
    lead.get_by_role("link", name="Export").click()
    _pick(lead, "Study", DEMO_STUDY)
    expect(lead.get_by_text("still pending")).to_be_visible()
    lead.get_by_role("button", name="Build export").click()
    download_button = lead.get_by_role("button", name="Download the export (.zip)")
    expect(download_button).to_be_visible(timeout=120_000)
    shot(lead, "53-lead-export")
    with lead.expect_download() as caught:
        download_button.click()
    manifest = _manifest(caught.value)
    assert manifest["study"]["name"] == DEMO_STUDY and manifest["counts"]["adjudicated_tasks"] >= 1
    assert manifest["pending"]["tasks"] > 0 and manifest["pending"]["excluded"] is True  # left out by default

    _pick(lead, "Study", DEMO_JUDGE_STUDY)
    expect(download_button).to_have_count(0)  # the other study's zip is not offered
    lead.get_by_role("button", name="Build export").click()
    expect(download_button).to_be_visible(timeout=120_000)
    with lead.expect_download() as caught:
        download_button.click()
    assert "judge-audit" in caught.value.suggested_filename
    manifest = _manifest(caught.value)
    assert manifest["study"]["name"] == DEMO_JUDGE_STUDY and manifest["study"]["rubrics"] == ["judge"]
    lead.context.close()
