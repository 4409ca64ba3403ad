"""Gemini batch mode (the Gemini API's ``batchGenerateContent``) through ``google-genai``.

``client.aio.batches.create(model=..., src=[inline requests], config={"display_name": ...})`` takes
``GenerateContentRequest`` values inline, each with ``metadata`` that comes back with its response; the
job moves through ``JOB_STATE_PENDING`` and ``JOB_STATE_RUNNING`` to ``JOB_STATE_SUCCEEDED``, ``FAILED``,
``CANCELLED`` or ``EXPIRED``, and a finished job holds ``dest.inlined_responses`` (a response or an
error per request). Inline requests are limited to 20 MB per job, so medrev splits larger runs into
several jobs instead of uploading a requests file.

Finding a job after a kill: its ``display_name`` is ``medrev-<entry>``, listed by ``batches.list``.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from typing import Any

from bench_core.kernel.providers.base import ChatRequest, ChatResponse, ProviderError, attr, parse_retry_after
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
    aware,
)
from bench_core.kernel.providers.google import GoogleModel, parse_response

LIMITS = BatchLimits(max_requests=50_000, max_bytes=20 * 1024 * 1024)
ENDED = {"SUCCEEDED", "FAILED", "CANCELLED", "EXPIRED", "PARTIALLY_SUCCEEDED"}
MISSING = {"EXPIRED": EXPIRED, "CANCELLED": CANCELED}
KEY = "key"  # the metadata field the Gemini docs use to match responses to requests


class GoogleBatches(SDKBatches):
    """Gemini batch jobs through a ``GoogleModel``'s SDK client."""

    provider = "google"
    limits = LIMITS
    model: GoogleModel

    def request_line(self, custom_id: str, request: ChatRequest) -> dict[str, Any]:
        body = self.model.request_body(request)
        return {"contents": body["contents"], "config": body["config"], "metadata": {KEY: custom_id}}

    async def create(self, entry: str, lines: Sequence[dict[str, Any]], file_id: str | None) -> str:
        config = {"display_name": f"{TAG}-{entry}", "http_options": {"timeout": int(self.timeout * 1000)}}
        job = await self.call(self.client.aio.batches.create(model=self.model.name, src=list(lines), config=config))
        return str(job.name)

    async def find_batch(
        self, entry: str, *, file_id: str | None, planned_at: dt.datetime, n_requests: int, claimed: set[str]
    ) -> FoundBatch | None:
        name = f"{TAG}-{entry}"
        oldest = planned_at - dt.timedelta(hours=1)
        try:
            pages = await self.client.aio.batches.list(config={"page_size": 100})
            async for job in pages:
                if attr(job, "display_name") == name and str(attr(job, "name")) not in claimed:
                    return FoundBatch(str(attr(job, "name")))
                created = attr(job, "create_time")
                if isinstance(created, dt.datetime) and aware(created) < oldest:
                    break
        except Exception as exc:
            raise self.wrapped(exc) from exc
        return None

    async def status(self, batch_id: str) -> BatchStatus:
        job = await self.call(self.client.aio.batches.get(name=batch_id))
        state = str(attr(attr(job, "state"), "name", attr(job, "state")))
        short = state.removeprefix("JOB_STATE_")
        responses = attr(attr(job, "dest"), "inlined_responses") or []
        ended = short in ENDED
        return BatchStatus(
            state=state,
            ended=ended,
            done=len(responses) if ended else None,
            counts={"returned": len(responses)} if ended else {},
            extra={"responses": responses, "missing": MISSING.get(short, ERRORED), "error": attr(job, "error")},
        )

    async def results(self, batch_id: str, status: BatchStatus) -> list[ResultLine]:
        lines = []
        for index, item in enumerate(status.extra.get("responses") or []):
            custom = str((attr(item, "metadata") or {}).get(KEY) or f"#{index}")
            response = attr(item, "response")
            error = attr(item, "error")
            if response is not None and error is None:
                if hasattr(response, "model_dump"):
                    response = response.model_dump(mode="json", exclude_none=True)
                lines.append(ResultLine(custom, SUCCEEDED, body=response))
            else:
                code = attr(error, "code")
                status_code = _http_status(code)
                message = str(attr(error, "message") or f"error {code}")
                lines.append(ResultLine(custom, ERRORED, status=status_code, message=message))
        return lines

    async def cancel(self, batch_id: str) -> None:
        await self.call(self.client.aio.batches.cancel(name=batch_id))

    def wrapped(self, exc: Exception) -> Exception:
        return _wrapped(exc)

    def parse(self, body: dict[str, Any]) -> ChatResponse:
        return parse_response(body)


def _http_status(code: Any) -> int | None:
    """The HTTP status of a google.rpc status code (a job error carries the RPC code, 3 = INVALID_ARGUMENT...)."""
    if not isinstance(code, int):
        return None
    if code >= 100:
        return code
    return {3: 400, 5: 404, 7: 403, 8: 429, 13: 500, 14: 503, 4: 504, 16: 401}.get(code, 500)


def _wrapped(exc: Exception) -> Exception:
    from google.genai import errors

    if isinstance(exc, errors.APIError):
        status = int(exc.code) if exc.code else None
        headers = getattr(getattr(exc, "response", None), "headers", None) or {}
        retryable = status is None or status in (408, 409, 429) or status >= 500
        return ProviderError(
            f"HTTP {status}: {exc.message or exc}", retryable=retryable, status=status,
            retry_after=parse_retry_after(headers.get("retry-after")), kind=f"http_{status}",
        )  # fmt: skip
    transport = ("ReadTimeout", "ConnectError", "ConnectTimeout", "ClientConnectorError", "ServerTimeoutError")
    if isinstance(exc, TimeoutError | OSError) or type(exc).__name__ in transport:
        return ProviderError(f"batch API request failed: {exc}", retryable=True, kind="connection")
    return exc
