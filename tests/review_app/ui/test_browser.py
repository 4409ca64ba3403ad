"""Main journeys in a real browser: Playwright driving Debian's Chromium against `medrev app` on loopback.

Screenshots of every step go to ``$MEDREV_ARTEFACTS/screenshots`` (default ``artefacts/``).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time

import httpx
import pytest
from sqlalchemy import func
from sqlmodel import select

from review_app.db.engine import dispose_engines, get_engine, read_session
from review_app.db.models import Assignment, ModelResponse, Task
from review_app.services import assignment, studies
from review_app.services.actors import SYSTEM

from .browser_support import (
    A_DIMENSIONS,
    B_DIMENSIONS,
    annotations,
    choose,
    current_task,
    expect,
    free_port,
    radio,
    shot,
    sign_in,
    wait_idle,
)

pytestmark = pytest.mark.browser


@pytest.fixture
def server(demo_template, tmp_path):
    """`medrev app` on a private copy of the demo database; yields (base URL, engine)."""
    db = tmp_path / "demo.db"
    shutil.copyfile(demo_template, db)
    url = f"sqlite:///{db}"
    port = free_port()
    env = os.environ | {"MEDREV_DATABASE_URL": url}
    log = (tmp_path / "server.log").open("w")
    process = subprocess.Popen(
        [sys.executable, "-m", "review_app", "app", "--host", "127.0.0.1", "--port", str(port)],
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        cwd=tmp_path,
    )
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while True:
        try:
            if httpx.get(f"{base}/_stcore/health", timeout=1).text == "ok":
                break
        except httpx.HTTPError:
            pass
        if process.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError(f"the app did not start: {(tmp_path / 'server.log').read_text()[-2000:]}")
        time.sleep(0.3)
    try:
        yield base, get_engine(url)
    finally:
        process.terminate()
        process.wait(timeout=20)
        dispose_engines()


def test_reviewer_journey_mouse_keyboard_and_reload(server, page):
    base, engine = server
    sign_in(page, base, "rev01")
    shot(page, "01-queue")
    page.get_by_role("button", name="Start next task").click()
    expect(page.get_by_text("Rubric A: item validation")).to_be_visible()
    first = current_task(page)
    shot(page, "02-review-rubric-a")
    for dimension in A_DIMENSIONS:
        choose(page, first, dimension, 2)
    page.get_by_role("button", name="Submit").click()
    expect(page.get_by_text("Submitted. Thank you!")).to_be_visible()
    assert annotations(engine, first) == 1

    expect(page.get_by_text("Rubric B: response review")).to_be_visible()
    wait_idle(page)
    second = current_task(page)
    shot(page, "03-review-rubric-b")
    for dimension in B_DIMENSIONS:
        choose(page, second, dimension, 0)
    page.get_by_role("button", name="Submit").click()
    expect(page.get_by_text("Submitted. Thank you!")).to_be_visible()
    assert annotations(engine, second) == 1

    expect(page.get_by_text("Rubric A: item validation")).to_be_visible()
    wait_idle(page)
    third = current_task(page)
    comment = page.get_by_role("textbox", name="Comment (optional)")
    comment.fill("typed 1 and 2 here")  # digits typed in a text box must not score anything
    page.evaluate("document.activeElement.blur()")
    wait_idle(page)
    checked = page.locator(f"[class*='st-key-a{third}-score-'] input[type=radio]:checked")
    expect(checked).to_have_count(0)
    # Each key scores the highlighted dimension and moves on. Streamlit merges a button's triggers that
    # arrive during one rerun, so (like a person) we wait to see each score land before the next key.
    for count, key in enumerate(("2", "2", "1", "2", "2"), start=1):
        page.keyboard.press(key)
        expect(checked).to_have_count(count)
        wait_idle(page)
    shot(page, "04-keyboard-scored")
    page.keyboard.press("Control+Enter")
    expect(page.get_by_text("Submitted. Thank you!")).to_be_visible()
    assert annotations(engine, third) == 1

    expect(page.get_by_text("Rubric B: response review")).to_be_visible()
    wait_idle(page)
    fourth = current_task(page)
    choose(page, fourth, "final_correctness", 2)
    choose(page, fourth, "harm_potential", 1)
    page.reload()  # a new browser session: the session cookie keeps rev01 signed in, the draft is found
    expect(page.get_by_role("button", name="Sign out")).to_be_visible()
    expect(page.get_by_text("Rubric B: response review")).to_be_visible()
    assert current_task(page) == fourth
    expect(radio(page, fourth, "final_correctness").locator("input[value='2']")).to_be_checked()
    expect(radio(page, fourth, "harm_potential").locator("input[value='1']")).to_be_checked()
    expect(page.locator("input[type=radio]:checked")).to_have_count(2)
    shot(page, "05-draft-restored")


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
    with read_session(engine) as session:
        response = session.exec(select(ModelResponse).where(ModelResponse.response_text.contains("<script>"))).one()
    studies.create_study(engine, "inert", rubrics=["B"], actor=SYSTEM)
    studies.draw_pool(
        engine, "inert", 47, quotas=[studies.parse_quota(f"model={response.model}:1")], seed=1, actor=SYSTEM
    )
    assignment.enrol(engine, "inert", ["rev01"], actor=SYSTEM)
    assignment.assign(engine, "inert", raters=1, actor=SYSTEM)
    with read_session(engine) as session:
        aid = session.exec(
            select(Assignment.id).join(Task, Task.id == Assignment.task_id).where(Task.response_id == response.id)
        ).one()
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
