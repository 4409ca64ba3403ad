"""What the review page sends over Streamlit's websocket for a score click, a submit and opening a task.

Seeds the demo database (``medrev demo``'s study) in a scratch folder, starts ``medrev app`` on it on
loopback, and drives it with the protocol client of the panel load generator (``bench/panel_tab.py``,
with the score panel's browser logic from ``bench/panel_client.py``): sign in as a demo reviewer with an
untouched queue, "Start next task" on the queue page, score every dimension of the task and submit,
task after task (the submit shows the next task; every second task is opened from the queue page
instead). Every ForwardMsg of each action is recorded: its size (as sent, before the websocket's
compression), its kind (delta and element type, a reference to a message the browser caches, run
bookkeeping), its delta path and the run it belongs to (the whole script, or a fragment alone).

Prints, per action (open, score click, submit), the median of messages, bytes and click-to-run-end
time over all its samples, then the breakdown of one sample of each (the one with the median bytes):
bytes by message kind and the largest elements with their delta paths. No browser draws anything here:
"render" is the end of the server's run as the client receives it (``script_finished``). Target: a
score click's median under 10 kB.

    .venv/bin/python bench/score_click_bytes.py [--tasks 12] [--user rev01]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import statistics
import sys
import tempfile
import uuid
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from streamlit.proto.ForwardMsg_pb2 import ForwardMsg

sys.path.insert(0, str(Path(__file__).resolve().parent))
from panel_client import Figures, PanelModel
from panel_stack import free_port, start_replica, wait_up
from panel_tab import Page, Tab, json_value, text_value, trigger

import review_app
from review_app.demo import UNTOUCHED, demo_password, seed_demo

TOP = 8  # elements listed per breakdown


@dataclass
class Sent:
    """One ForwardMsg as received: its size and what it is."""

    size: int
    kind: str  # e.g. "delta:new_element:html", "ref_hash -> bidi_component", "script_finished"
    path: tuple[int, ...]
    run: str  # "full run" or "fragment <id>"
    what: str  # a short description of the element (its label, the start of its text)


@dataclass
class Action:
    name: str
    ms: float = 0.0
    sent: list[Sent] = field(default_factory=list)

    @property
    def size(self) -> int:
        return sum(s.size for s in self.sent)

    @property
    def runs(self) -> list[str]:
        return [s.run for s in self.sent if s.kind == "new_session"]


def _describe(msg: ForwardMsg) -> tuple[str, str]:
    """The message's kind and a few words about its element."""
    kind = msg.WhichOneof("type")
    if kind != "delta":
        return kind or "?", ""
    delta_kind = msg.delta.WhichOneof("type")
    if delta_kind != "new_element":
        block = msg.delta.add_block.WhichOneof("type") if delta_kind == "add_block" else ""
        return f"delta:{delta_kind}" + (f":{block}" if block else ""), msg.delta.add_block.id if block else ""
    element = msg.delta.new_element
    etype = element.WhichOneof("type")
    inner = getattr(element, etype)
    if etype == "bidi_component":
        sizes = f"js {len(inner.js_content):,} B, css {len(inner.css_content):,} B, data {len(inner.json):,} B"
        what = f"{inner.component_name} ({sizes})"
    elif hasattr(inner, "label") and inner.label:
        what = inner.label
    elif hasattr(inner, "body"):
        what = " ".join(inner.body.split())
    else:
        what = ""
    return f"delta:new_element:{etype}", what[:70]


class RecordingPage(Page):
    """The panel client's page, noting every message it handles into ``log``."""

    def __init__(self, log: list[Sent]) -> None:
        super().__init__()
        self.log = log
        self.current_run = "full run"

    def handle(self, msg: ForwardMsg, requested_fragment: str) -> None:
        size = msg.ByteSize()
        if msg.HasField("ref_hash"):
            cached = self.cache.get(msg.ref_hash)
            kind, what = _describe(cached[0]) if cached else ("?", "")
            kind = f"ref_hash -> {kind.removeprefix('delta:new_element:')}"
        else:
            kind, what = _describe(msg)
        if msg.WhichOneof("type") == "new_session":
            fragments = list(msg.metadata.run.fragment_ids) or ([requested_fragment] if requested_fragment else [])
            self.current_run = f"fragment {fragments[0][:12]}" if fragments else "full run"
        self.log.append(Sent(size, kind, tuple(msg.metadata.delta_path), self.current_run, what))
        super().handle(msg, requested_fragment)


class RecordingTab(Tab):
    """A tab whose every page (a new one per page load) records the messages it receives."""

    def __init__(self, base: str, name: str) -> None:
        self.log: list[Sent] = []
        super().__init__(base, name, Figures())

    @property
    def page(self) -> RecordingPage:
        return self._page

    @page.setter
    def page(self, _fresh: Page) -> None:
        self._page = RecordingPage(self.log)


async def _timed(tab: RecordingTab, name: str, **act) -> Action:
    tab.log.clear()
    ms = await tab.act(**act)
    return Action(name, ms, list(tab.log))


def _queue(tab: Tab) -> str:
    """The queue page's script hash (the app's default page), for a click on "My queue"."""
    return next((h for h, p in tab.page.pages.items() if p == ""), "")


async def drive(base: str, username: str, tasks: int) -> list[Action]:
    tab = RecordingTab(base, username)
    actions: list[Action] = []
    try:
        await tab.load("/")
        page = tab.page
        user, password = page.find("text_input", "Username"), page.find("text_input", "Password")
        button = page.find("button", "Sign in")
        if user is None or password is None or button is None:
            raise RuntimeError(f"no sign-in form: {page.problems()}")
        typed = [text_value(user.text_input.id, username), text_value(password.text_input.id, demo_password(username))]
        await tab.act(values=typed, triggers=[trigger(button.button.id)])
        if tab.page.redirect is None:
            raise RuntimeError(f"sign-in refused: {tab.page.problems()}")
        await tab.navigate(tab.page.redirect)
        panel = PanelModel()
        for n in range(tasks):
            if n % 2 and tab.page.panel() is not None:  # every second task is opened from the queue page
                await tab.act(page_hash=_queue(tab), query="")
            if tab.page.panel() is None:
                start = tab.page.find("button", "Start next task")
                if start is None:
                    await tab.act(page_hash=_queue(tab), query="")
                    start = tab.page.find("button", "Start next task")
                if start is None:
                    break  # the queue is done
                actions.append(await _timed(tab, "open", triggers=[trigger(start.button.id)]))
            found = tab.page.panel()
            if found is None:
                raise RuntimeError(f"no score panel: {tab.page.problems()} {tab.page.faults}")
            data, widget, fragment = found
            panel.show(data)
            for k, dim in enumerate(panel.dims):
                levels = panel.levels(dim)
                state = panel.score(dim, levels[(k + len(actions)) % len(levels)])
                actions.append(await _timed(tab, "score click", values=[json_value(widget, state)], fragment=fragment))
                data, widget, fragment = tab.page.panel()
                panel.show(data)
                notice = data.get("notice")
                if notice and notice.get("kind") in ("error", "warning"):
                    raise RuntimeError(f"score refused: {notice}")
            action = await _timed(tab, "submit", values=[json_value(widget, panel.submit())], fragment=fragment)
            actions.append(action)
            after = tab.page.panel()
            if after is not None and after[0]["aid"] == panel.aid:
                raise RuntimeError(f"submit did not move on: {after[0].get('notice')}")
            panel.pending = []
            panel.submitting = 0
            if tab.page.faults:
                raise RuntimeError(f"protocol faults: {tab.page.faults}")
    finally:
        await tab.close()
    return actions


def _median_action(samples: list[Action]) -> Action:
    ordered = sorted(samples, key=lambda a: a.size)
    return ordered[(len(ordered) - 1) // 2]


def report(actions: list[Action]) -> None:
    names = list(dict.fromkeys(a.name for a in actions))
    print(f"\n{'action':<12} {'n':>3} {'messages':>9} {'bytes':>9} {'min':>8} {'max':>8} {'ms':>7}  runs")
    for name in names:
        samples = [a for a in actions if a.name == name]
        runs = Counter(" + ".join(r.split(" ")[0] for r in a.runs) for a in samples)
        print(
            f"{name:<12} {len(samples):3d} {statistics.median(len(a.sent) for a in samples):9.0f} "
            f"{statistics.median(a.size for a in samples):9,.0f} {min(a.size for a in samples):8,d} "
            f"{max(a.size for a in samples):8,d} {statistics.median(a.ms for a in samples):7.1f}  "
            + ", ".join(f"{k or 'none'} x{v}" for k, v in runs.items())
        )
    print("(medians over the samples; bytes: every ForwardMsg as sent, before the websocket's compression;")
    print(" ms: click to the end of the server's run on loopback, as this client receives it)")
    clicks = [a.size for a in actions if a.name == "score click"]
    if clicks:
        median = statistics.median(clicks) / 1000
        print(f"score click median: {median:.1f} kB (target < 10 kB: {'met' if median < 10 else 'MISSED'})")
    for name in names:
        action = _median_action([a for a in actions if a.name == name])
        print(f"\n== {name}: {len(action.sent)} messages, {action.size:,} bytes, runs: {', '.join(action.runs)}")
        kinds: Counter[str] = Counter()
        counts: Counter[str] = Counter()
        for s in action.sent:
            kinds[s.kind] += s.size
            counts[s.kind] += 1
        for kind, size in kinds.most_common():
            print(f"  {size:8,d} B  {counts[kind]:3d} x {kind}")
        print("  largest:")
        for s in sorted(action.sent, key=lambda s: -s.size)[:TOP]:
            path = ".".join(map(str, s.path)) or "-"
            print(f"  {s.size:8,d} B  {path:<14} {s.kind:<32} {s.what}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=12, help="tasks to score and submit")
    parser.add_argument("--user", default=UNTOUCHED[0], help="demo reviewer (one with an untouched queue)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="medrev-bytes-") as scratch:
        folder = Path(scratch)
        seeded = seed_demo(folder / "demo.db", fresh=True)
        port = free_port()
        env = os.environ | {"MEDREV_DATABASE_URL": seeded.url, "STREAMLIT_SERVER_COOKIE_SECRET": uuid.uuid4().hex * 2}
        app = start_replica(port, env, folder)
        try:
            wait_up(f"http://127.0.0.1:{port}/_stcore/health", app, folder / f"replica-{port}.log")
            actions = asyncio.run(drive(f"http://127.0.0.1:{port}", args.user, args.tasks))
        finally:
            os.killpg(app.pid, signal.SIGTERM)  # its own process group: the compute worker goes with it
            app.wait(timeout=20)
    print(f"code under test: {Path(review_app.__file__).resolve().parents[1]}; demo reviewer {args.user}")
    report(actions)


if __name__ == "__main__":
    main()
