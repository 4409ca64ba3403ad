"""Simulated reviewers that talk to a real ``medrev app`` the way Streamlit's frontend in a browser does.

Used by ``bench/panel_load.py``. Each :class:`Reviewer` is one browser tab (``bench/panel_tab.py``: its
cookies, page loads, Streamlit's websocket, reconnection) and acts on the widgets the server drew, found
by their labels:

- the sign-in form: the two text inputs and the form's submit button, sent together as the form does;
  the ``auth_redirect`` that follows is a full page load through ``/_medrev/session`` (the cookie);
- "Start next task" on the queue page: a button's trigger value;
- the review page's score panel (a v2 component): its events are the component's JSON state, built
  and acknowledged exactly as ``review_app/ui/components/score_panel.js`` does (:class:`PanelModel`),
  sent in a rerun of the page's fragment.

A replica that died leaves the new replica without the Streamlit session, so the reconnected tab's run
starts a new one; the medrev sign-in is in the database and holds. Beyond the score panel's event logic,
no JavaScript of the page is simulated.
"""

from __future__ import annotations

import asyncio
import math
import random
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from panel_tab import NoAnswer, Tab, json_value, text_value, trigger

STUCK_NOTICE_S = 5.0  # a reviewer looking at "Submitting…" this long reloads the page


@dataclass
class Figures:
    """What every simulated reviewer saw, pooled."""

    measure_from: float = 0.0  # perf_counter time after which latencies count (the end of the ramp)
    accepted: list[tuple[str, int]] = field(default_factory=list)  # (username, assignment) per accepted submit
    submit_ms: list[float] = field(default_factory=list)
    score_ms: list[float] = field(default_factory=list)
    submit_bytes: list[int] = field(default_factory=list)  # received from the server for one click (uncompressed)
    score_bytes: list[int] = field(default_factory=list)
    clicks: int = 0  # reruns asked for by clicks (scores, submits, buttons, form) after the ramp
    submit_times: list[float] = field(default_factory=list)  # perf_counter of each accepted submit's answer
    errors: list[str] = field(default_factory=list)
    reconnects: int = 0
    stuck: int = 0  # a submit in flight when the replica died left the panel at "Submitting…" (reloaded)
    shown_again: int = 0  # a submit stored by the replica that died: the new one showed the task again
    reloads: int = 0
    drafts_checked: int = 0
    drafts_missing: int = 0
    signed_out_after_reconnect: int = 0
    finished_queues: int = 0
    signed_in: int = 0

    def error(self, who: str, text: str) -> None:
        self.errors.append(f"{who}: {text}")


# ------------------------------------------------------------------------------------------ the score panel


class PanelModel:
    """The score panel's browser state (``score_panel.js``): its events, acknowledgements and submit.

    ``window.__medrevScorePanel`` lives as long as the page: a reload starts a new one (a new source id).
    """

    def __init__(self) -> None:
        self.src = secrets.token_hex(9)
        self.seq = 0
        self.pending: list[dict[str, Any]] = []
        self.aid: int | None = None
        self.token = ""
        self.base = 0
        self.scores: dict[str, int] = {}
        self.submitting = 0
        self.data: dict[str, Any] = {}

    def show(self, data: dict[str, Any]) -> bool:
        """The component drawn with ``data``; True when it is a new task (or a new submission of it)."""
        self.data = data
        ack = data.get("ack", {}).get(self.src, 0)
        self.pending = [e for e in self.pending if e["seq"] > ack]
        fresh = self.aid != data["aid"] or self.token != data["token"]
        if fresh:
            self.aid, self.token, self.base = data["aid"], data["token"], data["base"]
            self.scores = dict(data.get("scores") or {})
            self.submitting = 0
            return True
        if self.submitting and ack >= self.submitting:
            self.submitting = 0
        server = data.get("scores") or {}
        for dim in self.dims:
            if not any(e["aid"] == self.aid and (e["t"] == "submit" or e.get("dim") == dim) for e in self.pending):
                if dim in server:
                    self.scores[dim] = server[dim]
                else:
                    self.scores.pop(dim, None)
        return False

    @property
    def dims(self) -> list[str]:
        return [d["key"] for d in self.data.get("dims", [])]

    def levels(self, dim: str) -> list[int]:
        return [lv["value"] for d in self.data["dims"] if d["key"] == dim for lv in d["levels"]]

    @property
    def blocked(self) -> bool:
        return bool(self.data.get("readonly")) or bool(self.submitting)

    def _emit(self, event: dict[str, Any]) -> dict[str, Any]:
        self.seq += 1
        full = {**event, "src": self.src, "seq": self.seq, "aid": self.aid, "token": self.token, "base": self.base}
        self.pending.append(full)
        return {"events": list(self.pending)}

    def score(self, dim: str, value: int) -> dict[str, Any]:
        self.scores[dim] = value
        return self._emit({"t": "score", "dim": dim, "value": value})

    def submit(self) -> dict[str, Any]:
        scores = {d: self.scores[d] for d in self.dims if d in self.scores}
        state = self._emit({"t": "submit", "rubric": self.data["rubric"], "scores": scores, "flags": [], "comment": ""})
        self.submitting = self.seq
        return state


# ------------------------------------------------------------------------------------------ the reviewer


@dataclass
class Pace:
    """Think times: per task a log-normal total (median ``median_s``), shared over its clicks; 0 for stress."""

    median_s: float = 20.0
    sigma: float = 0.5

    def task(self, rng: random.Random, clicks: int) -> list[float]:
        if self.median_s <= 0:
            return [0.0] * clicks
        total = rng.lognormvariate(math.log(self.median_s), self.sigma)
        weights = [rng.gammavariate(2.0, 1.0) for _ in range(clicks)]
        return [total * w / sum(weights) for w in weights]


class Reviewer:
    """One clinician in one browser tab: sign in, open the next task, score each dimension, submit, repeat."""

    def __init__(
        self,
        base: str,
        username: str,
        password: str,
        figures: Figures,
        pace: Pace,
        seed: int,
        on_replica: Callable[[str, str], None] | None = None,
    ) -> None:
        self.username = username
        self.password = password
        self.figures = figures
        self.pace = pace
        self.rng = random.Random(seed)
        self.tab = Tab(base, username, figures, on_replica=(lambda r: on_replica(username, r)) if on_replica else None)
        self.panel = PanelModel()
        self.last_bytes = 0
        # Some of the task's scores are saved in its draft and some are still to give: a replica lost now
        # leaves a draft that the next score, on the live replica, must find whole (``--kill-replica-after``).
        self.drafting = False

    def _error(self, text: str) -> None:
        self.figures.error(self.username, text)

    async def _think(self, seconds: float, stop_at: float) -> bool:
        """Wait like a reviewer reading; False when the run ends first."""
        if seconds > 0:
            await asyncio.sleep(max(0.0, min(seconds, stop_at - time.perf_counter())))
        return time.perf_counter() < stop_at

    async def run(self, start_at: float, stop_at: float) -> None:
        try:
            await asyncio.sleep(max(0.0, start_at - time.perf_counter()))
            if not await self.sign_in(stop_at):
                return
            self.figures.signed_in += 1
            while time.perf_counter() < stop_at:
                if not await self.open_next():
                    return
                await self.task(stop_at)
        except NoAnswer as exc:
            self._error(str(exc))
        except Exception as exc:  # a fault of the client itself is reported, never hidden
            self._error(f"client fault: {type(exc).__name__}: {exc}")
        finally:
            await self.tab.close()

    # -------------------------------------------------------------- sign-in and the queue

    async def sign_in(self, stop_at: float) -> bool:
        await self.tab.load("/")
        while time.perf_counter() < stop_at:
            page = self.tab.page
            user = page.find("text_input", "Username")
            password = page.find("text_input", "Password")
            button = page.find("button", "Sign in")
            if user is None or password is None or button is None:
                self._error(f"no sign-in form on {page.path}")
                return False
            await self._think(self.rng.uniform(1, 4) if self.pace.median_s else 0, stop_at)
            await self.tab.act(
                values=[
                    text_value(user.text_input.id, self.username),
                    text_value(password.text_input.id, self.password),
                ],
                triggers=[trigger(button.button.id)],
            )
            if page.redirect is not None:
                await self.tab.navigate(page.redirect)
                if self.tab.page.find("button", "Sign out") is not None:
                    return True
                self._error("signed in, but the page after the redirect is not signed in")
                return False
            for text in page.problems():
                self._error(f"sign-in: {text}")
            await asyncio.sleep(self.rng.uniform(5, 15))  # a busy or refused sign-in: try again shortly
        return False

    async def open_next(self) -> bool:
        """From wherever the tab is, to the next task on the review page; False when the queue is done."""
        for _attempt in range(3):
            page = self.tab.page
            if page.panel() is not None:
                return True
            button = page.find("button", "Start next task")
            if button is None:
                await self._to_queue()
                button = page.find("button", "Start next task")
            if button is None:
                if any("done" in t for t in page.texts(formats=None)):
                    self.figures.finished_queues += 1
                else:
                    self._error(f"no 'Start next task' on {page.path}: {page.problems()}")
                return False
            session = page.session_id
            await self.tab.act(triggers=[trigger(button.button.id)])
            if self.tab.page.panel() is not None:
                if self.panel.pending:
                    # The panel mounted again after another page resends what the server has not acknowledged.
                    await self._click({"events": list(self.panel.pending)})
                return True
            if self.tab.page.session_id == session:  # not a click lost with a dropped connection
                self._error(f"'Start next task' did not open a task: {self.tab.page.problems()}")
                return False
        self._error("'Start next task' did not open a task after reconnecting")
        return False

    async def _to_queue(self) -> None:
        """The sidebar's "My queue" (a page change within the app: a rerun, no page load)."""
        queue = next((h for h, p in self.tab.page.pages.items() if p == ""), "")
        await self.tab.act(page_hash=queue, query="")

    # -------------------------------------------------------------- one task

    def _show_panel(self) -> bool:
        """Draw the panel from the page; True for a new task. Raises when the page shows none."""
        found = self.tab.page.panel()
        if found is None:
            raise LookupError("no score panel")
        data, self.widget_id, self.fragment = found
        return self.panel.show(data)

    async def _click(self, state: dict[str, Any]) -> tuple[float, bool]:
        """Send the panel's events as the component does; returns (ms, whether the tab reconnected meanwhile)."""
        session = self.tab.page.session_id
        before = self.tab.received
        ms = await self.tab.act(values=[json_value(self.widget_id, state)], fragment=self.fragment)
        self.last_bytes = self.tab.received - before
        return ms, self.tab.page.session_id != session

    async def task(self, stop_at: float) -> None:
        self._show_panel()
        aid = self.panel.aid
        saved: set[str] = set()  # dimensions the server acknowledged (saved in the draft)
        dims = self.panel.dims
        self.drafting = False
        waits = self.pace.task(self.rng, len(dims) + 1)
        for dim, wait in zip(dims, waits, strict=False):
            if dim in self.panel.scores and self.panel.data.get("scores", {}).get(dim) is not None:
                saved.add(dim)
                continue  # a draft found after a reload: already scored
            if not await self._think(wait, stop_at):
                return
            value = self.rng.choice(self.panel.levels(dim))
            seq_before = self.panel.seq
            started = time.perf_counter()
            ms, reconnected = await self._click(self.panel.score(dim, value))
            if not await self._settle(reconnected, saved):
                return
            if self.panel.aid != aid:
                self._error(f"task {aid} replaced by {self.panel.aid} after a score")
                return
            if self.panel.data.get("ack", {}).get(self.panel.src, 0) > seq_before:
                saved.add(dim)
                self.drafting = len(saved) < len(dims)
                if started >= self.figures.measure_from and not reconnected:
                    self.figures.score_ms.append(ms)
                    self.figures.score_bytes.append(self.last_bytes)
            notice = self.panel.data.get("notice")
            if notice and notice.get("kind") in ("error", "warning"):
                self._error(f"score refused: {notice.get('text')}")
        if not await self._think(waits[-1], stop_at):
            return
        await self._submit(aid, saved, stop_at)

    async def _settle(self, reconnected: bool, saved: set[str]) -> bool:
        """Redraw the panel after a click; after a reconnect check the sign-in and the draft."""
        page = self.tab.page
        if self._signed_out(reconnected):
            return False
        if page.panel() is None:
            self._error(f"the task is gone from the page: {page.problems() or page.faults}")
            return False
        self._show_panel()
        if reconnected:
            self._check_draft(saved)
        return True

    def _signed_out(self, reconnected: bool) -> bool:
        """After a reconnect the page must still be signed in (the sign-in is in the database, not the replica)."""
        if reconnected and self.tab.page.find("button", "Sign out") is None:
            self.figures.signed_out_after_reconnect += 1
            self._error("signed out after a reconnect")
            return True
        return False

    def _check_draft(self, saved: set[str]) -> None:
        """After a reconnect every score the server acknowledged must come back in the task's draft."""
        self.figures.drafts_checked += 1
        draft = self.panel.data.get("scores") or {}
        missing = [d for d in saved if d not in draft]
        if missing:
            self.figures.drafts_missing += 1
            self._error(f"draft lost after a reconnect: {missing}")

    async def _submit(self, aid: int, saved: set[str], stop_at: float) -> None:
        for _attempt in range(3):
            started = time.perf_counter()
            ms, reconnected = await self._click(self.panel.submit())
            page = self.tab.page
            found = page.panel()
            moved = found is None or found[0]["aid"] != aid
            if moved:
                if found is None and not any("queue is empty" in t for t in page.texts(formats=None)):
                    self._error(f"after submit: no task and no end of queue: {page.problems() or page.faults}")
                    return
                self._accept(aid, started, ms, reconnected)
                return
            if self._signed_out(reconnected):
                return
            self._show_panel()
            if reconnected and str(self.panel.data.get("submit_label", "")).startswith("Save as revision"):
                # The lost replica stored the submit but its answer never came: the new replica shows the task
                # again, now submitted (as an edit). A reviewer who reads "this task: submitted" goes on.
                self.figures.shown_again += 1
                self._accept(aid, started, None, True)
                await self._to_queue()
                return
            if reconnected:
                self._check_draft(saved)
            notice = self.panel.data.get("notice")
            if not self.panel.blocked:
                self._error(f"submit refused: {notice.get('text') if notice else 'no message'}")
                return
            if not reconnected:
                self._error("submit answered without moving on or a message")
                return
            # The new replica's first run did not apply the submit the browser holds: the panel stays at
            # "Submitting…" with Submit disabled until the reviewer reloads the page.
            self.figures.stuck += 1
            await asyncio.sleep(STUCK_NOTICE_S)
            if await self._reload_after_stuck(aid, started):
                return
        self._error(f"task {aid} could not be submitted")

    async def _reload_after_stuck(self, aid: int, started: float) -> bool:
        """Reload the task's page; True when it turns out submitted (the submit counts as accepted)."""
        self.figures.reloads += 1
        await self.tab.load(f"/review?task={aid}")
        self.panel = PanelModel()
        found = self.tab.page.panel()
        if found is None:
            self._error(f"reload of task {aid} shows no task: {self.tab.page.problems()}")
            return True
        self._show_panel()
        if str(self.panel.data.get("submit_label", "")).startswith("Save as revision"):
            self._accept(aid, started, None, True)
            await self._to_queue()
            return True
        for dim in self.panel.dims:  # scores not in the draft are scored again, as the reviewer sees them empty
            if dim not in self.panel.scores:
                await self._click(self.panel.score(dim, self.rng.choice(self.panel.levels(dim))))
                self._show_panel()
        return False

    def _accept(self, aid: int, started: float, ms: float | None, reconnected: bool) -> None:
        self.figures.accepted.append((self.username, aid))
        self.figures.submit_times.append(time.perf_counter())
        if ms is not None and started >= self.figures.measure_from and not reconnected:
            self.figures.submit_ms.append(ms)
            self.figures.submit_bytes.append(self.last_bytes)
        self.panel.pending = [e for e in self.panel.pending if e["aid"] != aid]
        self.panel.submitting = 0
