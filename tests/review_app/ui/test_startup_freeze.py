"""What ``medrev app`` serves loads the pages' modules at start-up and freezes them for the collector.

A full collection (Streamlit's after every script run, unless turned off as ``medrev app`` does, and
Python's own) holds the GIL while it walks every object not frozen; ``medrev_asgi`` freezes the
long-lived objects so that walk stays small. A module a page, or a library on first use, imports
after start-up would be walked again every time: these tests list what the pages import, run every
page, and check start-up had it all (in a separate process, so this one is not frozen).
"""

import ast
import json
import subprocess
import sys
from pathlib import Path

UI = Path(__file__).resolve().parents[3] / "review_app" / "ui"
# Registers the score panel's browser component when imported: left to the first run (its own
# imports are checked like every other module's).
FIRST_RUN = {"review_app.ui.components.scoring"}


def _is_module(name: str) -> bool:
    path = UI.parents[1] / Path(*name.split("."))
    return path.with_suffix(".py").exists() or (path / "__init__.py").exists()


def page_imports() -> set[str]:
    """The modules the app script, its pages and their components import (review_app's and others)."""
    found: set[str] = set()
    for path in [UI / "app.py", *sorted((UI / "views").glob("*.py")), *sorted((UI / "components").glob("*.py"))]:
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                found.update(alias.name for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                found.add(node.module)
                for alias in node.names:  # ``from review_app.services import flags``: the module flags
                    if node.module.startswith("review_app") and _is_module(f"{node.module}.{alias.name}"):
                        found.add(f"{node.module}.{alias.name}")
    return {name for name in found if name != "__future__"} - FIRST_RUN


def test_start_up_loads_every_module_the_pages_import_and_freezes_them():
    names = sorted(page_imports())
    assert "review_app.services.reviewing" in names and "streamlit" in names  # the scan finds the pages' imports
    probe = (
        "import gc, json, sys\n"
        "import review_app.ui.medrev_asgi\n"
        f"names = {names!r}\n"
        "print(json.dumps({'frozen': gc.get_freeze_count(), 'missing': [n for n in names if n not in sys.modules]}))\n"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=180, check=True)
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["missing"] == [], f"start-up (medrev_asgi.PRELOAD) leaves out {result['missing']}"
    assert result["frozen"] > 10_000


RUN_EVERY_PAGE = """
import json, os, sys
from pathlib import Path
from review_app.demo import demo_password, seed_demo
path = Path(sys.argv[1])
seed_demo(path, fresh=True)
os.environ["MEDREV_DATABASE_URL"] = f"sqlite:///{path}"
os.environ["MEDREV_COMPUTE_WORKERS"] = "0"
import review_app.ui.medrev_asgi as served
from streamlit.testing.v1 import AppTest
loaded = set(sys.modules)
app = Path(served.__file__).with_name("app.py")

def sign_in(username):
    at = AppTest.from_file(str(app), default_timeout=120)
    at.run()
    at.text_input[0].input(username)
    at.text_input[1].input(demo_password(username))
    at.button[0].click()
    at.run()
    if "medrev_user" in at.session_state:
        at.run()
    return at

lead = sign_in("lead01")
pages = sorted(p.name for p in (app.parent / "views").glob("lead_*.py"))
for page in pages:
    lead.switch_page(f"views/{page}").run()
    assert not lead.exception, (page, lead.exception)
reviewer = sign_in("rev01")
reviewer.switch_page("views/review.py").run()
new = sorted(m for m in set(sys.modules) - loaded if not m.startswith("streamlit.testing"))
print(json.dumps({"pages": len(pages), "new": new}))
"""


def test_no_page_loads_a_module_after_start_up(tmp_path):
    """Every lead page and the review page, run once each: what they load on first use is loaded at start-up.

    A library that imports on first use (plotly's figure classes, PIL, Streamlit's icon table) left
    23,000 objects out of the frozen set, and every collection after a run walked them again.
    """
    done = subprocess.run(
        [sys.executable, "-c", RUN_EVERY_PAGE, str(tmp_path / "demo.db")],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["pages"] == len(list((UI / "views").glob("lead_*.py"))) > 10
    assert set(result["new"]) <= FIRST_RUN, (
        f"loaded after start-up, add them to medrev_asgi.ON_FIRST_USE: {sorted(set(result['new']) - FIRST_RUN)}"
    )


def test_every_run_collects_its_young_objects_and_no_full_collection_is_configured(demo_db, monkeypatch):
    """``medrev app`` turns off Streamlit's full collection per run; the app script collects the run's
    young generations itself, also when the run ends early (the sign-in page ends in ``st.stop()``)."""
    import gc

    from review_app.ui import server

    from .conftest import new_session, sign_in

    assert server.DEFAULTS["STREAMLIT_RUNNER_POST_SCRIPT_GC"] == "false"
    calls: list[int] = []
    real = gc.collect

    def counted(generation: int = 2) -> int:
        calls.append(generation)
        return real(generation)

    monkeypatch.setattr(gc, "collect", counted)
    new_session().run()  # signed out: the sign-in form, then st.stop()
    assert calls.count(1) == 1 and 2 not in calls
    calls.clear()
    at = sign_in("rev01")
    at.switch_page("views/review.py").run()
    assert calls.count(1) >= 3 and 2 not in calls  # one per run: sign-in form, signing in, pages
