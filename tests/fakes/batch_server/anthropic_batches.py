"""Anthropic's Message Batches API, faked: create, retrieve, list, cancel, and the results at ``results_url``.

A batch carries its requests inline (``{custom_id, params}``); once it has ended its results are a JSONL
download, one ``succeeded`` / ``errored`` / ``expired`` / ``canceled`` result a request.
"""

from __future__ import annotations

import datetime as dt
import json
import time
from typing import Any

from tests.fakes.batch_server.core import Answer, BatchServerBase, FakeBatch, Handler, page

ANTHROPIC_ERRORS = {
    400: "invalid_request_error",
    404: "not_found_error",
    429: "rate_limit_error",
    500: "api_error",
    529: "overloaded_error",
}


class AnthropicBatches(BatchServerBase):
    """The ``/v1/messages/batches`` routes (holds: ``anthropic.create``, ``.create.after``, ``.poll``,
    ``.download``)."""

    def _route(self, method: str, route: str, query: dict[str, list[str]]) -> Handler | None:
        if route == "/v1/messages/batches":
            return self._anthropic_create if method == "POST" else self._anthropic_list
        if route.startswith("/v1/messages/batches/"):
            if route.endswith("/cancel"):
                return self._anthropic_cancel
            return self._anthropic_results if route.endswith("/results") else self._anthropic_get
        return super()._route(method, route, query)

    async def _anthropic_create(self, route: str, query: Any, raw: bytes) -> Answer:
        await self._hold("anthropic.create")
        body = json.loads(raw)
        requests = body.get("requests") or []
        refused = self._refuse_over_limit("anthropic", len(requests), len(raw))
        if refused:
            return refused
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

    async def _anthropic_get(self, route: str, query: Any, raw: bytes) -> Answer:
        batch = self.batches.get(route.split("/")[4])
        if batch is None:
            return self._error(404, "no such batch", "anthropic")
        await self._poll(batch, "anthropic.poll")
        return 200, self._anthropic_object(batch), {}

    async def _anthropic_list(self, route: str, query: Any, raw: bytes) -> Answer:
        batches, has_more = self._cursor_page("anthropic", query, "after_id")
        return 200, page([self._anthropic_object(b) for b in batches], has_more), {}

    async def _anthropic_cancel(self, route: str, query: Any, raw: bytes) -> Answer:
        batch = self.batches[route.split("/")[4]]
        self._cancel(batch)
        return 200, self._anthropic_object(batch), {}

    async def _anthropic_results(self, route: str, query: Any, raw: bytes) -> Answer:
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
