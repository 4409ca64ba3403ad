"""What a batch run plans and reports: batches cut to the provider's limits, journaled before they are sent.

``BatchRunner`` (``bench_core.kernel.batch_runner``) drives batches; the pieces here have no state
of their own. ``plan_batches`` splits one endpoint's requests into batches by the provider's limits
and journals each one (``BatchJournal``) before anything is uploaded, so a killed process leaves a
record of every batch it may have created. ``describe_plan`` and ``batch_progress`` are what the
runner shows its user (``BatchReporter``): the plan before submitting, then progress while waiting.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from bench_core.kernel.batch_journal import BatchJournal, Entry, now
from bench_core.kernel.pricing import estimate_input_tokens
from bench_core.kernel.providers.base import ChatRequest
from bench_core.kernel.providers.batch import BatchAPI, BatchStatus, custom_id
from bench_core.kernel.runner import Job


@dataclass
class ModelEstimate:
    """Requests of one model about to be submitted, with their estimated input tokens."""

    provider: str
    requests: int = 0
    input_tokens: int = 0
    max_output_tokens: int | None = 0  # the sum of the token caps; None when some request has none


@dataclass
class BatchPlan:
    """What is about to be submitted (shown before submitting): batches, requests, tokens per model."""

    description: str
    batches: int
    requests: int
    input_tokens: int
    models: dict[str, ModelEstimate]
    resumed: int = 0  # batches of earlier runs found in the journal and collected instead of sent again


@dataclass
class BatchProgress:
    """Where the batches of one ``run`` call stand (shown while waiting)."""

    description: str
    submitted: int
    in_progress: int
    completed: int
    requests: int
    done: int
    waited: float
    batches: list[dict[str, Any]] = field(default_factory=list)


class BatchReporter(Protocol):
    """What the runner tells its user: the plan, progress while waiting, and notes."""

    def plan(self, plan: BatchPlan) -> None: ...

    def progress(self, progress: BatchProgress) -> None: ...

    def note(self, message: str) -> None: ...

    def done(self) -> None: ...


class QuietReporter:
    """A reporter that shows nothing (tests, and callers that report otherwise)."""

    def plan(self, plan: BatchPlan) -> None:
        pass

    def progress(self, progress: BatchProgress) -> None:
        pass

    def note(self, message: str) -> None:
        pass

    def done(self) -> None:
        pass


@dataclass
class Pending:
    """One batch to drive: its journal entry, its adapter, and (when planned here) its lines and estimate."""

    entry: Entry
    api: BatchAPI
    lines: list[dict[str, Any]] | None = None
    input_tokens: int = 0
    max_output_tokens: int | None = None


def plan_batches(
    journal: BatchJournal,
    api: BatchAPI,
    items: list[tuple[Job, ChatRequest]],
    *,
    max_requests: int,
    max_bytes: int,
    description: str,
    too_large: Callable[[Job, ChatRequest, dict[str, Any]], None],
) -> list[Pending]:
    """Split one endpoint's requests into batches within ``max_requests`` and ``max_bytes``; journal each.

    A request larger than ``max_bytes`` on its own can never be sent: ``too_large`` gets it with the
    error to record. The batches are journaled in order, as each one fills.
    """
    planned: list[Pending] = []
    chunk: list[tuple[Job, ChatRequest, dict[str, Any], int]] = []
    size = 0
    entry_id = journal.new_entry_id()
    for job, request in items:
        line = api.request_line(custom_id(entry_id, len(chunk)), request)
        line_bytes = len(json.dumps(line, ensure_ascii=False).encode()) + 1
        if line_bytes > max_bytes:
            error = {
                "attempt": 1,
                "kind": "too_large",
                "status": None,
                "message": f"request of {line_bytes} bytes is over the batch limit of {max_bytes} bytes",
            }
            too_large(job, request, error)
            continue
        if chunk and (len(chunk) >= max_requests or size + line_bytes > max_bytes):
            planned.append(journal_batch(journal, entry_id, api, chunk, description))
            entry_id, chunk, size = journal.new_entry_id(), [], 0
            line = api.request_line(custom_id(entry_id, 0), request)
            line_bytes = len(json.dumps(line, ensure_ascii=False).encode()) + 1
        chunk.append((job, request, line, line_bytes))
        size += line_bytes
    if chunk:
        planned.append(journal_batch(journal, entry_id, api, chunk, description))
    return planned


def journal_batch(
    journal: BatchJournal,
    entry_id: str,
    api: BatchAPI,
    chunk: list[tuple[Job, ChatRequest, dict[str, Any], int]],
    description: str,
) -> Pending:
    """Write one batch's request lines and its ``planned`` journal event; the batch is not sent yet."""
    model = chunk[0][0].model
    lines = [line for _job, _request, line, _size in chunk]
    size = journal.write_lines(journal.requests_path(entry_id), lines)
    keys = [job.key.id for job, _request, _line, _size in chunk]
    tokens = sum(estimate_input_tokens(request) for _job, request, _line, _size in chunk)
    caps = [request.max_tokens for _job, request, _line, _size in chunk]
    cap = None if None in caps else sum(c for c in caps if c is not None)
    journal.append(
        "planned",
        entry_id,
        provider=api.provider,
        model=model.name,
        endpoint=model.endpoint,
        description=description,
        keys=keys,
        bytes=size,
        input_tokens=tokens,
        max_output_tokens=cap,
    )
    entry = Entry(
        id=entry_id,
        provider=api.provider,
        model=model.name,
        endpoint=model.endpoint,
        keys=keys,
        planned_at=now(),
        bytes=size,
        description=description,
    )
    return Pending(entry, api, lines, input_tokens=tokens, max_output_tokens=cap)


def describe_plan(planned: list[Pending], resumed: list[Pending], description: str) -> BatchPlan:
    """The plan shown before submitting: batches, requests and estimated tokens per model."""
    models: dict[str, ModelEstimate] = {}
    for pending in planned:
        estimate = models.setdefault(pending.entry.model, ModelEstimate(pending.entry.provider))
        estimate.requests += len(pending.entry.keys)
        estimate.input_tokens += pending.input_tokens
        if estimate.max_output_tokens is not None:
            cap = pending.max_output_tokens
            estimate.max_output_tokens = None if cap is None else estimate.max_output_tokens + cap
    return BatchPlan(
        description,
        len(planned),
        sum(m.requests for m in models.values()),
        sum(m.input_tokens for m in models.values()),
        models,
        resumed=len(resumed),
    )


def batch_progress(
    batches: list[Pending], statuses: dict[str, BatchStatus], description: str, started: float
) -> BatchProgress:
    """Where the batches stand: submitted, running and completed batches, requests done so far."""
    rows = []
    submitted = running = completed = requests = done = 0
    for pending in batches:
        entry = pending.entry
        status = statuses.get(entry.id)
        total = len(entry.keys)
        finished = total if not entry.open or entry.downloaded else (status.done if status else None) or 0
        requests += total
        done += finished
        if entry.batch_id:
            submitted += 1
        if not entry.open or entry.downloaded:
            completed += 1
        elif entry.batch_id:
            running += 1
        rows.append(
            {
                "entry": entry.id,
                "batch_id": entry.batch_id,
                "state": entry.state or entry.phase,
                "requests": total,
                "done": finished,
            }
        )
    return BatchProgress(description, submitted, running, completed, requests, done, time.monotonic() - started, rows)


def index_of(custom: str, entry: str, position: int) -> int | None:
    """The request index a result line answers: from its custom_id, or its position when the provider kept
    none (``#<position>``); None for a line of another entry."""
    if custom.startswith("#"):
        return int(custom[1:]) if custom[1:].isdigit() else position
    prefix = f"{entry}-"
    if custom.startswith(prefix) and custom[len(prefix) :].isdigit():
        return int(custom[len(prefix) :])
    return None
