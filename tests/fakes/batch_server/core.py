"""What the three fake batch APIs share: the batches, their lines, the state a test observes, the dispatch.

``BatchServerBase`` extends ``FakeOpenAIServer`` with the batch store and the steps every wire takes the
same way: each request line answered by the policy when the batch is created (``_answer``), the size
limits, the stage holds, a create whose answer is lost, status polls, cancelling, newest-first listings.
Each wire (``openai_batches``, ``anthropic_batches``, ``gemini_batches``) adds its routes by overriding
``_route`` and falling back to ``super()._route``; a route no wire claims goes to the synchronous server.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import threading
import time
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qs, urlsplit

from tests.fakes.openai_server import (
    FakeOpenAIServer,
    Policy,
    Received,
    Reply,
    _anthropic_message,
    _completion,
    _error_body,
    _gemini_response,
    _write,
    echo_policy,
    request_key,
)

LIMITS = {
    "openai": (50_000, 200 * 1024 * 1024),
    "anthropic": (100_000, 256 * 1024 * 1024),
    "google": (1_000_000, 20 * 1024 * 1024),
}

Answer = tuple[int, Any, dict[str, str]]  # status, JSON body (or bytes as they are), headers
Handler = Callable[[str, dict[str, list[str]], bytes], Awaitable[Answer]]


@dataclass
class Line:
    """One request of a batch and what the policy made of it (at creation)."""

    custom_id: str
    key: str
    outcome: str  # succeeded | errored | expired
    body: dict[str, Any] | None = None
    status: int = 200
    error: str = ""
    metadata: dict[str, Any] | None = None


@dataclass
class FakeBatch:
    id: str
    wire: str
    created: float
    lines: list[Line]
    tag: str | None = None  # OpenAI metadata medrev_entry / Gemini display name
    input_file_id: str | None = None
    model: str | None = None
    polls: int = 0
    cancelled: bool = False
    cancel_seen: int = 0
    metadata: dict[str, Any] = field(default_factory=dict)
    output_file_id: str | None = None
    error_file_id: str | None = None

    def ended(self, steps: int) -> bool:
        return (self.cancelled and self.cancel_seen >= 1) or self.polls >= steps

    @property
    def expired(self) -> bool:
        return any(line.outcome == "expired" for line in self.lines)


class BatchServerBase(FakeOpenAIServer):
    """The batch store and the steps all wires share (see the module docstring); no routes of its own."""

    def __init__(
        self,
        policy: Policy = echo_policy,
        *,
        steps: int = 2,
        expire: Callable[[Received], bool] | None = None,
        limits: dict[str, tuple[int, int]] | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(policy, **kwargs)
        self.steps = steps
        self.expire = expire or (lambda received: False)
        self.limits = {**LIMITS, **(limits or {})}
        self.files: dict[str, dict[str, Any]] = {}
        self.batches: dict[str, FakeBatch] = {}
        self.submitted: Counter[str] = Counter()
        self.refused: list[tuple[str, str]] = []
        self.cancelled: list[str] = []
        self.fail_after_create: set[str] = set()
        self.hold: str | None = None
        self.hold_after_polls = 1
        self.held = threading.Event()
        self._ids = itertools.count(1)
        self._batch_lock = threading.Lock()

    # -- observation -------------------------------------------------------------------------
    def twice(self) -> dict[str, int]:
        """Requests put in more than one created batch (key -> count): what a test wants empty."""
        with self._batch_lock:
            return {key: n for key, n in self.submitted.items() if n > 1}

    def batch_sizes(self, wire: str | None = None) -> list[int]:
        with self._batch_lock:
            return [len(b.lines) for b in self.batches.values() if wire is None or b.wire == wire]

    # -- routing -----------------------------------------------------------------------------
    async def _respond(self, method: str, path: str, raw: bytes, writer: asyncio.StreamWriter) -> bool:
        url = urlsplit(path)
        route, query = url.path.rstrip("/"), parse_qs(url.query)
        handler = self._route(method, route, query)
        if handler is None:
            return await super()._respond(method, path, raw, writer)
        status, body, headers = await handler(route, query, raw)
        if isinstance(body, bytes):
            await _write(writer, status, headers, body)
        else:
            await _write(writer, status, headers, json.dumps(body).encode())
        return True

    def _route(self, method: str, route: str, query: dict[str, list[str]]) -> Handler | None:
        """The handler of a batch route; each wire's class claims its own before this (none here)."""
        return None

    # -- steps every wire takes --------------------------------------------------------------
    @staticmethod
    def _error(status: int, message: str, wire: str = "openai") -> Answer:
        """An HTTP error in the wire's own error shape."""
        return status, json.loads(_error_body(message, status, wire)), {}

    def _lost(self, wire: str) -> Answer | None:
        """HTTP 500 for a create the server did perform, once per wire in ``fail_after_create``."""
        if wire not in self.fail_after_create:
            return None
        self.fail_after_create.discard(wire)
        return self._error(500, "the answer was lost", wire)

    async def _hold(self, stage: str) -> None:
        """Stop answering at ``stage`` when a test asked to (the client is then killed by the test)."""
        if self.hold == stage:
            self.held.set()
            await asyncio.sleep(3600)

    def _new_id(self, prefix: str) -> str:
        return f"{prefix}{next(self._ids):05d}"

    def _answer(self, custom: str, body: dict[str, Any], wire: str, metadata: dict[str, Any] | None = None) -> Line:
        """Run one batched request through the policy, as a synchronous call of the same body would be."""
        key = request_key(body)
        with self._lock:
            self._seen[key] += 1
            received = Received(-1, f"batch:{wire}", body, key, self._seen[key], time.monotonic(), wire)
        if self.expire(received):
            return Line(custom, key, "expired", metadata=metadata)
        reply: Reply = self.policy(received)
        if reply.status != 200:
            return Line(custom, key, "errored", status=reply.status, error=reply.error, metadata=metadata)
        build = {"openai": _completion, "anthropic": _anthropic_message, "google": _gemini_response}[wire]
        return Line(custom, key, "succeeded", body=build(reply, body), metadata=metadata)

    def _register(self, batch: FakeBatch) -> None:
        with self._batch_lock:
            self.batches[batch.id] = batch
            for line in batch.lines:
                self.submitted[line.key] += 1

    def _refuse_over_limit(self, wire: str, count: int, size: int) -> Answer | None:
        """HTTP 400 (recorded in ``refused``) for a batch over the wire's limits; None for one within them."""
        max_requests, max_bytes = self.limits[wire]
        if count > max_requests:
            problem = f"a batch holds at most {max_requests} requests, this one has {count}"
        elif size > max_bytes:
            problem = f"a batch holds at most {max_bytes} bytes, this one has {size}"
        else:
            return None
        self.refused.append((wire, problem))
        return self._error(400, problem, wire)

    async def _poll(self, batch: FakeBatch, stage: str) -> None:
        if self.hold == stage and batch.polls >= self.hold_after_polls:
            await self._hold(stage)
        batch.polls += 1
        if batch.cancelled:
            batch.cancel_seen += 1

    def _cancel(self, batch: FakeBatch) -> None:
        """Ask for the batch to end; one that has ended already stays as it is."""
        if not batch.ended(self.steps):
            batch.cancelled = True
            self.cancelled.append(batch.id)

    def _newest_first(self, wire: str) -> list[FakeBatch]:
        return sorted(
            (b for b in self.batches.values() if b.wire == wire), key=lambda b: (b.created, b.id), reverse=True
        )

    def _cursor_page(self, wire: str, query: dict[str, list[str]], cursor: str) -> tuple[list[FakeBatch], bool]:
        """The wire's batches newest first after the id in ``query[cursor]``, up to ``limit``; and whether more."""
        ordered = self._newest_first(wire)
        after = (query.get(cursor) or [None])[0]
        if after:
            ids = [b.id for b in ordered]
            ordered = ordered[ids.index(after) + 1 :] if after in ids else []
        limit = int((query.get("limit") or ["20"])[0])
        return ordered[:limit], len(ordered) > limit


def page(data: list[dict[str, Any]], has_more: bool, **extra: Any) -> dict[str, Any]:
    """One page of a cursor-paged listing (OpenAI and Anthropic share the shape)."""
    first, last = (data[0]["id"], data[-1]["id"]) if data else (None, None)
    return {**extra, "data": data, "has_more": has_more, "first_id": first, "last_id": last}
