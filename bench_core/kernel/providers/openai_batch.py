"""OpenAI's Batch API (Files + Batches), which vLLM and other OpenAI-compatible servers offer too.

A batch is a JSONL file of ``{"custom_id", "method": "POST", "url": "/v1/chat/completions", "body"}``
lines uploaded with ``purpose="batch"``, then ``POST /batches`` with its ``input_file_id``,
``endpoint`` and ``completion_window="24h"``. Statuses: validating, in_progress, finalizing, then
completed, failed, expired or cancelled (cancelling on the way). Results are two JSONL files:
``output_file_id`` (answered requests, each ``{"custom_id", "response": {"status_code", "body"}}``) and
``error_file_id`` (requests that failed, expired or were cancelled). Limits: 50,000 requests and
200 MB per input file.

Finding a batch after a kill: the uploaded file is named ``medrev-<entry>.jsonl`` and the batch carries
``metadata={"medrev_entry": <entry>}``; a batch is also recognised by its ``input_file_id``, so servers
that drop metadata are covered as long as the file id was journaled.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Sequence
from typing import Any

from bench_core.kernel.providers.base import ChatRequest, ChatResponse, ProviderError, attr
from bench_core.kernel.providers.batch import (
    CANCELED,
    ERRORED,
    EXPIRED,
    SUCCEEDED,
    TAG,
    BatchLimits,
    BatchStatus,
    FoundBatch,
    ResultLine,
    SDKBatches,
)
from bench_core.kernel.providers.openai_compat import OpenAICompatModel, _status_error, parse_completion

CHAT_URL = "/v1/chat/completions"
LIMITS = BatchLimits(max_requests=50_000, max_bytes=200 * 1024 * 1024)
ENDED = {"completed", "failed", "expired", "cancelled"}
METADATA_KEY = f"{TAG}_entry"


class OpenAIBatches(SDKBatches):
    """The Batch API of an ``OpenAICompatModel``'s server, through the same SDK client."""

    provider = "openai"
    limits = LIMITS
    needs_upload = True
    model: OpenAICompatModel

    def request_line(self, custom_id: str, request: ChatRequest) -> dict[str, Any]:
        return {"custom_id": custom_id, "method": "POST", "url": CHAT_URL, "body": self.model.request_body(request)}

    async def upload(self, entry: str, lines: Sequence[dict[str, Any]]) -> str | None:
        data = "".join(json.dumps(line, ensure_ascii=False) + "\n" for line in lines).encode()
        uploaded = await self.call(
            self.client.files.create(
                file=(f"{TAG}-{entry}.jsonl", data, "application/jsonl"), purpose="batch", timeout=self.timeout
            )
        )
        return str(uploaded.id)

    async def create(self, entry: str, lines: Sequence[dict[str, Any]], file_id: str | None) -> str:
        if file_id is None:
            raise ValueError("an OpenAI batch needs its uploaded file")
        batch = await self.call(
            self.client.batches.create(
                input_file_id=file_id,
                endpoint=CHAT_URL,
                completion_window="24h",
                metadata={METADATA_KEY: entry},
                timeout=self.timeout,
            )
        )
        return str(batch.id)

    async def find_upload(self, entry: str, size: int) -> str | None:
        name = f"{TAG}-{entry}.jsonl"
        try:
            pages = self.client.files.list(purpose="batch", timeout=self.timeout)
            async for item in pages:
                if attr(item, "filename") == name and (attr(item, "bytes") in (None, size)):
                    return str(attr(item, "id"))
        except Exception as exc:  # a server without file listing: the entry is uploaded again
            if _not_supported(exc):
                return None
            raise self.wrapped(exc) from exc
        return None

    async def find_batch(
        self, entry: str, *, file_id: str | None, planned_at: dt.datetime, n_requests: int, claimed: set[str]
    ) -> FoundBatch | None:
        oldest = planned_at.timestamp() - 3600  # listings are newest first; nothing of ours is older
        try:
            async for batch in self.client.batches.list(limit=100, timeout=self.timeout):
                metadata = attr(batch, "metadata") or {}
                ours = (file_id is not None and attr(batch, "input_file_id") == file_id) or (
                    metadata.get(METADATA_KEY) == entry
                )
                if ours and str(attr(batch, "id")) not in claimed:
                    return FoundBatch(str(attr(batch, "id")))
                created = attr(batch, "created_at")
                if isinstance(created, int | float) and created < oldest:
                    break
        except Exception as exc:
            raise self.wrapped(exc) from exc
        return None

    async def status(self, batch_id: str) -> BatchStatus:
        batch = await self.call(self.client.batches.retrieve(batch_id, timeout=self.timeout))
        counts = attr(batch, "request_counts")
        numbers = {name: int(attr(counts, name) or 0) for name in ("total", "completed", "failed")} if counts else {}
        state = str(attr(batch, "status"))
        errors = attr(attr(batch, "errors"), "data") or []
        return BatchStatus(
            state=state,
            ended=state in ENDED,
            total=numbers.get("total"),
            done=numbers.get("completed", 0) + numbers.get("failed", 0) if numbers else None,
            counts=numbers,
            extra={
                "output_file_id": attr(batch, "output_file_id"),
                "error_file_id": attr(batch, "error_file_id"),
                "errors": [str(attr(e, "message") or attr(e, "code") or e) for e in errors],
                "missing": {"expired": EXPIRED, "cancelled": CANCELED}.get(state, ERRORED),
            },
        )

    async def results(self, batch_id: str, status: BatchStatus) -> list[ResultLine]:
        lines: list[ResultLine] = []
        for key in ("output_file_id", "error_file_id"):
            file_id = status.extra.get(key)
            if not file_id:
                continue
            content = await self.call(self.client.files.content(file_id, timeout=self.timeout))
            for raw in content.content.splitlines():
                if raw.strip():
                    lines.append(_result_line(json.loads(raw), status.state))
        return lines

    async def cancel(self, batch_id: str) -> None:
        await self.call(self.client.batches.cancel(batch_id, timeout=self.timeout))

    def wrapped(self, exc: Exception) -> Exception:
        return _wrapped(exc)

    def parse(self, body: dict[str, Any]) -> ChatResponse:
        return parse_completion(body)


def _result_line(row: dict[str, Any], batch_state: str) -> ResultLine:
    """One line of an output or error file, sorted into succeeded / errored / expired / canceled."""
    custom = str(row.get("custom_id"))
    response = row.get("response") or {}
    error = row.get("error") or {}
    status = response.get("status_code")
    body = response.get("body")
    if status == 200 and isinstance(body, dict) and not error:
        return ResultLine(custom, SUCCEEDED, body=body)
    code = str(error.get("code") or "")
    if not error and isinstance(body, dict):
        error = body.get("error") or {}
    message = str(error.get("message") or code or f"HTTP {status}")
    if code == "batch_expired" or (not status and batch_state == "expired"):
        return ResultLine(custom, EXPIRED, status=status, message=message)
    if code == "batch_cancelled" or (not status and batch_state in ("cancelled", "cancelling")):
        return ResultLine(custom, CANCELED, status=status, message=message)
    return ResultLine(custom, ERRORED, status=status, message=message)


def _wrapped(exc: Exception) -> Exception:
    """An SDK error as the ``ProviderError`` the runner's retry policy reads (other exceptions as they are)."""
    import openai

    if isinstance(exc, openai.APIStatusError):
        return _status_error(exc)
    if isinstance(exc, openai.APITimeoutError):
        return ProviderError("batch API request timed out", retryable=True, kind="timeout")
    if isinstance(exc, openai.APIConnectionError):
        return ProviderError(f"connection error: {exc}", retryable=True, kind="connection")
    return exc


def _not_supported(exc: Exception) -> bool:
    import openai

    return isinstance(exc, openai.APIStatusError) and exc.status_code in (404, 405, 501)
