"""Anthropic's Message Batches API.

``POST /v1/messages/batches`` takes ``requests=[{"custom_id", "params"}]`` (``params`` being a Messages
body) in one call; ``processing_status`` is ``in_progress``, ``canceling`` or ``ended`` with
``request_counts`` (processing, succeeded, errored, canceled, expired); once ended, ``results_url``
serves JSONL lines ``{"custom_id", "result": {"type": succeeded|errored|canceled|expired, ...}}``.
Limits: 100,000 requests or 256 MB per batch.

A Message Batch carries no metadata, so a batch whose create call was sent but whose id was never
journaled (a kill between the two) is found by listing: batches created from the journal entry's time
on (less a margin for clock skew), with as many requests as the entry, not claimed by another entry.
That match is confirmed only once the batch has ended, by the entry id every ``custom_id`` starts with.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from typing import Any

from bench_core.kernel.providers.anthropic import AnthropicModel, parse_message
from bench_core.kernel.providers.base import ChatRequest, ChatResponse, ProviderError, attr, parse_retry_after
from bench_core.kernel.providers.batch import (
    CANCELED,
    ERRORED,
    EXPIRED,
    SUCCEEDED,
    BatchLimits,
    BatchStatus,
    FoundBatch,
    ResultLine,
    SDKBatches,
    aware,
    entry_of,
)

LIMITS = BatchLimits(max_requests=100_000, max_bytes=256 * 1024 * 1024)
CLOCK_SKEW = dt.timedelta(minutes=5)
ERROR_STATUS = {
    "invalid_request_error": 400,
    "authentication_error": 401,
    "permission_error": 403,
    "not_found_error": 404,
    "request_too_large": 413,
    "rate_limit_error": 429,
    "api_error": 500,
    "overloaded_error": 529,
}
COUNTS = ("processing", "succeeded", "errored", "canceled", "expired")


class AnthropicBatches(SDKBatches):
    """The Message Batches API through an ``AnthropicModel``'s SDK client."""

    provider = "anthropic"
    limits = LIMITS
    model: AnthropicModel

    def request_line(self, custom_id: str, request: ChatRequest) -> dict[str, Any]:
        params = self.model.request_body(request)
        params.update(params.pop("extra_body", None) or {})  # the body fields the SDK would merge in
        return {"custom_id": custom_id, "params": params}

    async def create(self, entry: str, lines: Sequence[dict[str, Any]], file_id: str | None) -> str:
        batch = await self.call(self.client.messages.batches.create(requests=list(lines), timeout=self.timeout))
        return str(batch.id)

    async def find_batch(
        self, entry: str, *, file_id: str | None, planned_at: dt.datetime, n_requests: int, claimed: set[str]
    ) -> FoundBatch | None:
        since = planned_at - CLOCK_SKEW
        unconfirmed: FoundBatch | None = None
        try:
            async for batch in self.client.messages.batches.list(limit=100, timeout=self.timeout):
                created = _when(attr(batch, "created_at"))
                if created is not None and created < since:
                    break
                batch_id = str(attr(batch, "id"))
                counts = attr(batch, "request_counts")
                total = sum(int(attr(counts, name) or 0) for name in COUNTS) if counts is not None else None
                if batch_id in claimed or total != n_requests:
                    continue
                if attr(batch, "processing_status") != "ended":
                    unconfirmed = unconfirmed or FoundBatch(batch_id, confirmed=False)
                    continue
                async for line in await self.client.messages.batches.results(batch_id, timeout=self.timeout):
                    found = entry_of(str(attr(line, "custom_id")))
                    if found is not None and found[0] == entry:
                        return FoundBatch(batch_id)
                    break  # one line tells whose batch it is
        except Exception as exc:
            raise self.wrapped(exc) from exc
        return unconfirmed

    async def status(self, batch_id: str) -> BatchStatus:
        batch = await self.call(self.client.messages.batches.retrieve(batch_id, timeout=self.timeout))
        counts = attr(batch, "request_counts")
        numbers = {name: int(attr(counts, name) or 0) for name in COUNTS} if counts is not None else {}
        state = str(attr(batch, "processing_status"))
        total = sum(numbers.values()) if numbers else None
        return BatchStatus(
            state=state,
            ended=state == "ended",
            total=total,
            done=total - numbers.get("processing", 0) if total is not None else None,
            counts=numbers,
        )

    async def results(self, batch_id: str, status: BatchStatus) -> list[ResultLine]:
        lines: list[ResultLine] = []
        try:
            async for row in await self.client.messages.batches.results(batch_id, timeout=self.timeout):
                lines.append(_result_line(row))
        except Exception as exc:
            raise self.wrapped(exc) from exc
        return lines

    async def cancel(self, batch_id: str) -> None:
        await self.call(self.client.messages.batches.cancel(batch_id, timeout=self.timeout))

    def wrapped(self, exc: Exception) -> Exception:
        return _wrapped(exc)

    def parse(self, body: dict[str, Any]) -> ChatResponse:
        return parse_message(body)


def _result_line(row: Any) -> ResultLine:
    custom = str(attr(row, "custom_id"))
    result = attr(row, "result")
    kind = attr(result, "type")
    if kind == "succeeded":
        message = attr(result, "message")
        body = message.model_dump(mode="json") if hasattr(message, "model_dump") else dict(message)
        return ResultLine(custom, SUCCEEDED, body=body)
    if kind == "expired":
        return ResultLine(custom, EXPIRED, message="the batch expired before this request was processed")
    if kind == "canceled":
        return ResultLine(custom, CANCELED, message="the batch was cancelled before this request was processed")
    error = attr(attr(result, "error"), "error") or attr(result, "error")
    error_type = str(attr(error, "type") or "api_error")
    return ResultLine(
        custom, ERRORED, status=ERROR_STATUS.get(error_type), message=str(attr(error, "message") or error_type)
    )


def _when(value: Any) -> dt.datetime | None:
    if isinstance(value, dt.datetime):
        return aware(value)
    if isinstance(value, str):
        try:
            return dt.datetime.fromisoformat(value.replace("Z", "+00:00"))
        except ValueError:
            return None
    return None


def _wrapped(exc: Exception) -> Exception:
    import anthropic

    if isinstance(exc, anthropic.APIStatusError):
        status = exc.status_code
        retry_after = parse_retry_after(exc.response.headers.get("retry-after")) if exc.response else None
        retryable = status in (408, 409, 429, 529) or status >= 500
        return ProviderError(
            f"HTTP {status}: {exc.message}", retryable=retryable, status=status, retry_after=retry_after,
            kind=f"http_{status}",
        )  # fmt: skip
    if isinstance(exc, anthropic.APITimeoutError):
        return ProviderError("batch API request timed out", retryable=True, kind="timeout")
    if isinstance(exc, anthropic.APIConnectionError):
        return ProviderError(f"connection error: {exc}", retryable=True, kind="connection")
    return exc
