"""A browser tab on a real ``medrev app``, speaking Streamlit's websocket protocol as its frontend does.

Used by ``bench/panel_client.py``, whose simulated reviewers each work in one :class:`Tab`: its own cookie
jar, a page load (the document, ``/_stcore/health``, which sets the XSRF cookie, and
``/_stcore/host-config``), then Streamlit's websocket ``/_stcore/stream`` with the subprotocols the
frontend sends (``streamlit``, the XSRF cookie's value, and the last session id when it reconnects). It
sends ``BackMsg.rerun_script`` with the widget states the frontend would send and reads every
``ForwardMsg`` (deltas, cached-message references, page changes, redirects) into a :class:`Page` that
keeps the page's elements as the frontend does, so the widgets a reviewer acts on are found by their
labels in what the server drew.

When the websocket drops, the tab does what the frontend does: it pings ``/_stcore/health`` with a
growing back-off until the server answers, opens a new websocket (same cookies, the last session id)
and asks for a rerun with the widget values it holds. No browser code runs here: what a browser draws,
fetches as static files or runs as JavaScript is not simulated.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import random
import ssl
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

import httpx
from streamlit.proto.BackMsg_pb2 import BackMsg
from streamlit.proto.Element_pb2 import Element
from streamlit.proto.ForwardMsg_pb2 import ForwardMsg
from streamlit.proto.WidgetStates_pb2 import WidgetState
from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed, InvalidHandshake, InvalidStatus

if TYPE_CHECKING:
    from panel_client import Figures

PANEL_COMPONENT = "medrev_score_panel"
XSRF_COOKIE = "_streamlit_xsrf"
ACTION_TIMEOUT_S = 90.0  # no answer to a click within this long: the reviewer sees a hung page
PING_MIN_S, PING_MAX_S = 0.5, 30.0  # the frontend's reconnect back-off, with jitter


class NoAnswer(Exception):
    """The server did not finish the run a click started in time."""


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

