"""Helpers for the real-browser tests: Playwright on Debian's Chromium, waits, screenshots."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
from sqlalchemy import func
from sqlmodel import select

from review_app.db.connect import dispose_engines
from review_app.db.engine import read_session
from review_app.db.models import Annotation, AnnotationScore
from review_app.demo import demo_password
from review_app.rubrics import get_rubric

try:
    from playwright.sync_api import expect

    # Playwright's 5 s default for expect() is shorter than a Streamlit rerun on a loaded 2-core CI
    # machine (a study creation was seen taking longer); a real regression still fails, only later.
    expect.set_options(timeout=20_000)
except ImportError:  # the fixtures report the missing package
    expect = None

CHROMIUM = "/usr/bin/chromium"
ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
ROOT = Path(__file__).resolve().parents[3]
SHOTS = Path(os.environ.get("MEDREV_ARTEFACTS", ROOT / "artefacts")) / "screenshots"
LAPTOP = {"width": 1366, "height": 768}  # a hospital laptop
# Every lead page, by its link in the navigation (the order of ``PAGES`` in review_app/ui/app.py).
LEAD_PAGES = (
    "Progress",
    "Agreement",
    "Flags",
    "Adjudication",
    "Analysis",
    "Export",
    "Study set-up",
    "Import",
    "Reviewers",
    "Plan",
    "Reviewers' quality",
)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_healthy(base: str, process: subprocess.Popen, log: Path, timeout: float = 60) -> None:
    """Poll Streamlit's health check at ``base`` until it answers: a page loaded earlier would get a
    connection error. A process that exits or stays down for ``timeout`` seconds is killed and its log's
    tail raised, so a server that cannot start fails with its own message."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            if httpx.get(f"{base}/_stcore/health", timeout=1).text == "ok":
                return
        except httpx.HTTPError:
            pass
        if process.poll() is not None or time.monotonic() > deadline:
            process.kill()
            raise RuntimeError(f"the app did not start: {log.read_text()[-2000:]}")
        time.sleep(0.3)


def start_app(
    url: str,
    tmp_path: Path,
    command: list[str] | None = None,
    *,
    port: int | None = None,
    env: dict | None = None,
    path: str = "",
) -> tuple[subprocess.Popen, str]:
    """``medrev <command>`` (default: ``app`` on 127.0.0.1) on ``url`` as a real process, once healthy on ``port``.

    Returns the process and its base URL (``path`` is the base URL path the server is configured with);
    its output goes to ``tmp_path/app-<port>.log``. The caller terminates the process.
    """
    port = port or free_port()
    log = tmp_path / f"app-{port}.log"
    command = command or ["app", "--host", "127.0.0.1", "--port", str(port)]
    process = subprocess.Popen(
        [sys.executable, "-m", "review_app", *command],
        env=os.environ | {"MEDREV_DATABASE_URL": url} | (env or {}),
        stdout=log.open("w"),
        stderr=subprocess.STDOUT,
        cwd=tmp_path,
    )
    base = f"http://127.0.0.1:{port}{path}"
    wait_healthy(base, process, log)
    return process, base


@contextmanager
def demo_app(
    demo_template: Path, tmp_path: Path, prepare: Callable[[str], None] | None = None
) -> Iterator[tuple[str, str]]:
    """`medrev app` on a private copy of the demo database, which ``prepare(url)`` may change first.

    Yields (base URL, database URL); the app is stopped and this process's engines disposed afterwards,
    so every test starts from the seeded demo and leaves no connection behind.
    """
    db = tmp_path / "demo.db"
    shutil.copyfile(demo_template, db)
    url = f"sqlite:///{db}"
    if prepare is not None:
        prepare(url)
    process, base = start_app(url, tmp_path)
    try:
        yield base, url
    finally:
        process.terminate()
        process.wait(timeout=20)
        dispose_engines()


def open_page(browser, viewport: dict[str, int] = LAPTOP, *, timeout: int = 20_000, **options):
    """A page in a browser context of its own, as a new browser session (``page.context.close()`` ends it).

    ``options`` go to ``browser.new_context`` (e.g. ``accept_downloads``, ``device_scale_factor``).
    """
    page = browser.new_context(viewport=viewport, **options).new_page()
    page.set_default_timeout(timeout)
    return page


@contextmanager
def own_page(browser, viewport: dict[str, int] = LAPTOP, *, timeout: int = 20_000, **options) -> Iterator:
    """:func:`open_page` for the length of a ``with`` block: its context is closed also when the block fails."""
    page = open_page(browser, viewport, timeout=timeout, **options)
    try:
        yield page
    finally:
        page.context.close()


def shot(page, name: str) -> None:
    """Screenshot into the artefacts folder once Streamlit has finished rendering."""
    wait_idle(page)
    page.wait_for_timeout(300)
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SHOTS / f"{name}.png"))


def sign_in(page, base: str, username: str, path: str = "/") -> None:
    page.goto(base + path)
    page.get_by_role("textbox", name="Username").fill(username)
    page.get_by_role("textbox", name="Password").fill(demo_password(username))
    page.get_by_role("button", name="Sign in").click()
    expect(page.get_by_role("button", name="Sign out")).to_be_visible()


def wait_idle(page) -> None:
    """Wait until Streamlit has finished the rerun the last interaction started."""
    page.wait_for_timeout(100)
    expect(page.locator("[data-testid='stApp'][data-test-script-state='notRunning']")).to_have_count(1)


def panel(page, aid: int | None = None):
    """The score panel (of one task, when ``aid`` is given)."""
    return page.locator(".mrk" if aid is None else f".mrk[data-aid='{aid}']")


def dimension(page, aid: int, key: str):
    """One dimension of the score panel: its choices are radios (role=radio, aria-checked)."""
    return panel(page, aid).locator(f".mrk-dim[data-dim='{key}']")


def choose(page, aid: int, key: str, value: int) -> None:
    """Click a score with the mouse; wait for the rerun that saves it."""
    group = dimension(page, aid, key)
    group.locator(f".mrk-level[data-value='{value}']").click()
    expect(group.locator(f".mrk-level[data-value='{value}']")).to_have_attribute("aria-checked", "true")
    wait_idle(page)


def shown_task(page) -> int:
    """The assignment the score panel shows."""
    return int(panel(page).get_attribute("data-aid"))


def current_task(page) -> int:
    return int(page.url.split("task=")[1].split("&")[0])


def start_next_task(page) -> int:
    """From the queue, open the next task (rubric A in the demo) and return it once its score panel is drawn.

    The page's script can be idle before the panel's component module has loaded and drawn, so the panel
    itself is waited for: a key pressed before that would reach no panel.
    """
    page.get_by_role("button", name="Start next task").click()
    expect(page.get_by_text("Rubric A: item validation")).to_be_visible()
    wait_idle(page)
    aid = current_task(page)
    expect(panel(page, aid)).to_have_count(1)
    return aid


def stored_scores(engine, aid: int) -> dict[str, int]:
    """The scores of the latest revision stored for an assignment, read back from the database."""
    with read_session(engine) as session:
        latest = session.exec(select(func.max(Annotation.revision)).where(Annotation.assignment_id == aid)).one()
        rows = session.exec(
            select(AnnotationScore.dimension, AnnotationScore.value)
            .join(Annotation, Annotation.id == AnnotationScore.annotation_id)
            .where(Annotation.assignment_id == aid, Annotation.revision == latest)
        ).all()
    return dict(rows)


def annotations(engine, aid: int) -> int:
    with read_session(engine) as session:
        return session.exec(select(func.count()).select_from(Annotation).where(Annotation.assignment_id == aid)).one()


A_DIMENSIONS = get_rubric("A").dimension_keys
B_DIMENSIONS = get_rubric("B").dimension_keys
