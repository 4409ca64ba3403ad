"""The batch runner: the same jobs as ``Runner``, sent through the providers' batch APIs, never paid twice.

``BatchRunner.run(jobs)`` has the ``Runner.run`` contract (skip finished keys, write one record per
finished call to the store, return a ``RunSummary``), so every design (and every report, import and
resume) works unchanged. What differs is how the calls are made:

1. The due jobs' requests are built exactly as the synchronous path builds them (the provider adapter's
   ``request_body``), split into batches by the provider's limits and ``batch_size``, and each batch is
   journaled (``BatchJournal``) before it is uploaded or created, its ids journaled as they arrive.
2. Keys already carried by an open journal entry (a batch of an earlier, killed or interrupted process)
   are never planned again: that entry is found at the provider and collected instead.
3. The runner polls every batch until it ends, downloads its results into the run directory, then writes
   the records. A request the batch did not return (expired, cancelled by the provider, a retryable error,
   or a refused batch) is planned into the next batch, up to ``retry.max_attempts`` batches per key, or
   handed to the synchronous runner when ``fallback="sync"``. A request refused for itself (HTTP 400) is
   recorded as failed at once, as the synchronous path records it.

Planning (cutting requests into batches and journaling them) and what the user is shown (the plan,
progress) are ``bench_core.kernel.batch_plan``; ``BatchPlan`` and ``BatchProgress`` are re-exported here.
What stays is one class, a little over 500 lines, kept in one piece on purpose: its rounds, polling,
collecting and cancelling all read and change the same state (the journal, the provider clients, the
keys recorded in this run, the cancel flags), and cutting it would hand that state between modules.

Interruption: cancelling the task running ``run`` (the CLI does so on the first Ctrl-C) stops waiting;
the batches go on at the provider and a rerun collects them. ``request_cancel()`` (the second Ctrl-C)
within ``cancel_grace`` seconds cancels them at the provider. Either way ``run`` raises
``BatchInterrupted``. ``bench batch cancel`` from another shell journals a cancel that a waiting run
honours at its next poll.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Iterable
from typing import Any

from bench_core.kernel.batch_journal import BatchJournal, Entry, JournalState, iso, now
from bench_core.kernel.batch_plan import BatchPlan as BatchPlan
from bench_core.kernel.batch_plan import BatchProgress as BatchProgress
from bench_core.kernel.batch_plan import (
    BatchReporter,
    Pending,
    QuietReporter,
    batch_progress,
    describe_plan,
    index_of,
    plan_batches,
)
from bench_core.kernel.providers import make_batch_api
from bench_core.kernel.providers.base import ChatModel, ChatRequest, ProviderError
from bench_core.kernel.providers.batch import (
    CANCELED,
    ERRORED,
    EXPIRED,
    SUCCEEDED,
    BatchAPI,
    BatchStatus,
    ResultLine,
    custom_id,
)
from bench_core.kernel.runner import Job, RetryPolicy, Runner, RunSummary, due_jobs
from bench_core.kernel.store import FAILED, OK, ResultStore

FALLBACKS = ("batch", "sync")
NOT_RETRYABLE = {400, 401, 403, 404, 413, 422}


class BatchInterrupted(Exception):
    """The run stopped waiting for its batches (Ctrl-C, or ``bench batch cancel``).

    ``open_batches``: batches still running at the provider; ``cancelled``: whether they were cancelled
    there (or asked to be). A rerun of the same command collects what they returned and sends the rest.
    """

    def __init__(self, open_batches: int, *, cancelled: bool, reason: str = "interrupted") -> None:
        super().__init__(reason)
        self.open_batches = open_batches
        self.cancelled = cancelled
        self.reason = reason


class BatchRunner:
    """Runs jobs through batch APIs (see the module docstring); ``sync`` makes the fallback calls."""

    def __init__(
        self,
        store: ResultStore,
        *,
        sync: Runner,
        journal: BatchJournal | None = None,
        retry: RetryPolicy | None = None,
        batch_size: int | None = None,
        fallback: str = "batch",
        poll_interval: float = 30.0,
        timeout: float = 300.0,
        reporter: BatchReporter | None = None,
        max_bytes: int | None = None,
        cancel_grace: float = 5.0,
        api_factory: Any = make_batch_api,
    ) -> None:
        if fallback not in FALLBACKS:
            raise ValueError(f"--batch-fallback: expected one of {', '.join(FALLBACKS)}, found {fallback!r}")
        if batch_size is not None and batch_size < 1:
            raise ValueError("--batch-size must be at least 1")
        self.store = store
        self.sync = sync
        self.journal = journal or BatchJournal(store.path.parent)
        self.retry = retry or sync.retry
        self.batch_size = batch_size
        self.fallback = fallback
        self.poll_interval = poll_interval
        self.timeout = timeout
        self.reporter: BatchReporter = reporter or QuietReporter()
        self.max_bytes = max_bytes
        self.cancel_grace = cancel_grace
        self.api_factory = api_factory
        self.started_at = now()
        self._apis: dict[tuple[str, str, str], BatchAPI] = {}
        self._cancel = asyncio.Event()
        self._user_cancelled = False
        self._recorded: set[str] = set()  # keys given a record by this runner (results or failures)
        self._rng = random.Random()

    # -- the Runner contract ---------------------------------------------------------------
    async def run(self, jobs: Iterable[Job], *, retry_failed: bool = False, description: str = "calls") -> RunSummary:
        """Make every due call through batches; returns counts. Raises ``BatchInterrupted`` when stopped."""
        summary = RunSummary()
        pending = due_jobs(self.store, jobs, summary, retry_failed=retry_failed)
        started = time.monotonic()
        try:
            await self._run(pending, summary, description)
        except asyncio.CancelledError:
            summary.interrupted = True
            self.reporter.done()
            cancelled = await self._on_interrupt()
            raise BatchInterrupted(self._open_count(), cancelled=cancelled) from None
        finally:
            summary.elapsed = time.monotonic() - started
        if self._user_cancelled:
            raise BatchInterrupted(self._open_count(), cancelled=True, reason="cancelled")
        return summary

    def request_cancel(self) -> None:
        """Cancel the open batches at the provider (the second Ctrl-C): honoured while ``run`` stops."""
        self._cancel.set()

    # -- rounds ----------------------------------------------------------------------------
    async def _run(self, pending: list[Job], summary: RunSummary, description: str) -> None:
        jobs = {job.key.id: job for job in pending}
        due = set(jobs)
        while due and not self._user_cancelled:
            state = self.journal.state()
            carried: list[Entry] = [
                entry
                for entry in state.entries.values()
                if entry.open and any(entry.keys[i] in due for i in entry.unhandled())
            ]
            held = {entry.keys[i] for entry in carried for i in entry.unhandled()}
            fresh = [jobs[key] for key in jobs if key in due and key not in held]
            planned = self._plan(fresh, state, summary, description)
            resumed = [Pending(entry, self._api_for(jobs, entry)) for entry in carried]
            if planned:
                self.reporter.plan(describe_plan(planned, resumed, description))
            elif resumed:
                self.reporter.note(
                    f"{description}: collecting {len(resumed)} batch(es) submitted before (nothing is submitted twice)"
                )
            batches = resumed + planned
            if not batches:
                break
            await self._drive(batches, jobs, summary, description)
            due = {key for key in due if self._needs_call(jobs[key])}
            if due and self.fallback == "sync" and not self._user_cancelled:
                self.reporter.note(f"{len(due)} request(s) not returned by the batch: calling them synchronously")
                fallback = await self.sync.run(
                    [jobs[key] for key in jobs if key in due], retry_failed=True, description=f"{description} (sync)"
                )
                summary.succeeded += fallback.succeeded
                summary.failed += fallback.failed
                break

    def _needs_call(self, job: Job) -> bool:
        """True while a key has neither a result nor a failure recorded in this run."""
        return job.key.id not in self._recorded and self.store.status(job.key) != OK

    def _api_for(self, jobs: dict[str, Job], entry: Entry) -> BatchAPI:
        job = next((jobs[key] for key in entry.keys if key in jobs), None)
        if job is None:
            raise ValueError(f"batch entry {entry.id} carries none of this run's keys")
        return self._api(job.model)

    def _api(self, model: ChatModel) -> BatchAPI:
        ident = (model.provider, model.endpoint, model.name)
        if ident not in self._apis:
            self._apis[ident] = self.api_factory(model, timeout=self.timeout)
        return self._apis[ident]

    # -- planning --------------------------------------------------------------------------
    def _plan(self, fresh: list[Job], state: JournalState, summary: RunSummary, description: str) -> list[Pending]:
        """Build the requests of ``fresh`` jobs, split them into batches and journal each one (not sent yet)."""
        attempts = state.attempts()
        errors = state.errors()
        groups: dict[tuple[str, str, str], list[tuple[Job, ChatRequest]]] = {}
        for job in fresh:
            if attempts.get(job.key.id, 0) >= self.retry.max_attempts:
                self._write_failed(job, None, attempts[job.key.id], errors.get(job.key.id, []), summary)
                continue
            try:
                request = job.build()
            except Exception as exc:  # a bug in a template: recorded as the synchronous path records it
                error = {"attempt": 1, "kind": "exception", "status": None, "message": f"{type(exc).__name__}: {exc}"}
                self._write_failed(job, None, 1, [error], summary)
                continue
            groups.setdefault((job.model.provider, job.model.endpoint, job.model.name), []).append((job, request))
        planned: list[Pending] = []
        for items in groups.values():
            api = self._api(items[0][0].model)
            planned += plan_batches(
                self.journal,
                api,
                items,
                max_requests=min(api.limits.max_requests, self.batch_size or api.limits.max_requests),
                max_bytes=min(api.limits.max_bytes, self.max_bytes or api.limits.max_bytes),
                description=description,
                too_large=lambda job, request, error: self._write_failed(job, request, 1, [error], summary),
            )
        return planned

    # -- submitting, polling, collecting ---------------------------------------------------
    async def _drive(self, batches: list[Pending], jobs: dict[str, Job], summary: RunSummary, description: str) -> None:
        for pending in batches:
            if not pending.entry.batch_id and not pending.entry.downloaded:
                await self._ensure_created(pending, jobs, summary)
        waiting = [p for p in batches if p.entry.open and p.entry.refused is None]
        started = time.monotonic()
        statuses: dict[str, BatchStatus] = {}
        while waiting:
            if self._cancel_requested_elsewhere():  # bench batch cancel, from another shell
                journaled = self.journal.state().entries
                for pending in waiting:  # what it cancelled already is not cancelled twice
                    known = journaled.get(pending.entry.id)
                    if known is not None and known.cancel_requested:
                        pending.entry.cancel_requested, pending.entry.cancel_at = True, known.cancel_at
                await self._cancel_all(waiting)
            for pending in list(waiting):
                entry = pending.entry
                if not entry.downloaded:
                    if entry.batch_id is None:  # refused, or released as someone else's: planned again next round
                        waiting.remove(pending)
                        continue
                    status = await self._status(pending)
                    if status is None:
                        continue
                    statuses[entry.id] = status
                    if not status.ended:
                        continue
                    try:
                        lines = await self._download(pending, status)
                    except ProviderError as exc:
                        if not exc.retryable:
                            raise
                        self.reporter.note(f"batch {entry.batch_id}: results not available yet ({exc})")
                        continue
                else:
                    lines = [
                        ResultLine.from_json(row)
                        for row in self.journal.read_lines(self.journal.results_path(entry.id))
                    ]
                    status = statuses.get(entry.id) or BatchStatus(entry.state or "ended", True)
                self._collect(pending, lines, status, jobs, summary)
                waiting.remove(pending)
            self.reporter.progress(batch_progress(batches, statuses, description, started))
            if waiting:
                await asyncio.sleep(self.poll_interval)
        self.reporter.done()

    async def _ensure_created(self, pending: Pending, jobs: dict[str, Job], summary: RunSummary) -> None:
        """Give the entry its batch at the provider: found (an earlier attempt created it) or created now.

        An entry planned by an earlier process, or whose create call failed in a way that may have reached the
        provider (a timeout, a dropped connection, a 5xx), is looked up at the provider before it is sent again.
        """
        entry, api = pending.entry, pending.api
        if pending.lines is None:
            pending.lines = self.journal.read_lines(self.journal.requests_path(entry.id))
        look_first = entry.planned_at < self.started_at or bool(entry.released)
        attempt = 0
        while True:
            attempt += 1
            try:
                if look_first and await self._find(pending):
                    return
                if api.needs_upload and entry.file_id is None:
                    entry.file_id = await api.upload(entry.id, pending.lines)
                    self.journal.append("uploaded", entry.id, file_id=entry.file_id)
                batch_id = await api.create(entry.id, pending.lines, entry.file_id)
            except ProviderError as exc:
                if not exc.retryable:
                    self._refused(pending, exc, jobs, summary)
                    return
                if attempt >= self.retry.max_attempts:
                    raise
                self.reporter.note(f"batch {entry.id}: {exc}; trying again")
                await asyncio.sleep(self.retry.delay(attempt, exc.retry_after, self._rng))
                look_first = True  # the call may have reached the provider: look before sending it again
                continue
            self.journal.append("created", entry.id, batch_id=batch_id)
            entry.batch_id = batch_id
            return

    async def _find(self, pending: Pending) -> bool:
        """Adopt the provider's file and batch of this entry, if an earlier attempt made them; True if a batch."""
        entry, api = pending.entry, pending.api
        if api.needs_upload and entry.file_id is None:
            found_file = await api.find_upload(entry.id, entry.bytes)
            if found_file:
                self.journal.append("uploaded", entry.id, file_id=found_file, found=True)
                entry.file_id = found_file
        claimed = self.journal.state().claimed() | entry.released
        found = await api.find_batch(
            entry.id, file_id=entry.file_id, planned_at=entry.planned_at, n_requests=len(entry.keys), claimed=claimed
        )
        if found is None:
            return False
        self.journal.append("created", entry.id, batch_id=found.batch_id, found=True, confirmed=found.confirmed)
        entry.batch_id, entry.found, entry.confirmed = found.batch_id, True, found.confirmed
        self.reporter.note(f"found batch {found.batch_id} of an earlier attempt at the provider; collecting it")
        return True

    def _refused(self, pending: Pending, exc: ProviderError, jobs: dict[str, Job], summary: RunSummary) -> None:
        """A batch the provider would not take: nothing was created; its keys go to the next batch."""
        entry = pending.entry
        self.journal.append("refused", entry.id, message=str(exc), status=exc.status)
        entry.refused = str(exc)
        self.reporter.note(f"the provider refused batch {entry.id}: {exc}")
        lines = [ResultLine(custom_id(entry.id, i), ERRORED, status=None, message=str(exc)) for i in entry.unhandled()]
        self._collect(pending, lines, BatchStatus("refused", True), jobs, summary, kind="batch_refused")

    async def _status(self, pending: Pending) -> BatchStatus | None:
        entry = pending.entry
        assert entry.batch_id is not None
        try:
            status = await pending.api.status(entry.batch_id)
        except ProviderError as exc:
            if exc.retryable:
                self.reporter.note(f"batch {entry.batch_id}: status not available ({exc}); asking again")
                return None
            raise
        if status.state != entry.state or status.counts != entry.counts:
            self.journal.append("state", entry.id, state=status.state, counts=status.counts, ended=status.ended)
            entry.state, entry.counts, entry.ended = status.state, dict(status.counts), status.ended
        return status

    async def _download(self, pending: Pending, status: BatchStatus) -> list[ResultLine]:
        entry = pending.entry
        assert entry.batch_id is not None
        lines = await pending.api.results(entry.batch_id, status)
        self.journal.write_lines(self.journal.results_path(entry.id), [line.to_json() for line in lines])
        self.journal.append("downloaded", entry.id, n=len(lines), state=status.state)
        entry.downloaded = True
        return lines

    def _collect(
        self,
        pending: Pending,
        lines: list[ResultLine],
        status: BatchStatus,
        jobs: dict[str, Job],
        summary: RunSummary,
        *,
        kind: str | None = None,
    ) -> None:
        """Write the records of an ended batch's keys that this run holds; journal what became of each."""
        entry = pending.entry
        by_index: dict[int, ResultLine] = {}
        for position, line in enumerate(lines):
            index = index_of(line.custom_id, entry.id, position)
            if index is not None:
                by_index[index] = line
        if lines and not by_index and entry.found and not entry.confirmed:
            self.journal.append("released", entry.id, batch_id=entry.batch_id)  # listed, but not ours
            entry.released.add(str(entry.batch_id))
            entry.batch_id, entry.downloaded, entry.ended = None, False, False
            return
        state = self.journal.state()
        attempts = state.attempts()
        errors = state.errors()
        missing = status.extra.get("missing", ERRORED)
        outcome = {"ok": [], "failed": [], "skipped": [], "retry": []}
        for index in entry.unhandled():
            key = entry.keys[index]
            job = jobs.get(key)
            if job is None:
                continue  # a key of another stage of the run: collected when that stage runs
            if self.store.status(job.key) == OK or key in self._recorded:
                outcome["skipped"].append(index)
                continue
            line = by_index.get(index) or ResultLine(
                custom_id(entry.id, index), missing, message=f"not returned by batch {entry.batch_id} ({status.state})"
            )
            tries = max(1, attempts.get(key, 1))
            earlier = errors.get(key, [])
            if line.outcome == SUCCEEDED and line.body is not None:
                error = self._write_ok(job, line, tries, earlier, entry, summary)
                if error is None:
                    outcome["ok"].append(index)
                    continue
            else:
                error = {
                    "attempt": tries,
                    "kind": kind or (f"http_{line.status}" if line.status else f"batch_{line.outcome}"),
                    "status": line.status,
                    "message": line.message or line.outcome,
                }
            retryable = error.pop("retryable", None)
            if retryable is None:
                retryable = line.outcome in (EXPIRED, CANCELED) or line.status not in NOT_RETRYABLE
            if entry.cancel_requested and line.outcome == CANCELED and self._cancelled_here(entry):
                self._user_cancelled = True  # cancelled by the user during this run: not sent again now
                outcome["retry"].append({"i": index, **error})
            elif retryable and tries < self.retry.max_attempts:
                outcome["retry"].append({"i": index, **error})
            else:
                self._write_failed(job, None, tries, [*earlier, error], summary)
                outcome["failed"].append(index)
        self.journal.append("collected", entry.id, **outcome)
        for how in ("ok", "failed", "skipped"):
            for index in outcome[how]:
                entry.handled[index] = how
        for error in outcome["retry"]:
            entry.handled[int(error["i"])] = "retry"

    def _write_ok(
        self, job: Job, line: ResultLine, tries: int, earlier: list[dict[str, Any]], entry: Entry, summary: RunSummary
    ) -> dict[str, Any] | None:
        """Record a returned answer as the synchronous path records it; the error when it cannot be read."""
        request = job.build()
        try:
            response = self._api(job.model).parse(line.body or {})
            parsed = job.parse(response) if job.parse is not None else {}
        except ProviderError as exc:
            return {
                "attempt": tries,
                "kind": exc.kind,
                "status": exc.status,
                "message": str(exc),
                "retryable": exc.retryable,
            }
        except Exception as exc:
            return {
                "attempt": tries,
                "kind": "exception",
                "status": None,
                "message": f"{type(exc).__name__}: {exc}",
                "retryable": False,
            }
        record = self.sync._record(
            job, OK, request, tries, iso(entry.planned_at), list(earlier), response, parsed, None
        )
        self.store.append(record)
        self._recorded.add(job.key.id)
        summary.succeeded += 1
        return None

    def _write_failed(
        self,
        job: Job,
        request: ChatRequest | None,
        tries: int,
        errors: list[dict[str, Any]],
        summary: RunSummary,
    ) -> None:
        if request is None:
            try:
                request = job.build()
            except Exception:
                request = None
        started = iso(now())
        record = self.sync._record(job, FAILED, request, tries, started, errors, None, None, None)
        self.store.append(record)
        self._recorded.add(job.key.id)
        summary.failed += 1

    # -- interruption ----------------------------------------------------------------------
    def _open_count(self) -> int:
        state = self.journal.state()
        return sum(1 for e in state.entries.values() if e.open and e.batch_id and not e.downloaded)

    def _cancelled_here(self, entry: Entry) -> bool:
        return entry.cancel_at is None or entry.cancel_at >= self.started_at

    def _cancel_requested_elsewhere(self) -> bool:
        state = self.journal.state()
        return any(at >= self.started_at for at in state.cancel_all)

    async def _cancel_all(self, waiting: list[Pending]) -> None:
        """Cancel this run's open batches at the provider (``bench batch cancel`` or a second Ctrl-C)."""
        for pending in waiting:
            entry = pending.entry
            if entry.batch_id and not entry.downloaded and not entry.cancel_requested:
                try:
                    await asyncio.wait_for(pending.api.cancel(entry.batch_id), timeout=30)
                except (ProviderError, TimeoutError) as exc:
                    self.reporter.note(f"batch {entry.batch_id}: could not cancel ({exc}); it may go on running")
                    continue
                self.journal.append("cancel_requested", entry.id, batch_id=entry.batch_id)
                entry.cancel_requested, entry.cancel_at = True, now()
        self._user_cancelled = True

    async def _on_interrupt(self) -> bool:
        """After the first Ctrl-C: wait ``cancel_grace`` seconds for a second one, then cancel or leave running."""
        task = asyncio.current_task()
        if task is not None:
            task.uncancel()
        open_batches = self._open_count()
        if open_batches == 0:
            return False
        self.reporter.note(
            f"stopped waiting: {open_batches} batch(es) keep running at the provider (run the same command again "
            f"to collect them; nothing is submitted twice). Press Ctrl-C again within {self.cancel_grace:g} s "
            "to cancel them."
        )
        try:
            await asyncio.wait_for(self._cancel.wait(), timeout=self.cancel_grace)
        except TimeoutError:
            return False
        state = self.journal.state()
        waiting = []
        for entry in state.entries.values():
            if not (entry.open and entry.batch_id and not entry.downloaded):
                continue
            api = self._apis.get((entry.provider, entry.endpoint, entry.model))
            if api is None:
                self.reporter.note(f"batch {entry.batch_id}: no client for it here; use bench batch cancel")
                continue
            waiting.append(Pending(entry, api))
        await self._cancel_all(waiting)
        return True
