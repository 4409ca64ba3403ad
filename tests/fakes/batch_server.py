"""A loopback fake of the three batch APIs (OpenAI Files + Batches, Anthropic Message Batches, Gemini batch mode).

Why a fake on a real socket: what matters in a batch run (the write-ahead journal, finding a batch after
a kill, never submitting a key twice) only shows when a real SDK talks to a server that keeps state across
processes. ``FakeBatchServer`` extends ``FakeOpenAIServer`` (so the same server also answers synchronous
calls, for the synchronous fallback and for comparing the two paths): every request line of a batch is
answered by the same *policy* as a synchronous call, when the batch is created.

What it models:

- uploads (multipart ``POST /v1/files``), file listing and content; batch create, retrieve, list (newest
  first) and cancel for each wire; ``results_url`` for Anthropic and inline responses for Gemini;
- status transitions on each status request (``steps`` polls until the batch ends);
- per-request outcomes: the policy's reply (a 200 answer, or an HTTP error that becomes an errored line),
  and ``expire(received)`` for requests the batch does not reach before its window closes;
- limits: a batch over ``limits[wire]`` (requests, bytes) is refused with HTTP 400;
- ``hold``: one stage at which the server stops answering (``<wire>.upload``, ``.upload.after``,
  ``.create``, ``.create.after``, ``.poll``, ``.download``), setting ``held`` so a test can kill the
  client right there; ``.after`` stages have done their work before holding, the others have not;
- ``fail_after_create``: wires whose next create is performed and then answered with HTTP 500 (a
  response lost on the way back), so the client cannot know the batch exists unless it looks;
- ``submitted``: how many times each request (by content, ``request_key``) was put in a created batch,
  the count the "never paid twice" tests assert on.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import itertools
import json
import threading
import time
from collections import Counter
from collections.abc import Callable
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
ANTHROPIC_ERRORS = {
    400: "invalid_request_error",
    404: "not_found_error",
    429: "rate_limit_error",
    500: "api_error",
    529: "overloaded_error",
}
GEMINI_STATES = {
    "pending": "BATCH_STATE_PENDING",
    "running": "BATCH_STATE_RUNNING",
    "succeeded": "BATCH_STATE_SUCCEEDED",
    "expired": "BATCH_STATE_EXPIRED",
    "cancelled": "BATCH_STATE_CANCELLED",
}


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


class FakeBatchServer(FakeOpenAIServer):
    """``FakeOpenAIServer`` plus the batch endpoints of OpenAI, Anthropic and Gemini (see the module docstring)."""

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

    def _route(self, method: str, route: str, query: dict[str, list[str]]):
        parts = route.split("/")
        # Gemini paths carry the API version the SDK chose (v1 or v1beta); its batch names are batches/gb...,
        # its listing is paged by pageSize, which tells them from OpenAI's /v1/batches.
        gemini = len(parts) >= 3 and parts[1] in ("v1", "v1beta") and parts[2] == "batches"
        if gemini and ((len(parts) == 3 and "pageSize" in query) or (len(parts) == 4 and parts[3].startswith("gb"))):
            if len(parts) == 3:
                return self._google_list
            return self._google_cancel if route.endswith(":cancel") else self._google_get
        if route == "/v1/files" and method == "POST":
            return self._openai_upload
        if route == "/v1/files" and method == "GET":
            return self._openai_files
        if route.startswith("/v1/files/") and route.endswith("/content") and method == "GET":
            return self._openai_content
        if route == "/v1/batches":
            return self._openai_create if method == "POST" else self._openai_list
        if route.startswith("/v1/batches/"):
            return self._openai_cancel if route.endswith("/cancel") else self._openai_get
        if route == "/v1/messages/batches":
            return self._anthropic_create if method == "POST" else self._anthropic_list
        if route.startswith("/v1/messages/batches/"):
            if route.endswith("/cancel"):
                return self._anthropic_cancel
            return self._anthropic_results if route.endswith("/results") else self._anthropic_get
        if route.endswith(":batchGenerateContent") and method == "POST":
            return self._google_create
        return None

    def _lost(self, wire: str) -> tuple[int, dict[str, Any], dict[str, str]] | None:
        """HTTP 500 for a create the server did perform, once per wire in ``fail_after_create``."""
        if wire not in self.fail_after_create:
            return None
        self.fail_after_create.discard(wire)
        return 500, json.loads(_error_body("the answer was lost", 500, wire)), {}

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

    def _over_limit(self, wire: str, count: int, size: int) -> str | None:
        max_requests, max_bytes = self.limits[wire]
        if count > max_requests:
            return f"a batch holds at most {max_requests} requests, this one has {count}"
        if size > max_bytes:
            return f"a batch holds at most {max_bytes} bytes, this one has {size}"
        return None

    # -- OpenAI ------------------------------------------------------------------------------
    async def _openai_upload(self, route: str, query: Any, raw: bytes):
        await self._hold("openai.upload")
        fields = _multipart(raw)
        data, filename = fields.get("file", (b"", None))
        file_id = self._new_id("file-")
        self.files[file_id] = {
            "data": data,
            "filename": filename,
            "purpose": fields.get("purpose", (b"", None))[0].decode(),
            "created_at": int(time.time()),
        }
        await self._hold("openai.upload.after")
        return 200, self._file_object(file_id), {}

    def _file_object(self, file_id: str) -> dict[str, Any]:
        f = self.files[file_id]
        return {
            "id": file_id,
            "object": "file",
            "bytes": len(f["data"]),
            "created_at": f["created_at"],
            "filename": f["filename"],
            "purpose": f["purpose"],
            "status": "processed",
        }

    async def _openai_files(self, route: str, query: Any, raw: bytes):
        purpose = (query.get("purpose") or [None])[0]
        data = [self._file_object(i) for i in reversed(self.files) if purpose in (None, self.files[i]["purpose"])]
        return 200, {"object": "list", "data": data, "has_more": False}, {}

    async def _openai_content(self, route: str, query: Any, raw: bytes):
        await self._hold("openai.download")
        file_id = route.split("/")[3]
        if file_id not in self.files:
            return 404, json.loads(_error_body(f"no file {file_id}", 404)), {}
        return 200, self.files[file_id]["data"], {}

    async def _openai_create(self, route: str, query: Any, raw: bytes):
        await self._hold("openai.create")
        body = json.loads(raw)
        source = self.files.get(body.get("input_file_id"))
        if source is None:
            return 404, json.loads(_error_body("no such input file", 404)), {}
        rows = [json.loads(line) for line in source["data"].splitlines() if line.strip()]
        problem = self._over_limit("openai", len(rows), len(source["data"]))
        if problem:
            self.refused.append(("openai", problem))
            return 400, json.loads(_error_body(problem, 400)), {}
        lines = [self._answer(row["custom_id"], row["body"], "openai") for row in rows]
        batch = FakeBatch(
            self._new_id("batch_"),
            "openai",
            time.time(),
            lines,
            tag=(body.get("metadata") or {}).get("medrev_entry"),
            input_file_id=body["input_file_id"],
            metadata=body.get("metadata") or {},
        )
        self._register(batch)
        await self._hold("openai.create.after")
        return self._lost("openai") or (200, self._openai_object(batch), {})

    def _openai_object(self, batch: FakeBatch) -> dict[str, Any]:
        ended = batch.ended(self.steps)
        if batch.cancelled:
            status = "cancelled" if ended else "cancelling"
        elif ended:
            status = "expired" if batch.expired else "completed"
        else:
            status = "validating" if batch.polls == 0 else "in_progress"
        done = len(batch.lines) if ended else len(batch.lines) * batch.polls // max(self.steps, 1)
        failed = sum(line.outcome != "succeeded" for line in batch.lines) if ended else 0
        if ended and batch.output_file_id is None:
            self._openai_outputs(batch)
        return {
            "id": batch.id,
            "object": "batch",
            "endpoint": "/v1/chat/completions",
            "input_file_id": batch.input_file_id,
            "completion_window": "24h",
            "status": status,
            "output_file_id": batch.output_file_id,
            "error_file_id": batch.error_file_id,
            "created_at": int(batch.created),
            "metadata": batch.metadata,
            "request_counts": {"total": len(batch.lines), "completed": done - failed, "failed": failed},
        }

    def _openai_outputs(self, batch: FakeBatch) -> None:
        output, errors = [], []
        for index, line in enumerate(batch.lines):
            row: dict[str, Any] = {"id": f"batch_req_{index}", "custom_id": line.custom_id}
            if batch.cancelled:
                row |= {"response": None, "error": {"code": "batch_cancelled", "message": "Batch was cancelled."}}
                errors.append(row)
            elif line.outcome == "succeeded":
                row |= {"response": {"status_code": 200, "request_id": "r", "body": line.body}, "error": None}
                output.append(row)
            elif line.outcome == "expired":
                message = "This request could not be executed before the completion window expired."
                row |= {"response": None, "error": {"code": "batch_expired", "message": message}}
                errors.append(row)
            else:
                body = json.loads(_error_body(line.error, line.status))
                row |= {"response": {"status_code": line.status, "request_id": "r", "body": body}, "error": None}
                errors.append(row)
        for rows, name in ((output, "output_file_id"), (errors, "error_file_id")):
            if rows:
                file_id = self._new_id("file-")
                data = "".join(json.dumps(r) + "\n" for r in rows).encode()
                self.files[file_id] = {
                    "data": data,
                    "filename": f"{batch.id}_{name}.jsonl",
                    "purpose": "batch_output",
                    "created_at": int(time.time()),
                }
                setattr(batch, name, file_id)

    async def _openai_get(self, route: str, query: Any, raw: bytes):
        batch = self.batches.get(route.split("/")[3])
        if batch is None:
            return 404, json.loads(_error_body("no such batch", 404)), {}
        await self._poll(batch, "openai.poll")
        return 200, self._openai_object(batch), {}

    async def _poll(self, batch: FakeBatch, stage: str) -> None:
        if self.hold == stage and batch.polls >= self.hold_after_polls:
            await self._hold(stage)
        batch.polls += 1
        if batch.cancelled:
            batch.cancel_seen += 1

    async def _openai_list(self, route: str, query: Any, raw: bytes):
        after = (query.get("after") or [None])[0]
        ordered = [
            b
            for b in sorted(self.batches.values(), key=lambda b: (b.created, b.id), reverse=True)
            if b.wire == "openai"
        ]
        if after:
            ids = [b.id for b in ordered]
            ordered = ordered[ids.index(after) + 1 :] if after in ids else []
        limit = int((query.get("limit") or ["20"])[0])
        page = ordered[:limit]
        data = [self._openai_object(b) for b in page]
        return 200, _page(data, len(ordered) > limit, object="list"), {}

    async def _openai_cancel(self, route: str, query: Any, raw: bytes):
        batch = self.batches[route.split("/")[3]]
        if not batch.ended(self.steps):
            batch.cancelled = True
            self.cancelled.append(batch.id)
        return 200, self._openai_object(batch), {}

    # -- Anthropic ---------------------------------------------------------------------------
    async def _anthropic_create(self, route: str, query: Any, raw: bytes):
        await self._hold("anthropic.create")
        body = json.loads(raw)
        requests = body.get("requests") or []
        problem = self._over_limit("anthropic", len(requests), len(raw))
        if problem:
            self.refused.append(("anthropic", problem))
            return 400, json.loads(_error_body(problem, 400, "anthropic")), {}
        lines = [self._answer(r["custom_id"], r["params"], "anthropic") for r in requests]
        batch = FakeBatch(self._new_id("msgbatch_"), "anthropic", time.time(), lines)
        self._register(batch)
        await self._hold("anthropic.create.after")
        return self._lost("anthropic") or (200, self._anthropic_object(batch), {})

    def _anthropic_object(self, batch: FakeBatch) -> dict[str, Any]:
        ended = batch.ended(self.steps)
        counts = {"processing": 0, "succeeded": 0, "errored": 0, "canceled": 0, "expired": 0}
        for line in batch.lines:
            if not ended:
                counts["processing"] += 1
            elif batch.cancelled:
                counts["canceled"] += 1
            else:
                counts[line.outcome] += 1
        created = dt.datetime.fromtimestamp(batch.created, dt.UTC)
        state = "ended" if ended else ("canceling" if batch.cancelled else "in_progress")
        return {
            "id": batch.id,
            "type": "message_batch",
            "processing_status": state,
            "request_counts": counts,
            "created_at": created.isoformat().replace("+00:00", "Z"),
            "expires_at": (created + dt.timedelta(days=1)).isoformat().replace("+00:00", "Z"),
            "ended_at": None,
            "archived_at": None,
            "cancel_initiated_at": None,
            "results_url": f"http://{self.host}:{self.port}/v1/messages/batches/{batch.id}/results" if ended else None,
        }

    async def _anthropic_get(self, route: str, query: Any, raw: bytes):
        batch = self.batches.get(route.split("/")[4])
        if batch is None:
            return 404, json.loads(_error_body("no such batch", 404, "anthropic")), {}
        await self._poll(batch, "anthropic.poll")
        return 200, self._anthropic_object(batch), {}

    async def _anthropic_list(self, route: str, query: Any, raw: bytes):
        after = (query.get("after_id") or [None])[0]
        ordered = [
            b
            for b in sorted(self.batches.values(), key=lambda b: (b.created, b.id), reverse=True)
            if b.wire == "anthropic"
        ]
        if after:
            ids = [b.id for b in ordered]
            ordered = ordered[ids.index(after) + 1 :] if after in ids else []
        limit = int((query.get("limit") or ["20"])[0])
        data = [self._anthropic_object(b) for b in ordered[:limit]]
        return 200, _page(data, len(ordered) > limit), {}

    async def _anthropic_cancel(self, route: str, query: Any, raw: bytes):
        batch = self.batches[route.split("/")[4]]
        if not batch.ended(self.steps):
            batch.cancelled = True
            self.cancelled.append(batch.id)
        return 200, self._anthropic_object(batch), {}

    async def _anthropic_results(self, route: str, query: Any, raw: bytes):
        await self._hold("anthropic.download")
        batch = self.batches[route.split("/")[4]]
        rows = []
        for line in batch.lines:
            if batch.cancelled:
                result: dict[str, Any] = {"type": "canceled"}
            elif line.outcome == "succeeded":
                result = {"type": "succeeded", "message": line.body}
            elif line.outcome == "expired":
                result = {"type": "expired"}
            else:
                kind = ANTHROPIC_ERRORS.get(line.status, "api_error")
                result = {"type": "errored", "error": {"type": "error", "error": {"type": kind, "message": line.error}}}
            rows.append({"custom_id": line.custom_id, "result": result})
        return 200, "".join(json.dumps(r) + "\n" for r in rows).encode(), {}

    # -- Gemini ------------------------------------------------------------------------------
    async def _google_create(self, route: str, query: Any, raw: bytes):
        await self._hold("google.create")
        body = json.loads(raw)
        batch_body = body.get("batch") or {}
        model = route.rsplit("/", 1)[-1].split(":", 1)[0]
        requests = ((batch_body.get("inputConfig") or {}).get("requests") or {}).get("requests") or []
        problem = self._over_limit("google", len(requests), len(raw))
        if problem:
            self.refused.append(("google", problem))
            return 400, json.loads(_error_body(problem, 400, "google")), {}
        lines = []
        for index, item in enumerate(requests):
            request = dict(item.get("request") or {})
            request.setdefault("model", model)
            metadata = item.get("metadata")
            custom = str((metadata or {}).get("key", index))
            lines.append(self._answer(custom, request, "google", metadata))
        batch = FakeBatch(
            self._new_id("batches/gb"), "google", time.time(), lines, tag=batch_body.get("displayName"), model=model
        )
        self._register(batch)
        await self._hold("google.create.after")
        return self._lost("google") or (200, self._google_object(batch), {})

    def _google_object(self, batch: FakeBatch) -> dict[str, Any]:
        ended = batch.ended(self.steps)
        if batch.cancelled and ended:
            state = "cancelled"
        elif ended:
            state = "expired" if batch.expired else "succeeded"
        else:
            state = "pending" if batch.polls == 0 else "running"
        created = dt.datetime.fromtimestamp(batch.created, dt.UTC).isoformat().replace("+00:00", "Z")
        metadata: dict[str, Any] = {
            "@type": "type.googleapis.com/google.ai.generativelanguage.v1main.GenerateContentBatch",
            "model": f"models/{batch.model}",
            "displayName": batch.tag,
            "state": GEMINI_STATES[state],
            "createTime": created,
            "updateTime": created,
        }
        if ended and not batch.cancelled:
            responses = []
            for line in batch.lines:
                if line.outcome == "succeeded":
                    responses.append({"response": line.body, "metadata": line.metadata})
                elif line.outcome == "errored":
                    responses.append({"error": {"code": line.status, "message": line.error}, "metadata": line.metadata})
            metadata["output"] = {"inlinedResponses": {"inlinedResponses": responses}}
        return {"name": batch.id, "metadata": metadata, "done": ended}

    async def _google_get(self, route: str, query: Any, raw: bytes):
        name = "/".join(route.split("/")[2:4])
        batch = self.batches.get(name)
        if batch is None:
            return 404, json.loads(_error_body("no such batch", 404, "google")), {}
        await self._poll(batch, "google.poll")
        return 200, self._google_object(batch), {}

    async def _google_list(self, route: str, query: Any, raw: bytes):
        ordered = [
            b
            for b in sorted(self.batches.values(), key=lambda b: (b.created, b.id), reverse=True)
            if b.wire == "google"
        ]
        return 200, {"operations": [self._google_object(b) for b in ordered]}, {}

    async def _google_cancel(self, route: str, query: Any, raw: bytes):
        name = "/".join(route.split("/")[2:4]).removesuffix(":cancel")
        batch = self.batches[name]
        if not batch.ended(self.steps):
            batch.cancelled = True
            self.cancelled.append(batch.id)
        return 200, {}, {}


def _page(data: list[dict[str, Any]], has_more: bool, **extra: Any) -> dict[str, Any]:
    """One page of a cursor-paged listing (OpenAI and Anthropic share the shape)."""
    first, last = (data[0]["id"], data[-1]["id"]) if data else (None, None)
    return {**extra, "data": data, "has_more": has_more, "first_id": first, "last_id": last}


def _multipart(raw: bytes) -> dict[str, tuple[bytes, str | None]]:
    """The fields of a multipart/form-data body: name -> (content, filename). The boundary is its first line."""
    first, _, _ = raw.partition(b"\r\n")
    boundary = first.strip()
    fields: dict[str, tuple[bytes, str | None]] = {}
    for part in raw.split(boundary)[1:]:
        if part.startswith(b"--"):
            break
        head, _, content = part.removeprefix(b"\r\n").removesuffix(b"\r\n").partition(b"\r\n\r\n")
        header = head.decode("latin-1")
        name = _param(header, "name")
        if name:
            fields[name] = (content, _param(header, "filename"))
    return fields


def _param(header: str, name: str) -> str | None:
    marker = f'{name}="'
    for piece in header.split(";"):
        piece = piece.strip()
        if piece.startswith(marker):
            return piece[len(marker) : -1]
    return None
