"""The write-ahead journal of a run directory's provider batches (``batches.jsonl``, ``batches/``).

Why a journal: a batch is paid for once the provider has created it, whether or not the process that
asked for it lives to read the answer. So every batch is written down BEFORE it exists at the provider,
and every id it gets is written down the moment it exists: a process killed at any point (before the
upload, after it, after the create call, while polling, while downloading) leaves a journal from which
the next run finds the batch (by the id, or by the provider's own record of the entry id, see
``bench_core.kernel.providers.batch``) and collects it, instead of sending the same keys again.

Layout, beside ``results.jsonl``:

- ``batches.jsonl``: one event per line, each written with one ``write`` on an ``O_APPEND`` descriptor
  and fsynced before the step it announces is taken. A line cut short by a kill can only be the last one;
  it is skipped when read and cut away before the next append.
- ``batches/<entry>.requests.jsonl``: the exact request lines of the entry (fsynced before its
  ``planned`` event), so a resumed entry is submitted with the same custom_ids.
- ``batches/<entry>.results.jsonl``: the provider's answers, normalised (``ResultLine``), fsynced
  before the ``downloaded`` event; collecting them again after a kill needs no network.

Events (``event`` field): ``planned`` (entry id, provider, model, endpoint, the result keys it carries, in
custom_id order), ``uploaded`` (file id), ``created`` (batch id; ``found`` when it was found by listing
after a kill, ``confirmed`` False when only time and size matched), ``released`` (a batch found by
listing proved to be someone else's), ``state`` (a state change with request counts), ``downloaded``,
``collected`` (which keys were written as results, which failed for good, which are to be retried and
why), ``cancel_requested`` (for one entry, or ``entry`` null: every open batch of the directory).
"""

from __future__ import annotations

import datetime as dt
import json
import os
import secrets
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench_core.kernel.providers.batch import TAG
from bench_core.kernel.rundir import read_jsonl
from bench_core.kernel.store import ResultKey

JOURNAL_FILE = "batches.jsonl"
BATCH_DIR = "batches"


def now() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


def iso(moment: dt.datetime) -> str:
    return moment.isoformat(timespec="milliseconds")


def key_of(key_id: str) -> ResultKey:
    """The ``ResultKey`` whose ``id`` is ``key_id`` (the journal stores ids, the store records dicts)."""
    return ResultKey(*key_id.split("\x1f"))


@dataclass
class Entry:
    """One journal entry folded from its events: a batch planned, and how far it got."""

    id: str
    provider: str
    model: str
    endpoint: str
    keys: list[str]
    planned_at: dt.datetime
    bytes: int = 0
    description: str = ""
    file_id: str | None = None
    batch_id: str | None = None
    found: bool = False
    confirmed: bool = True
    released: set[str] = field(default_factory=set)
    state: str | None = None
    counts: dict[str, int] = field(default_factory=dict)
    ended: bool = False
    downloaded: bool = False
    refused: str | None = None
    handled: dict[int, str] = field(default_factory=dict)  # index -> ok | failed | retry | skipped
    errors: dict[int, list[dict[str, Any]]] = field(default_factory=dict)
    cancel_requested: bool = False
    cancel_at: dt.datetime | None = None  # when the cancel was asked (a rerun after it sends the rest again)

    @property
    def open(self) -> bool:
        """True while some key of the entry has no outcome yet (a result, a failure, or a retry elsewhere)."""
        return len(self.handled) < len(self.keys)

    def unhandled(self) -> list[int]:
        return [index for index in range(len(self.keys)) if index not in self.handled]

    @property
    def attempted(self) -> bool:
        """True when the provider has (or may have) seen the entry: created, or refused at creation."""
        return self.batch_id is not None or self.refused is not None

    @property
    def phase(self) -> str:
        """Where the entry stands: planned, uploaded, submitted, ended, downloaded, collected."""
        if not self.open:
            return "collected"
        if self.downloaded:
            return "downloaded"
        if self.ended:
            return "ended"
        if self.batch_id:
            return "submitted"
        if self.file_id:
            return "uploaded"
        return "planned"


@dataclass
class JournalState:
    """Every entry of a run directory, and the times ``bench batch cancel`` asked to cancel them all."""

    entries: dict[str, Entry]
    cancel_all: list[dt.datetime]

    def claimed(self) -> set[str]:
        return {entry.batch_id for entry in self.entries.values() if entry.batch_id}

    def attempts(self) -> dict[str, int]:
        """Per key id: how many batches have carried it (the ``attempts`` of its result record)."""
        counts: dict[str, int] = {}
        for entry in self.entries.values():
            if entry.attempted:
                for key in entry.keys:
                    counts[key] = counts.get(key, 0) + 1
        return counts

    def errors(self) -> dict[str, list[dict[str, Any]]]:
        """Per key id: the errors of the batches that did not return it, oldest first."""
        found: dict[str, list[dict[str, Any]]] = {}
        for entry in sorted(self.entries.values(), key=lambda e: e.planned_at):
            for index, errors in entry.errors.items():
                found.setdefault(entry.keys[index], []).extend(errors)
        return found

    def batch_ok(self) -> set[str]:
        """Key ids whose stored result came from a batch (what the usage report prices at the batch rate)."""
        return {entry.keys[i] for entry in self.entries.values() for i, how in entry.handled.items() if how == "ok"}


class BatchJournal:
    """The journal of one run directory (see the module docstring)."""

    def __init__(self, run_dir: str | Path) -> None:
        self.run_dir = Path(run_dir)
        self.path = self.run_dir / JOURNAL_FILE
        self.folder = self.run_dir / BATCH_DIR

    @staticmethod
    def new_entry_id() -> str:
        """``medrev`` and 12 hex digits: unique, and valid in every provider's custom_id and names."""
        return f"{TAG}{secrets.token_hex(6)}"

    def exists(self) -> bool:
        return self.path.exists()

    def requests_path(self, entry: str) -> Path:
        return self.folder / f"{entry}.requests.jsonl"

    def results_path(self, entry: str) -> Path:
        return self.folder / f"{entry}.results.jsonl"

    # -- writing ---------------------------------------------------------------------------
    def append(self, event: str, entry: str | None, **fields: Any) -> None:
        """Append one event and fsync it: once this returns, the event survives a kill or a power cut."""
        self.run_dir.mkdir(parents=True, exist_ok=True)
        self._repair()
        created = not self.path.exists()
        line = json.dumps({"event": event, "entry": entry, "at": iso(now()), **fields}, ensure_ascii=False)
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, (line + "\n").encode())
            os.fsync(fd)
        finally:
            os.close(fd)
        if created:
            _fsync_dir(self.run_dir)

    def write_lines(self, path: Path, rows: Iterable[dict[str, Any]]) -> int:
        """Write a side file of the journal whole and fsync it (and its folder); the bytes written."""
        path.parent.mkdir(parents=True, exist_ok=True)
        data = "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows).encode()
        tmp = path.with_name(path.name + ".tmp")
        with tmp.open("wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
        _fsync_dir(path.parent)
        return len(data)

    def read_lines(self, path: Path) -> list[dict[str, Any]]:
        return read_jsonl(path)

    def _repair(self) -> None:
        """Cut a last line left without its newline by a killed writer, so the next event starts a line of its own.

        Checked before every append (one byte read): the writer killed may be another process, such as a
        ``bench batch cancel`` killed while this run waits. A live writer's line is never seen half-written:
        each event is one ``write`` on an ``O_APPEND`` descriptor.
        """
        try:
            handle = self.path.open("rb+")
        except FileNotFoundError:
            return
        with handle:
            size = handle.seek(0, os.SEEK_END)
            if size == 0:
                return
            handle.seek(size - 1)
            if handle.read(1) == b"\n":
                return
            handle.seek(0)
            data = handle.read()
            handle.truncate(data.rfind(b"\n") + 1)
            handle.flush()
            os.fsync(handle.fileno())

    # -- reading ---------------------------------------------------------------------------
    def state(self) -> JournalState:
        """Every entry, folded from its events in file order."""
        entries: dict[str, Entry] = {}
        cancel_all: list[dt.datetime] = []
        for row in read_jsonl(self.path):
            event, name = row.get("event"), row.get("entry")
            at = _parse_time(row.get("at"))
            if event == "cancel_requested" and name is None:
                cancel_all.append(at)
                for entry in entries.values():
                    if entry.batch_id is not None and entry.open and not entry.cancel_requested:
                        entry.cancel_requested, entry.cancel_at = True, at
                continue
            if event == "planned":
                entries[name] = Entry(
                    id=name,
                    provider=str(row["provider"]),
                    model=str(row["model"]),
                    endpoint=str(row["endpoint"]),
                    keys=[str(k) for k in row["keys"]],
                    planned_at=at,
                    bytes=int(row.get("bytes") or 0),
                    description=str(row.get("description") or ""),
                )
                continue
            entry = entries.get(name)
            if entry is None:
                continue
            if event == "uploaded":
                entry.file_id = row.get("file_id")
            elif event == "created":
                entry.batch_id = row.get("batch_id")
                entry.found = bool(row.get("found"))
                entry.confirmed = bool(row.get("confirmed", True))
            elif event == "released":
                entry.released.add(str(row.get("batch_id")))
                entry.batch_id, entry.found, entry.confirmed = None, False, True
                entry.state, entry.counts, entry.ended = None, {}, False
            elif event == "state":
                entry.state = row.get("state")
                entry.counts = dict(row.get("counts") or {})
                entry.ended = bool(row.get("ended"))
            elif event == "refused":
                entry.refused = str(row.get("message"))
            elif event == "downloaded":
                entry.downloaded = True
                entry.ended = True
            elif event == "cancel_requested":
                entry.cancel_requested, entry.cancel_at = True, at
            elif event == "collected":
                for how in ("ok", "failed", "skipped"):
                    for index in row.get(how) or []:
                        entry.handled[int(index)] = how
                for error in row.get("retry") or []:
                    index = int(error["i"])
                    entry.handled[index] = "retry"
                    entry.errors.setdefault(index, []).append({k: v for k, v in error.items() if k != "i"})
        return JournalState(entries, cancel_all)


def _parse_time(value: Any) -> dt.datetime:
    try:
        return dt.datetime.fromisoformat(str(value))
    except ValueError:
        return now()


def _fsync_dir(directory: Path) -> None:
    """Make a file's creation or rename durable (its directory entry is data of the folder)."""
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)
