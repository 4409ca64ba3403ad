"""Submit-to-next on the review page in a real browser, against a bare Streamlit button click.

Starts ``medrev app`` on a seeded SQLite database (``review_db_speed``'s seed, ``--items`` items,
every reviewer with open Rubric A tasks) and, in the same run, a bare Streamlit page with one
button and a click counter. Playwright drives Debian's Chromium against both: on the review page
a reviewer scores the five dimensions (mouse clicks, each waited for) and submits, and the time
from the Submit click to the next task's panel on screen with the script finished is measured in
the page (``performance.now()``, checked every animation frame); on the bare page, the time from
the click to the new count on screen with the script finished. Prints medians and p95 of both,
the score click too, and the ratio (target: submit-to-next <= 1.5x the bare click). Where the time
goes: the page also notes when each websocket message from the server arrives, so each click splits
into "to the last message" (the server's run and its sending) and "last message to on screen" (the
browser drawing it).

Then the server side: AppTest runs of the review page script (signed in with a real session
token) against an empty page in the same app shell, in this process, median and p95.

    .venv/bin/python bench/review_browser_speed.py [--submits 25] [--items 5000]
"""

from __future__ import annotations

import argparse
import logging
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

from sqlmodel import select

sys.path.insert(0, str(Path(__file__).resolve().parent))
from review_db_speed import seed
from review_page_speed import _script_seconds, _time_scripts, app_database

import review_app
from review_app.db.connect import get_engine
from review_app.db.engine import read_session
from review_app.db.models import Assignment, Reviewer
from review_app.rubrics import get_rubric
from review_app.services import review_queue, sessions
from tests.review_app.ui.browser_support import ARGS, CHROMIUM, free_port, wait_healthy

APP = Path(review_app.__file__).resolve().parent / "ui" / "app.py"
BARE = """
import streamlit as st

st.session_state.setdefault("clicks", 0)


def bump():
    st.session_state["clicks"] += 1


st.button("Click", on_click=bump)
st.markdown(f"clicks: {st.session_state['clicks']}")
"""
SHELL = """
import streamlit as st
from review_app.ui.session import refresh_user, sign_out

st.set_page_config(page_title="medrev review", layout="wide")
user = refresh_user()  # as the app does on every run: the session token resolved again
page = st.navigation({"Review": [st.Page("empty.py", title="Empty", default=True)]})
with st.sidebar:
    st.markdown(f"**{user.display_name}**  \\n{user.role}")
    st.button("Sign out", on_click=sign_out)
page.run()
"""
# Notes the arrival time of every message from the server (the app's websocket), for the split.
WS_PROBE = """
(() => {
  const Native = window.WebSocket;
  window.__mrWsIn = [];
  class Probed extends Native {
    constructor(...args) {
      super(...args);
      this.addEventListener('message', () => window.__mrWsIn.push(performance.now()));
    }
  }
  window.WebSocket = Probed;
})();
"""
IDLE = "document.querySelector(\"[data-testid='stApp']\")?.getAttribute('data-test-script-state') === 'notRunning'"
# Click, then wait (checking every animation frame) until ``done`` holds with the script finished
# (and, with ``needRun``, after a script run was seen: a score shows at once, before its rerun);
# returns milliseconds.
TIMED_CLICK = """
async ([selector, text, done, needRun]) => {
  const app = document.querySelector("[data-testid='stApp']");
  const idle = () => IDLE_CHECK;
  let ran = false;
  const observer = new MutationObserver((records) => {
    for (const r of records) {
      if (r.attributeName !== 'data-test-script-state') continue;
      if (r.oldValue === 'running' || app.getAttribute('data-test-script-state') === 'running') ran = true;
    }
  });
  observer.observe(app, { attributes: true, attributeOldValue: true });
  const target = [...document.querySelectorAll(selector)].find(e => !text || e.textContent.trim() === text);
  if (!target) throw new Error('nothing to click: ' + selector + ' ' + text);
  const finished = new Function('return (' + done + ')');
  window.__mrWsIn = [];
  const start = performance.now();
  target.click();
  await new Promise((resolve, reject) => {
    const limit = start + 30000;
    const check = () => {
      if ((ran || !needRun) && idle() && finished()) resolve();
      else if (needRun && !ran && idle() && finished() && performance.now() > start + 3000) {
        ran = null;  // no rerun seen (it may have merged into the previous one): not counted
        resolve();
      }
      else if (performance.now() > limit) reject(new Error('timed out waiting for ' + done));
      else requestAnimationFrame(check);
    };
    check();
  });
  observer.disconnect();
  const end = performance.now();
  const arrived = (window.__mrWsIn || []).filter((t) => t >= start && t <= end);
  const last = arrived.length ? arrived[arrived.length - 1] - start : null;
  return ran === null ? null : { ms: end - start, last, messages: arrived.length };
}
""".replace("IDLE_CHECK", IDLE)


def stats(samples: list[float]) -> tuple[float, float]:
    ordered = sorted(samples)
    return statistics.median(ordered), ordered[int(0.95 * (len(ordered) - 1))]


def wait_idle(page) -> None:
    page.wait_for_function(IDLE, timeout=30_000)


def browser_figures(base: str, bare: str, engine, reviewer_id: int, submits: int) -> dict[str, list[float]]:
    from playwright.sync_api import sync_playwright

    dims = get_rubric("A").dimension_keys
    out: dict[str, list[float]] = {}

    def note(name: str, timed: dict | None) -> None:
        """One click's time, and its split at the last message from the server."""
        if timed is None:  # a score click whose rerun was not seen: not counted
            return
        out.setdefault(f"{name}_ms", []).append(timed["ms"])
        if timed["last"] is not None:
            out.setdefault(f"{name}:to_last_message_ms", []).append(timed["last"])
            out.setdefault(f"{name}:last_message_to_screen_ms", []).append(timed["ms"] - timed["last"])
        out.setdefault(f"{name}:messages", []).append(timed["messages"])

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        context = browser.new_context(viewport={"width": 1440, "height": 900})
        context.add_init_script(WS_PROBE)
        page = context.new_page()
        page.set_default_timeout(30_000)
        page.goto(bare)
        page.get_by_text("clicks: 0").wait_for()
        page.get_by_role("button", name="Click").wait_for()  # the count can show before the button
        wait_idle(page)
        for n in range(submits + 3):
            timed = page.evaluate(
                TIMED_CLICK,
                ["button", "Click", f"document.body.innerText.includes('clicks: {n + 1}')", False],
            )
            if n >= 3:  # warm-up clicks left out
                note("bare_click", timed)
        _token, nonce = sessions.start(engine, reviewer_id)
        page.goto(f"{base}/_medrev/session?nonce={nonce}&next=/review")
        page.locator(".mrk").first.wait_for()
        wait_idle(page)
        for n in range(submits + 2):
            aid = page.locator(".mrk").first.get_attribute("data-aid")
            for k, key in enumerate(dims):
                timed = page.evaluate(
                    TIMED_CLICK,
                    [
                        f".mrk[data-aid='{aid}'] .mrk-dim[data-dim='{key}'] .mrk-level[data-value='{(n + k) % 3}']",
                        "",
                        f"document.querySelector(\".mrk[data-aid='{aid}'] .mrk-dim[data-dim='{key}'] "
                        f".mrk-level[data-value='{(n + k) % 3}']\").getAttribute('aria-checked') === 'true'",
                        True,
                    ],
                )
                if n >= 2:
                    note("score_click", timed)
            page.wait_for_timeout(50)
            wait_idle(page)
            timed = page.evaluate(
                TIMED_CLICK,
                [
                    f".mrk[data-aid='{aid}'] button",
                    "Submit",
                    f"document.querySelector('.mrk') && document.querySelector('.mrk').dataset.aid !== '{aid}'",
                    False,
                ],
            )
            if n >= 2:  # warm-up submits left out
                note("submit_to_next", timed)
        browser.close()
    return out


def server_side(url: str, reviewer: Reviewer, runs: int, folder: Path) -> dict[str, list[float]]:
    from streamlit.testing.v1 import AppTest

    engine = get_engine(url)
    token, _nonce = sessions.start(engine, reviewer.id)

    def session(path: Path) -> AppTest:
        at = AppTest.from_file(str(path), default_timeout=60)
        at.session_state["medrev_token"] = token
        return at

    def timed(at: AppTest) -> tuple[list[float], list[float]]:
        """AppTest round trips and the script thread's own time (what the server spends on a rerun)."""
        samples, scripts = [], []
        for _ in range(runs):
            _script_seconds.clear()
            start = time.perf_counter()
            at.run()
            samples.append((time.perf_counter() - start) * 1000)
            scripts.append(sum(_script_seconds) * 1000)
            assert not at.exception, at.exception
        return samples, scripts

    (folder / "empty.py").write_text("import streamlit as st\nst.markdown('#### Empty page')\n")
    (folder / "shell.py").write_text(SHELL)
    shell = session(folder / "shell.py")
    shell.run()
    empty, empty_script = timed(shell)
    review = session(APP)
    aid = review_queue.next_assignment(engine, reviewer.id)
    review.query_params["task"] = str(aid)
    review.switch_page("views/review.py").run()
    assert review.get("bidi_component"), "the review page did not show the score panel"
    review_samples, review_script = timed(review)
    return {
        "empty_page_ms": empty,
        "review_rerun_ms": review_samples,
        "empty_page_script_ms": empty_script,
        "review_rerun_script_ms": review_script,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=5_000)
    parser.add_argument("--submits", type=int, default=25)
    parser.add_argument("--runs", type=int, default=40)
    args = parser.parse_args()
    logging.getLogger("streamlit").setLevel(logging.ERROR)
    _time_scripts()
    with app_database("review.db") as (folder, url, engine):
        print(f"code under test: {APP.parents[2]}\nseeding {args.items:,} items ...")
        seed(engine, folder, args.items, pool=min(args.items // 2, 2_000), annotations=0)
        with read_session(engine) as session:
            reviewer = session.exec(
                select(Reviewer)
                .join(Assignment, Assignment.reviewer_id == Reviewer.id)
                .where(Assignment.status == "assigned")
                .group_by(Reviewer.id)
                .order_by(Reviewer.id)
            ).first()
        (folder / "bare.py").write_text(BARE)
        ports = free_port(), free_port()
        env = os.environ | {"MEDREV_DATABASE_URL": url}
        logs = [folder / "app.log", folder / "bare.log"]
        app = subprocess.Popen(
            [sys.executable, "-m", "review_app", "app", "--host", "127.0.0.1", "--port", str(ports[0])],
            env=env, stdout=logs[0].open("w"), stderr=subprocess.STDOUT, cwd=folder,
        )  # fmt: skip
        bare = subprocess.Popen(
            [sys.executable, "-m", "streamlit", "run", str(folder / "bare.py"), "--server.port", str(ports[1]),
             "--server.address", "127.0.0.1", "--server.headless", "true", "--browser.gatherUsageStats", "false"],
            stdout=logs[1].open("w"), stderr=subprocess.STDOUT, cwd=folder,
        )  # fmt: skip
        try:
            wait_healthy(f"http://127.0.0.1:{ports[0]}", app, logs[0], timeout=90)
            wait_healthy(f"http://127.0.0.1:{ports[1]}", bare, logs[1], timeout=90)
            figures = browser_figures(
                f"http://127.0.0.1:{ports[0]}", f"http://127.0.0.1:{ports[1]}", engine, reviewer.id, args.submits
            )
        finally:
            for process in (app, bare):
                process.terminate()
                process.wait(timeout=20)
        figures |= server_side(url, reviewer, args.runs, folder)
    print(f"\n{'browser (ms)':<34} {'median':>8} {'p95':>8} {'n':>4}")
    for key in ("bare_click_ms", "score_click_ms", "submit_to_next_ms"):
        median, p95 = stats(figures[key])
        print(f"{key:<34} {median:8.1f} {p95:8.1f} {len(figures[key]):4d}")
    print(f"\n{'where it goes (ms; messages: count)':<34} {'to last':>8} {'to screen':>10} {'messages':>9}")
    for name in ("bare_click", "score_click", "submit_to_next"):
        print(
            f"{name:<34} {stats(figures[name + ':to_last_message_ms'])[0]:8.1f} "
            f"{stats(figures[name + ':last_message_to_screen_ms'])[0]:10.1f} "
            f"{stats(figures[name + ':messages'])[0]:9.0f}"
        )
    print("(medians: click to the last message from the server, last message to the result on screen)")
    ratio = stats(figures["submit_to_next_ms"])[0] / stats(figures["bare_click_ms"])[0]
    score_ratio = stats(figures["score_click_ms"])[0] / stats(figures["bare_click_ms"])[0]
    verdict = "met" if ratio <= 1.5 else "MISSED"
    print(f"submit-to-next / bare click (medians): {ratio:.2f}x (target <= 1.5x: {verdict})")
    print(f"score click / bare click (medians): {score_ratio:.2f}x")
    print(f"\n{'server side, AppTest (ms)':<34} {'median':>8} {'p95':>8}")
    for key in ("empty_page_ms", "review_rerun_ms", "empty_page_script_ms", "review_rerun_script_ms"):
        median, p95 = stats(figures[key])
        print(f"{key:<34} {median:8.1f} {p95:8.1f}")
    for suffix, what in (("ms", "AppTest round trip"), ("script_ms", "script thread")):
        ratio = stats(figures[f"review_rerun_{suffix}"])[0] / stats(figures[f"empty_page_{suffix}"])[0]
        print(f"review rerun / empty page ({what}, medians): {ratio:.2f}x")


if __name__ == "__main__":
    main()
