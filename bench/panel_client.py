"""Simulated reviewers that talk to a real ``medrev app`` the way Streamlit's frontend in a browser does.

Used by ``bench/panel_load.py``. Each :class:`Reviewer` is one browser tab: its own cookie jar, a
page load (the document, ``/_stcore/health``, which sets the XSRF cookie, and ``/_stcore/host-config``),
then Streamlit's websocket ``/_stcore/stream`` with the subprotocols the frontend sends
(``streamlit``, the XSRF cookie's value, and the last session id when it reconnects). It sends
``BackMsg.rerun_script`` with the widget states the frontend would send and reads every ``ForwardMsg``
(deltas, cached-message references, page changes, redirects), keeping the page's elements as the
frontend does, so the widgets it acts on are found by their labels in what the server drew:

- the sign-in form: the two text inputs and the form's submit button, sent together as the form does;
  the ``auth_redirect`` that follows is a full page load through ``/_medrev/session`` (the cookie);
- "Start next task" on the queue page: a button's trigger value;
- the review page's score panel (a v2 component): its events are the component's JSON state, built
  and acknowledged exactly as ``review_app/ui/components/score_panel.js`` does (:class:`PanelModel`),
  sent in a rerun of the page's fragment.

When the websocket drops, the tab does what the frontend does: it pings ``/_stcore/health`` with a
growing back-off until the server answers, opens a new websocket (same cookies, the last session id)
and asks for a rerun with the widget values it holds. A replica that died leaves the new replica
without the Streamlit session, so that run starts a new one; the medrev sign-in is in the database
and holds. No browser code runs here: what a browser draws, fetches as static files or runs as
JavaScript beyond the score panel's event logic is not simulated.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import math
import random
import secrets
import ssl
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

import httpx
from streamlit.proto.BackMsg_pb2 import BackMsg
from streamlit.proto.Element_pb2 import Element
from streamlit.proto.ForwardMsg_pb2 import ForwardMsg
from streamlit.proto.WidgetStates_pb2 import WidgetState
from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed, InvalidHandshake, InvalidStatus

PANEL_COMPONENT = "medrev_score_panel"
XSRF_COOKIE = "_streamlit_xsrf"
ACTION_TIMEOUT_S = 90.0  # no answer to a click within this long: the reviewer sees a hung page
STUCK_NOTICE_S = 5.0  # a reviewer looking at "Submitting…" this long reloads the page
PING_MIN_S, PING_MAX_S = 0.5, 30.0  # the frontend's reconnect back-off, with jitter
_FINAL = ("FINISHED_SUCCESSFULLY", "FINISHED_FRAGMENT_RUN_SUCCESSFULLY", "FINISHED_WITH_COMPILE_ERROR")


class NoAnswer(Exception):
    """The server did not finish the run a click started in time."""


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


# ------------------------------------------------------------------------------------------ the page


@dataclass
class Shown:
    element: Element
    fragment: str
    run: int


class Page:
    """The elements the frontend would show, kept from the ForwardMsgs as the frontend keeps them.

    Every run sends each element it draws again (or a reference to a message the browser cached);
    at the end of a full run what it did not draw is gone, at the end of a fragment run what that
    fragment did not draw again is gone.
    """

    def __init__(self) -> None:
        self.elements: dict[tuple[int, ...], Shown] = {}
        self.run = 0  # runs started
        self.finished = 0  # runs finished (not cut short by a rerun)
        self.running = False
        self.fragment = ""  # the fragment this run reruns ("" for the whole page)
        self.page_hash = ""
        self.main_hash = ""
        self.pages: dict[str, str] = {}  # page script hash -> URL path ("" for the default page)
        self.query = ""
        self.session_id = ""
        self.redirect: str | None = None
        self.cache: dict[str, tuple[ForwardMsg, int]] = {}
        self.max_cache_age = 2
        self.faults: list[str] = []  # what went wrong in the protocol itself

    def handle(self, msg: ForwardMsg, requested_fragment: str) -> None:
        if msg.HasField("ref_hash"):
            cached = self.cache.get(msg.ref_hash)
            if cached is None:
                self.faults.append(f"cached message {msg.ref_hash} not found")
                return
            self.cache[msg.ref_hash] = (cached[0], self.finished)
            full = ForwardMsg()
            full.CopyFrom(cached[0])
            full.metadata.CopyFrom(msg.metadata)
            msg = full
        elif msg.metadata.cacheable and msg.hash:
            self.cache[msg.hash] = (msg, self.finished)
        kind = msg.WhichOneof("type")
        if kind == "new_session":
            new = msg.new_session
            if new.HasField("initialize") and new.initialize.session_id:
                self.session_id = new.initialize.session_id
            self.page_hash = new.page_script_hash
            self.main_hash = new.main_script_hash
            if new.config.max_cached_message_age:
                self.max_cache_age = new.config.max_cached_message_age
            self.run += 1
            self.running = True
            self.fragment = requested_fragment
        elif kind == "delta":
            if msg.delta.WhichOneof("type") == "new_element":
                path = tuple(msg.metadata.delta_path)
                self.elements[path] = Shown(msg.delta.new_element, msg.delta.fragment_id, self.run)
        elif kind == "navigation":
            self.pages = {
                p.page_script_hash: ("" if p.is_default else p.url_pathname) for p in msg.navigation.app_pages
            }
        elif kind == "page_info_changed":
            self.query = msg.page_info_changed.query_string
        elif kind == "auth_redirect":
            self.redirect = msg.auth_redirect.url
        elif kind == "page_not_found":
            self.faults.append(f"page not found: {msg.page_not_found.page_name}")
        elif kind == "session_event":
            event = msg.session_event
            if event.WhichOneof("type") == "script_compilation_exception":
                self.faults.append(f"script error: {event.script_compilation_exception.message}")
        elif kind == "script_finished":
            status = ForwardMsg.ScriptFinishedStatus.Name(msg.script_finished)
            if status == "FINISHED_EARLY_FOR_RERUN":
                return
            if self.fragment:
                stale = [p for p, s in self.elements.items() if s.fragment == self.fragment and s.run != self.run]
            else:
                stale = [p for p, s in self.elements.items() if s.run != self.run]
            for path in stale:
                del self.elements[path]
            self.finished += 1
            self.running = False
            self.fragment = ""
            self.cache = {h: c for h, c in self.cache.items() if self.finished - c[1] <= self.max_cache_age}

    @property
    def path(self) -> str:
        """The page's URL path, as the browser's address bar shows it."""
        return "/" + self.pages.get(self.page_hash, "")

    def find(self, kind: str, label: str | None = None) -> Element | None:
        for path in sorted(self.elements):
            element = self.elements[path].element
            if element.WhichOneof("type") == kind and (label is None or getattr(element, kind).label == label):
                return element
        return None

    def panel(self) -> tuple[dict[str, Any], str, str] | None:
        """The score panel's data, widget id and fragment, when the page shows it."""
        for shown in self.elements.values():
            element = shown.element
            if element.WhichOneof("type") == "bidi_component" and element.bidi_component.component_name.endswith(
                PANEL_COMPONENT
            ):
                return json.loads(element.bidi_component.json), element.bidi_component.id, shown.fragment
        return None

    def texts(self, kinds: tuple[str, ...] = ("alert",), formats: tuple[int, ...] | None = None) -> list[str]:
        out = []
        for path in sorted(self.elements):
            element = self.elements[path].element
            kind = element.WhichOneof("type")
            if kind == "alert" and "alert" in kinds and (formats is None or element.alert.format in formats):
                out.append(element.alert.body)
            elif kind == "exception" and "exception" in kinds:
                out.append(f"{element.exception.type}: {element.exception.message}")
            elif kind == "toast" and "toast" in kinds and element.toast.icon == ":material/error:":
                out.append(element.toast.body)
        return out

    def problems(self) -> list[str]:
        """Errors the page shows: error and warning boxes, exceptions, error toasts."""
        return self.texts(("alert", "exception", "toast"), formats=(1, 2))  # Alert.ERROR, Alert.WARNING


# ------------------------------------------------------------------------------------------ the tab


class Tab:
    """One browser tab on the app: cookies, the page it shows, its websocket and the widget values it holds."""

    def __init__(self, base: str, name: str, figures: Figures, *, on_replica: Callable[[str], None] | None = None):
        self.base = base.rstrip("/")
        self.name = name
        self.figures = figures
        self.secure = base.startswith("https")
        self.http = httpx.AsyncClient(base_url=self.base, verify=False, timeout=30.0, follow_redirects=False)
        self.page = Page()
        self.ws: ClientConnection | None = None
        self.reader: asyncio.Task | None = None
        self.reconnecting: asyncio.Task | None = None
        self.changed = asyncio.Event()
        self.widgets: dict[str, WidgetState] = {}  # the value widgets the frontend holds (sent with every run)
        self.requested_fragment = ""
        self.closing = False
        self.last_session_id = ""
        self.on_replica = on_replica
        self.received = 0  # bytes of every ForwardMsg (as sent, before the websocket's compression)
        self.ssl = None
        if self.secure:
            self.ssl = ssl.create_default_context()
            self.ssl.check_hostname = False
            self.ssl.verify_mode = ssl.CERT_NONE  # the deployment's self-signed certificate

    # -------------------------------------------------------------- HTTP

    def _cookie_header(self) -> str:
        return "; ".join(f"{c.name}={c.value}" for c in self.http.cookies.jar if self.secure or not c.secure)

    async def _server_ready(self) -> bool:
        """``/_stcore/health`` and ``/_stcore/host-config``, as the frontend asks before every connection."""
        try:
            health, _config = await asyncio.gather(
                self.http.get("/_stcore/health"), self.http.get("/_stcore/host-config")
            )
        except httpx.HTTPError:
            return False
        return health.status_code == 200

    async def load(self, target: str) -> None:
        """A full page load of ``target`` (path and query): the document, server checks, websocket, first run."""
        await self.leave()
        self.page = Page()
        self.widgets = {}
        self.last_session_id = ""  # a new page knows no Streamlit session
        response = await self.http.get(target, headers={"Accept": "text/html"})
        if response.status_code != 200:
            raise RuntimeError(f"GET {target}: {response.status_code}")
        path, _, query = target.partition("?")
        delay = PING_MIN_S
        while not await self._server_ready():
            await asyncio.sleep(delay * random.uniform(0.8, 1.2))
            delay = min(PING_MAX_S, delay * 2)
        await self._open()
        page_name = path.strip("/")
        await self._send_rerun(query=query, page_name=page_name, fragment="")
        await self.wait_run(self.page.finished, started=time.perf_counter())

    async def navigate(self, url: str) -> None:
        """``window.location.href = url``: follow the server's redirects, then load the page they end at."""
        await self.leave()
        target = url
        for _ in range(5):
            response = await self.http.get(target, headers={"Accept": "text/html"})
            if response.status_code in (301, 302, 303, 307, 308):
                target = response.headers["location"]
                continue
            break
        await self.load(target)

    # -------------------------------------------------------------- the websocket

    async def _open(self) -> None:
        parts = urlsplit(self.base)
        scheme = "wss" if self.secure else "ws"
        tokens = ["streamlit", self.http.cookies.get(XSRF_COOKIE) or "PLACEHOLDER_AUTH_TOKEN"]
        if self.last_session_id:
            tokens.append(self.last_session_id)
        self.ws = await connect(
            f"{scheme}://{parts.netloc}/_stcore/stream",
            subprotocols=tokens,  # the frontend passes its tokens as extra subprotocols; the server selects "streamlit"
            additional_headers={"Cookie": self._cookie_header()},
            origin=f"{parts.scheme}://{parts.netloc}",
            ssl=self.ssl,
            max_size=None,
            ping_interval=None,  # a browser sends no pings (it answers the server's)
            open_timeout=30,
        )
        if self.on_replica is not None and self.ws.response is not None:
            self.on_replica(self.ws.response.headers.get("X-Medrev-Upstream", ""))
        self.reader = asyncio.create_task(self._read(self.ws))

    async def _read(self, ws: ClientConnection) -> None:
        try:
            async for raw in ws:
                self.received += len(raw)
                msg = ForwardMsg()
                msg.ParseFromString(raw if isinstance(raw, bytes) else raw.encode())
                self.page.handle(msg, self.requested_fragment)
                if msg.WhichOneof("type") == "new_session":
                    self.requested_fragment = ""
                self.changed.set()
        except ConnectionClosed:
            pass
        finally:
            if self.ws is ws:
                self.ws = None
                if not self.closing:
                    self.last_session_id = self.page.session_id
                    self.reconnecting = asyncio.create_task(self._reconnect())
            self.changed.set()

    async def _reconnect(self) -> None:
        """What the frontend does when its websocket closes: wait for the server, reconnect, rerun."""
        self.figures.reconnects += 1
        delay = 0.0
        while True:
            if delay:
                await asyncio.sleep(delay * random.uniform(0.8, 1.2))
            delay = min(PING_MAX_S, max(PING_MIN_S, delay * 2))
            if not await self._server_ready():
                continue
            try:
                await self._open()
            except (OSError, InvalidHandshake, InvalidStatus, TimeoutError):
                continue
            break
        self.page.running = False
        await self._send_rerun(query=self.page.query, page_hash=self.page.page_hash, fragment="")

    async def leave(self) -> None:
        """The page is left (a navigation or the end): its websocket closes, nothing reconnects."""
        self.closing = True
        if self.reconnecting is not None:
            self.reconnecting.cancel()
            self.reconnecting = None
        if self.ws is not None:
            await self.ws.close()
        if self.reader is not None:
            await asyncio.gather(self.reader, return_exceptions=True)
        self.ws = None
        self.reader = None
        self.closing = False

    async def close(self) -> None:
        await self.leave()
        await self.http.aclose()

    async def _send_rerun(
        self,
        *,
        query: str,
        fragment: str,
        page_hash: str = "",
        page_name: str = "",
        triggers: list[WidgetState] = (),
    ) -> None:
        msg = BackMsg()
        rerun = msg.rerun_script
        rerun.query_string = query
        if page_hash:
            rerun.page_script_hash = page_hash
        if page_name:
            rerun.page_name = page_name
        if fragment:
            rerun.fragment_id = fragment
        for state in [*self.widgets.values(), *triggers]:
            rerun.widget_states.widgets.add().CopyFrom(state)
        rerun.cached_message_hashes.extend(self.page.cache)
        info = rerun.context_info
        info.timezone, info.timezone_offset, info.locale, info.color_scheme = "UTC", 0, "en-US", "light"
        info.is_embedded = False
        info.url = f"{self.base}{self.page.path if page_hash or not page_name else '/' + page_name}"
        self.requested_fragment = fragment
        if self.ws is None:
            return  # disconnected: the values are kept and go with the reconnect's rerun, as in the frontend
        with contextlib.suppress(ConnectionClosed):  # the reader reconnects
            await self.ws.send(msg.SerializeToString())

    async def act(
        self,
        *,
        values: list[WidgetState] = (),
        triggers: list[WidgetState] = (),
        fragment: str = "",
        page_hash: str | None = None,
        query: str | None = None,
    ) -> float:
        """A click: new widget values and triggers in a rerun; ms until that run (or the reconnect's) ended."""
        for state in values:
            self.widgets[state.id] = state
        started = time.perf_counter()
        if started >= self.figures.measure_from:
            self.figures.clicks += 1
        before = self.page.finished
        await self._send_rerun(
            query=self.page.query if query is None else query,
            fragment=fragment,
            page_hash=self.page.page_hash if page_hash is None else page_hash,
            triggers=list(triggers),
        )
        return await self.wait_run(before, started)

    async def wait_run(self, before: int, started: float) -> float:
        deadline = started + ACTION_TIMEOUT_S
        while self.page.finished <= before or self.page.running:
            if self.page.redirect is not None:
                break
            remaining = deadline - time.perf_counter()
            if remaining <= 0:
                raise NoAnswer(f"no answer within {ACTION_TIMEOUT_S:.0f} s")
            self.changed.clear()
            try:
                await asyncio.wait_for(self.changed.wait(), remaining)
            except TimeoutError:
                continue
        return (time.perf_counter() - started) * 1000


def text_value(widget_id: str, value: str) -> WidgetState:
    state = WidgetState(id=widget_id)
    state.string_value = value
    return state


def trigger(widget_id: str) -> WidgetState:
    state = WidgetState(id=widget_id)
    state.trigger_value = True
    return state


def json_value(widget_id: str, value: Any) -> WidgetState:
    state = WidgetState(id=widget_id)
    state.json_value = json.dumps(value, separators=(",", ":"))
    return state


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
        if reconnected and page.find("button", "Sign out") is None:
            self.figures.signed_out_after_reconnect += 1
            self._error("signed out after a reconnect")
            return False
        if page.panel() is None:
            self._error(f"the task is gone from the page: {page.problems() or page.faults}")
            return False
        self._show_panel()
        if reconnected:
            self.figures.drafts_checked += 1
            draft = self.panel.data.get("scores") or {}
            missing = [d for d in saved if d not in draft]
            if missing:
                self.figures.drafts_missing += 1
                self._error(f"draft lost after a reconnect: {missing}")
        return True

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
            if reconnected and page.find("button", "Sign out") is None:
                self.figures.signed_out_after_reconnect += 1
                self._error("signed out after a reconnect")
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
                self.figures.drafts_checked += 1
                missing = [d for d in saved if d not in (self.panel.data.get("scores") or {})]
                if missing:
                    self.figures.drafts_missing += 1
                    self._error(f"draft lost after a reconnect: {missing}")
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
