"""Fixtures for the app tests: a seeded demo database per test, AppTest sessions signed in."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from review_app.db.connect import dispose_engines, get_engine
from review_app.demo import demo_password, seed_demo

APP = Path(__file__).resolve().parents[3] / "review_app" / "ui" / "app.py"


@pytest.fixture(scope="session")
def demo_template(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("demo") / "demo.db"
    seed_demo(path, fresh=True)
    engine = get_engine(f"sqlite:///{path}")
    with engine.connect() as connection:
        connection.exec_driver_sql("PRAGMA wal_checkpoint(TRUNCATE)")
    dispose_engines()
    return path


@pytest.fixture
def demo_db(demo_template, tmp_path, monkeypatch):
    """A private copy of the seeded demo database, set as MEDREV_DATABASE_URL."""
    path = tmp_path / "demo.db"
    shutil.copyfile(demo_template, path)
    url = f"sqlite:///{path}"
    monkeypatch.setenv("MEDREV_DATABASE_URL", url)
    yield get_engine(url)
    dispose_engines()


def new_session() -> AppTest:
    return AppTest.from_file(str(APP), default_timeout=30)


def sign_in(username: str, password: str | None = None) -> AppTest:
    at = new_session()
    at.run()
    at.text_input[0].input(username)
    at.text_input[1].input(password if password is not None else demo_password(username))
    at.button[0].click()
    at.run()
    if "medrev_user" in at.session_state:
        at.run()  # a browser would now load the page again, signed in (AppTest does not follow redirects)
    return at


@pytest.fixture(scope="session")
def browser():
    """Debian's Chromium driven by Playwright (it cannot download a browser of its own here)."""
    from .browser_support import ARGS, CHROMIUM

    playwright_sync = pytest.importorskip("playwright.sync_api")
    if not Path(CHROMIUM).exists():
        pytest.fail("Debian's chromium is not installed (apt-get install -y chromium)")
    with playwright_sync.sync_playwright() as p:
        instance = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        yield instance
        instance.close()


@pytest.fixture
def page(browser):
    context = browser.new_context(viewport={"width": 1440, "height": 900})
    page = context.new_page()
    page.set_default_timeout(20_000)
    yield page
    context.close()


def walk_text(at: AppTest) -> str:
    """Everything the page sends to the browser, as text (for 'never appears' checks)."""
    out: list[str] = []

    def walk(node) -> None:
        proto = getattr(node, "proto", None)
        if proto is not None:
            out.append(str(proto))
        for child in getattr(node, "children", {}).values():
            walk(child)

    walk(at._tree)
    return "\n".join(out)
