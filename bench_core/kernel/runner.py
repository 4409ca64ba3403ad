"""The one async runner every benchmark design uses to call models.

A *job* is a result key, a request builder and a response parser. The runner skips keys the
store has already finished, caps concurrency per endpoint (so a generator and a judge on the same
server share one cap), applies a single retry policy (exponential backoff with jitter, honouring
Retry-After, capped in attempts and in total time per job; provider SDK retries are off), bounds
every call with a timeout, appends each finished call to the store the moment it finishes, and
shows a progress bar with rate and ETA. On Ctrl-C (task cancellation) it cancels the calls in
flight and returns what was saved; rerunning the same jobs resumes where it stopped.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import random
import time
from collections import defaultdict, deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    ProgressColumn,
    Task,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)
from rich.text import Text

from bench_core.kernel.providers.base import ChatModel, ChatRequest, ChatResponse, ProviderError
from bench_core.kernel.store import FAILED, OK, ResultKey, ResultStore


@dataclass(frozen=True)
class RetryPolicy:
    """When to try a failed call again, and how long to wait.

    Attempt ``n`` (1-based) that fails retryably waits ``min(max_delay, base_delay * 2**(n-1))``
    scaled by a random factor in ``[1 - jitter, 1]``, or the server's Retry-After if longer. A job
    gives up after ``max_attempts`` attempts or when the next wait would pass ``max_total``
    seconds since its first attempt.
    """

    max_attempts: int = 6
    base_delay: float = 1.0
    max_delay: float = 60.0
    max_total: float = 900.0
    jitter: float = 0.5

    def delay(self, attempt: int, retry_after: float | None, rng: random.Random) -> float:
        backoff = min(self.max_delay, self.base_delay * 2 ** (attempt - 1))
        backoff *= 1 - self.jitter * rng.random()
        return max(backoff, retry_after or 0.0)


@dataclass
class Job:
    """One model call to make unless its key is already finished.

    ``build`` returns the request (called only when the call is due, so large benchmarks do not
    hold every prompt in memory twice); ``parse`` turns the response into the benchmark's own
    fields, stored under ``parsed``; ``meta`` is stored as given (item ids, condition, target...).
    """

    key: ResultKey
    model: ChatModel
    build: Callable[[], ChatRequest]
    parse: Callable[[ChatResponse], dict[str, Any]] | None = None
    meta: dict[str, Any] = field(default_factory=dict)


@dataclass
class RunSummary:
    """Counts of one ``Runner.run``."""

    total: int = 0
    already_done: int = 0
    skipped_failed: int = 0
    succeeded: int = 0
    failed: int = 0
    interrupted: bool = False
    elapsed: float = 0.0

    @property
    def attempted(self) -> int:
        return self.succeeded + self.failed


class _Slot:
    """One worker's claim on an endpoint's concurrency limit, released exactly once."""

    def __init__(self, limit: asyncio.Semaphore) -> None:
        self.limit = limit
        self.held = False

    async def take(self) -> None:
        await self.limit.acquire()
        self.held = True

    def give(self) -> None:
        if self.held:
            self.held = False
            self.limit.release()


class _RateColumn(ProgressColumn):
    """Finished calls per second since the bar started."""

    def render(self, task: Task) -> Text:
        elapsed = task.elapsed or 0.0
        rate = task.completed / elapsed if elapsed > 0 else 0.0
        return Text(f"{rate:6.1f} req/s", style="progress.data.speed")


def due_jobs(store: ResultStore, jobs: Iterable[Job], summary: RunSummary, *, retry_failed: bool) -> list[Job]:
    """The jobs that need a call, counting the rest into ``summary``: finished keys are skipped, failed ones
    too unless ``retry_failed``. The synchronous and the batch runner decide this the same way, here."""
    pending: list[Job] = []
    for job in jobs:
        summary.total += 1
        status = store.status(job.key)
        if status == OK:
            summary.already_done += 1
        elif status == FAILED and not retry_failed:
            summary.skipped_failed += 1
        else:
            pending.append(job)
    return pending


class Runner:
    """Runs jobs against their models with one retry policy and writes every outcome to ``store``.

    ``concurrency`` caps simultaneous calls per endpoint; ``timeout`` bounds one attempt (seconds).
    """

    def __init__(
        self,
        store: ResultStore,
        *,
        concurrency: int = 8,
        retry: RetryPolicy | None = None,
        timeout: float = 300.0,
        progress: bool = True,
        console: Console | None = None,
        seed: int | None = None,
    ) -> None:
        if concurrency < 1:
            raise ValueError("concurrency must be at least 1")
        self.store = store
        self.concurrency = concurrency
        self.retry = retry or RetryPolicy()
        self.timeout = timeout
        self.progress = progress
        self.console = console or Console(stderr=True)
        self._rng = random.Random(seed)
        self._limits: dict[str, asyncio.Semaphore] = {}

    def _limit(self, endpoint: str) -> asyncio.Semaphore:
        if endpoint not in self._limits:
            self._limits[endpoint] = asyncio.Semaphore(self.concurrency)
        return self._limits[endpoint]

    async def run(self, jobs: Iterable[Job], *, retry_failed: bool = False, description: str = "calls") -> RunSummary:
        """Make every due call; returns counts. Cancellation stops the calls in flight and re-raises."""
        summary = RunSummary()
        pending = due_jobs(self.store, jobs, summary, retry_failed=retry_failed)
        started = time.monotonic()
        progress = Progress(
            TextColumn("[bold]{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            _RateColumn(),
            TextColumn("failed: {task.fields[failed]}"),
            TimeElapsedColumn(),
            TextColumn("ETA"),
            TimeRemainingColumn(),
            console=self.console,
            disable=not self.progress,
            transient=False,
        )
        queues: dict[str, deque[Job]] = defaultdict(deque)
        for job in pending:
            queues[job.model.endpoint].append(job)
        tasks: list[asyncio.Task[None]] = []
        with progress:
            bar = progress.add_task(escape(description), total=len(pending), failed=0)  # a label may hold [...]

            def finished(ok: bool) -> None:
                if ok:
                    summary.succeeded += 1
                else:
                    summary.failed += 1
                if self.progress:
                    progress.update(bar, advance=1, failed=summary.failed)

            # Each endpoint gets ``concurrency`` workers that keep their slot from one job to the
            # next (no hand-over through the event loop between calls), plus as many spare workers
            # that only get a slot while a job waits out a retry back-off.
            for endpoint, queue in queues.items():
                limit = self._limit(endpoint)
                for _ in range(min(len(queue), 2 * self.concurrency)):
                    tasks.append(asyncio.create_task(self._worker(queue, limit, finished)))
            try:
                await asyncio.gather(*tasks)
            except asyncio.CancelledError:
                summary.interrupted = True
                for task in tasks:
                    task.cancel()
                await asyncio.gather(*tasks, return_exceptions=True)
                summary.elapsed = time.monotonic() - started
                raise
        summary.elapsed = time.monotonic() - started
        return summary

    async def _worker(self, queue: deque[Job], limit: asyncio.Semaphore, finished: Callable[[bool], None]) -> None:
        if not queue:
            return
        slot = _Slot(limit)
        await slot.take()
        try:
            while queue:
                await self._run_job(queue.popleft(), slot, finished)
        finally:
            slot.give()

    async def _run_job(self, job: Job, slot: _Slot, finished: Callable[[bool], None]) -> None:
        """All attempts of one job. Enters and leaves holding one slot of ``limit``.

        The slot is given back while the job waits out a back-off, so a spare worker can use it.
        """
        first = time.monotonic()
        started_at = _now()
        errors: list[dict[str, Any]] = []
        request: ChatRequest | None = None
        attempt = 0
        while True:
            attempt += 1
            try:
                if request is None:
                    request = job.build()
                began = time.monotonic()
                # The adapter applies the timeout to its HTTP call; this outer bound (without an
                # extra task, unlike wait_for) catches an adapter that does not.
                async with asyncio.timeout(self.timeout + 5):
                    response = await job.model.complete(request, timeout=self.timeout)
                parsed = job.parse(response) if job.parse is not None else {}
            except ProviderError as exc:
                error = exc
            except TimeoutError:
                error = ProviderError(f"no answer within {self.timeout} s", retryable=True, kind="timeout")
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # a bug in an adapter or parser: record it, do not retry
                error = ProviderError(f"{type(exc).__name__}: {exc}", retryable=False, kind="exception")
            else:
                self.store.append(self._record(job, OK, request, attempt, started_at, errors, response, parsed, began))
                finished(True)
                return
            errors.append({"attempt": attempt, "kind": error.kind, "status": error.status, "message": str(error)})
            if getattr(error, "detail", None) is not None:  # e.g. a tool loop's partial trace
                errors[-1]["detail"] = error.detail
            wait = self.retry.delay(attempt, error.retry_after, self._rng)
            out_of_time = time.monotonic() - first + wait > self.retry.max_total
            if not error.retryable or attempt >= self.retry.max_attempts or out_of_time:
                self.store.append(self._record(job, FAILED, request, attempt, started_at, errors, None, None, None))
                finished(False)
                return
            slot.give()
            await asyncio.sleep(wait)
            await slot.take()

    def _record(
        self,
        job: Job,
        status: str,
        request: ChatRequest | None,
        attempts: int,
        started_at: str,
        errors: list[dict[str, Any]],
        response: ChatResponse | None,
        parsed: dict[str, Any] | None,
        began: float | None,
    ) -> dict[str, Any]:
        record: dict[str, Any] = {
            "key": job.key.as_dict(),
            "status": status,
            "attempts": attempts,
            "provider": job.model.provider,
            "settings": request.settings() if request is not None else None,
            "meta": job.meta,
            "started_at": started_at,
            "finished_at": _now(),
            "errors": errors,
        }
        if request is not None:
            record["messages"] = list(request.messages)
        if response is not None:
            record["response"] = {
                "text": response.text,
                "reasoning": response.reasoning,
                "tool_calls": [vars(call) for call in response.tool_calls],
                "finish_reason": response.finish_reason,
                "usage": response.usage,
                "model": response.model,
            }
            record["latency_s"] = round(time.monotonic() - began, 4) if began is not None else None
            record["parsed"] = parsed or {}
        else:
            record["error"] = errors[-1] if errors else None
        return record


def _now() -> str:
    return dt.datetime.now(dt.UTC).isoformat(timespec="milliseconds")
