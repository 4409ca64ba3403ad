"""Gemini's batch mode, faked: ``:batchGenerateContent``, the batch operation's get, list and cancel.

A batch carries its requests inline, each with the caller's ``metadata``; once it has succeeded the
operation's metadata holds the inlined responses (an answer or an error a request, with that metadata).
"""

from __future__ import annotations

import datetime as dt
import json
import time
from typing import Any

from tests.fakes.batch_server.core import Answer, BatchServerBase, FakeBatch, Handler

GEMINI_STATES = {
    "pending": "BATCH_STATE_PENDING",
    "running": "BATCH_STATE_RUNNING",
    "succeeded": "BATCH_STATE_SUCCEEDED",
    "expired": "BATCH_STATE_EXPIRED",
    "cancelled": "BATCH_STATE_CANCELLED",
}


class GeminiBatches(BatchServerBase):
    """The Gemini batch routes (holds: ``google.create``, ``.create.after``, ``.poll``).

    Its routes come before OpenAI's: both live under ``/v1/batches`` (Gemini's with the API version the SDK
    chose, v1 or v1beta).
    """

    def _route(self, method: str, route: str, query: dict[str, list[str]]) -> Handler | None:
        parts = route.split("/")
        # Gemini's batch names are batches/gb..., its listing is paged by pageSize, which tells them from
        # OpenAI's /v1/batches.
        gemini = len(parts) >= 3 and parts[1] in ("v1", "v1beta") and parts[2] == "batches"
        if gemini and ((len(parts) == 3 and "pageSize" in query) or (len(parts) == 4 and parts[3].startswith("gb"))):
            if len(parts) == 3:
                return self._google_list
            return self._google_cancel if route.endswith(":cancel") else self._google_get
        if route.endswith(":batchGenerateContent") and method == "POST":
            return self._google_create
        return super()._route(method, route, query)

    async def _google_create(self, route: str, query: Any, raw: bytes) -> Answer:
        await self._hold("google.create")
        body = json.loads(raw)
        batch_body = body.get("batch") or {}
        model = route.rsplit("/", 1)[-1].split(":", 1)[0]
        requests = ((batch_body.get("inputConfig") or {}).get("requests") or {}).get("requests") or []
        refused = self._refuse_over_limit("google", len(requests), len(raw))
        if refused:
            return refused
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

    async def _google_get(self, route: str, query: Any, raw: bytes) -> Answer:
        name = "/".join(route.split("/")[2:4])
        batch = self.batches.get(name)
        if batch is None:
            return self._error(404, "no such batch", "google")
        await self._poll(batch, "google.poll")
        return 200, self._google_object(batch), {}

    async def _google_list(self, route: str, query: Any, raw: bytes) -> Answer:
        return 200, {"operations": [self._google_object(b) for b in self._newest_first("google")]}, {}

    async def _google_cancel(self, route: str, query: Any, raw: bytes) -> Answer:
        name = "/".join(route.split("/")[2:4]).removesuffix(":cancel")
        self._cancel(self.batches[name])
        return 200, {}, {}
