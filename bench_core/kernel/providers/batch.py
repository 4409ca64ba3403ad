"""The provider-neutral side of batch APIs: what a batch adapter does, and the shapes it returns.

OpenAI (and OpenAI-compatible servers such as vLLM), Anthropic and Google sell the same chat calls at
about half price when they are sent as a batch and answered within 24 hours. Each provider's batch
API has its own shape (a file upload then a batch for OpenAI, one create call with every request for
Anthropic and Gemini); a ``BatchAPI`` adapter hides it behind the steps the batch runner needs:

- ``request_line``: one request as the provider takes it inside a batch, built from the adapter's
  ``request_body`` so a batched call sends exactly what the synchronous call sends;
- ``upload`` (where the provider needs a file) and ``create``, separate steps so the runner can write
  each id to its journal the moment it exists;
- ``find_upload`` / ``find_batch``: after a kill, the provider's own record of a file or batch made
  for a journal entry (OpenAI: file name and ``metadata``; Gemini: ``display_name``; Anthropic, whose
  batches carry no metadata: listing by creation time and size, confirmed by the custom_id prefix);
- ``status``, ``results``, ``cancel``.

Results come back as ``ResultLine`` values, one per request, already sorted into succeeded, errored,
expired and canceled, each with the provider's own response body for ``parse``.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Awaitable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar

from bench_core.kernel.providers.base import ChatRequest, ChatResponse

SUCCEEDED = "succeeded"
ERRORED = "errored"
EXPIRED = "expired"
CANCELED = "canceled"
OUTCOMES = (SUCCEEDED, ERRORED, EXPIRED, CANCELED)
TAG = "medrev"  # prefix of file names, display names and metadata keys that carry a journal entry id
T = TypeVar("T")


@dataclass(frozen=True)
class BatchLimits:
    """What one batch may hold: requests and bytes of the request payload (the provider's documented caps)."""

    max_requests: int
    max_bytes: int


@dataclass(frozen=True)
class BatchStatus:
    """A batch as the provider reports it: its own state name, whether it has ended, and request counts.

    ``counts`` keeps the provider's own names (OpenAI ``completed``/``failed``, Anthropic ``succeeded``/
    ``errored``/``expired``/``canceled``/``processing``); ``done`` is how many requests have finished either way
    (None when the provider does not say until the end, as Gemini).
    """

    state: str
    ended: bool
    total: int | None = None
    done: int | None = None
    counts: dict[str, int] = field(default_factory=dict)
    # what ``results`` needs (file ids, inline responses), and ``missing``: the outcome of a request the
    # ended batch did not return (expired when the batch expired, canceled when it was cancelled)
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class ResultLine:
    """One request's outcome in a finished batch.

    ``outcome`` is one of ``OUTCOMES``; ``body`` the provider's response (a chat completion, a Message, a
    GenerateContentResponse, as plain JSON) when it succeeded; ``status`` and ``message`` describe an error.
    """

    custom_id: str
    outcome: str
    body: dict[str, Any] | None = None
    status: int | None = None
    message: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {k: v for k, v in vars(self).items() if v is not None}

    @classmethod
    def from_json(cls, row: dict[str, Any]) -> ResultLine:
        return cls(
            custom_id=str(row["custom_id"]),
            outcome=str(row["outcome"]),
            body=row.get("body"),
            status=row.get("status"),
            message=row.get("message"),
        )


@dataclass(frozen=True)
class FoundBatch:
    """A batch the provider lists for a journal entry; ``confirmed`` False when only time and size match."""

    batch_id: str
    confirmed: bool = True


class BatchAPI(Protocol):
    """One provider's batch API for one model (see the module docstring for the steps)."""

    provider: str
    limits: BatchLimits
    needs_upload: bool

    def request_line(self, custom_id: str, request: ChatRequest) -> dict[str, Any]: ...

    async def upload(self, entry: str, lines: Sequence[dict[str, Any]]) -> str | None: ...

    async def create(self, entry: str, lines: Sequence[dict[str, Any]], file_id: str | None) -> str: ...

    async def find_upload(self, entry: str, size: int) -> str | None: ...

    async def find_batch(
        self, entry: str, *, file_id: str | None, planned_at: dt.datetime, n_requests: int, claimed: set[str]
    ) -> FoundBatch | None: ...

    async def status(self, batch_id: str) -> BatchStatus: ...

    async def results(self, batch_id: str, status: BatchStatus) -> list[ResultLine]: ...

    async def cancel(self, batch_id: str) -> None: ...

    def parse(self, body: dict[str, Any]) -> ChatResponse: ...


class SDKBatches:
    """What every adapter over a chat model's SDK client shares: the client, the timeout, SDK error wrapping.

    Providers that take every request in the create call (Anthropic, Gemini) have no upload step, so
    ``upload`` and ``find_upload`` answer None here; an adapter whose provider needs a file overrides both.
    """

    needs_upload = False

    def __init__(self, model: Any, *, timeout: float = 300.0) -> None:
        self.model = model
        self.client = model.client
        self.timeout = timeout

    async def upload(self, entry: str, lines: Sequence[dict[str, Any]]) -> str | None:
        return None

    async def find_upload(self, entry: str, size: int) -> str | None:
        return None

    def wrapped(self, exc: Exception) -> Exception:
        """An SDK error as the ``ProviderError`` the runner's retry policy reads (others as they are)."""
        return exc

    async def call(self, awaitable: Awaitable[T]) -> T:
        """Await one SDK call, its errors wrapped by ``wrapped`` so retries see a ``ProviderError``."""
        try:
            return await awaitable
        except Exception as exc:
            raise self.wrapped(exc) from exc


def aware(value: dt.datetime) -> dt.datetime:
    """``value`` with UTC assumed when the SDK returned a naive time, so it compares with journal times."""
    return value if value.tzinfo else value.replace(tzinfo=dt.UTC)


def entry_of(custom_id: str) -> tuple[str, int] | None:
    """(journal entry id, index) of a custom_id made by ``custom_id``; None for a foreign one."""
    entry, sep, index = custom_id.rpartition("-")
    if not sep or not index.isdigit() or not entry.startswith(TAG):
        return None
    return entry, int(index)


def custom_id(entry: str, index: int) -> str:
    """The id of request ``index`` of journal entry ``entry``: ``[a-zA-Z0-9_-]`` only (Anthropic's rule)."""
    return f"{entry}-{index}"
